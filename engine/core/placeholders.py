"""Message templates with ``{name}`` placeholders, as packs write them.

A brace pair holding anything that is not a known name (such as the ``{6}`` of a regex
quantifier) is left as written. Values are inserted raw, unescaped.
"""

from __future__ import annotations

import re
import string
from collections.abc import Mapping

from engine.core.textio import int_text

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)\}")


def fill(template: str, values: Mapping[str, object]) -> str:
    """Replace ``{name}`` for every known name; leave anything else exactly as written."""

    def replace(match: re.Match[str]) -> str:
        name = match.group(1)
        if name not in values:
            return match.group(0)
        value = values[name]
        return int_text(value) if isinstance(value, int) else str(value)

    return _PLACEHOLDER.sub(replace, template)


def placeholders(template: str) -> set[str]:
    return set(_PLACEHOLDER.findall(template))


def render_list(keys: list[str]) -> str:
    """``['a', 'b']``: sorted keys in single quotes, no escaping."""
    return "[" + ", ".join(f"'{k}'" for k in sorted(keys)) + "]"


# --------------------------------------------------------------------------- figures

FIGURES: frozenset[str] = frozenset({"count", "total", "ratio", "threshold", "rounds", "round"})
"""The figures a rate limit's message and recommendation may use."""


class FigureError(ValueError):
    """A figure template that names an unknown figure or has an invalid format spec."""


Part = tuple[str, str | None, str]
"""Literal text, then a figure name (None: none) and its format spec."""


def compile_figures(template: str, names: frozenset[str]) -> tuple[Part, ...]:
    """Parse ``{name}`` / ``{name:spec}`` placeholders once (Python format specs, e.g.
    ``{ratio:.0%}``); ``{{`` and ``}}`` are literal braces. Names are plain: no attribute
    or index access, no conversions."""
    try:
        parsed = list(string.Formatter().parse(template))
    except ValueError as exc:
        raise FigureError(f"{template!r}: {exc}") from None
    parts: list[Part] = []
    for text, name, spec, conversion in parsed:
        if name is None:
            parts.append((text, None, ""))
            continue
        if name not in names or conversion:
            raise FigureError(f"{template!r}: unknown figure {{{name}}}")
        spec = spec or ""
        if "{" in spec:
            raise FigureError(f"{template!r}: nested braces in the spec of {{{name}}}")
        try:
            format(0.5, spec)
        except ValueError:
            try:
                format(1, spec)
            except ValueError:
                raise FigureError(
                    f"{template!r}: invalid format spec {spec!r} of {{{name}}}"
                ) from None
        parts.append((text, name, spec))
    return tuple(parts)


def fill_figures(parts: tuple[Part, ...], values: Mapping[str, object]) -> str:
    """The text of compiled figure ``parts`` with ``values`` (a missing value: empty)."""
    out = []
    for text, name, spec in parts:
        out.append(text)
        if name is not None:
            value = values.get(name)
            if value is None:
                continue
            try:
                out.append(format(value, spec))
            except (ValueError, TypeError):
                out.append(str(value))
    return "".join(out)
