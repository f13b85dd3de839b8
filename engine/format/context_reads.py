"""`rules check` of what templates and conditions read of ``context``: every key read as
``context.KEY`` (or ``context["KEY"]``) is one the pack declares under ``context:``, and a
key read inside a declared value fits its declared type (a string or a number has no keys).
"""

from __future__ import annotations

from collections.abc import Mapping

from jinja2 import nodes

from engine.core.suggest import did_you_mean
from engine.format.findings import FindingRule
from engine.format.vocabulary import ContextKey
from engine.sandbox.static import context_reads

UNDECLARED_CONTEXT_READ = FindingRule(
    "undeclared-context-read",
    "A template or condition reads a key of `context` the pack does not declare, or a key "
    "inside a context value whose declared type has none.",
    "Declare the key under `context:`, or fix its name.",
)

_SCALARS = frozenset({"string", "path", "int", "number", "bool"})


def context_problems(
    declared: Mapping[str, ContextKey], tree: nodes.Template
) -> list[tuple[str, str, int]]:
    """(message, hint, line) for each read of ``context`` that the declared keys do not
    allow, in the order of the template."""
    out: list[tuple[str, str, int]] = []
    for path, line in context_reads(tree):
        key, rest = path[0], path[1:]
        spec = declared.get(key)
        shown = "context." + ".".join(path)
        if spec is None:
            hint = did_you_mean(
                key,
                declared,
                f"declared context keys: {', '.join(sorted(declared)) or 'none'}",
                shown=lambda close: f"'context.{close}'",
            )
            out.append((f"reads {shown}, but the pack declares no context key {key!r}", hint, line))
            continue
        if not rest:
            continue
        if spec.type in _SCALARS or spec.type == "list":
            kind = spec.type if spec.type != "list" else f"list of {spec.items or 'string'}"
            out.append(
                (
                    f"reads {shown}, but context.{key} is declared {kind}: it has no key "
                    f"{rest[0]!r}",
                    f"read context.{key} itself, or declare it as a map",
                    line,
                )
            )
    return out
