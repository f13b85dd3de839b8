"""Output formats: pure functions from results to text, one module per format (text, json,
github, sarif, junit, md, html), found through one registry keyed by result type.

``FORMATS`` says which formats each result type has (a command's ``--format`` choices come
from it); ``render`` finds the function named after the result type in the format's module.
"""

from __future__ import annotations

import importlib
from typing import Any

FORMATS: dict[str, tuple[str, ...]] = {
    "check": ("github", "json", "junit", "sarif", "text"),
    "test": ("text", "json", "github", "junit", "sarif"),
    "evaluation": ("text", "json"),
    "explain": ("text", "md"),
    "patterns": ("text", "md"),
    "backtest": ("html", "json", "junit", "md", "text"),
    "packs": ("text", "json"),
    "rules": ("text", "json"),
    "session": ("html",),
    "gate": ("text", "json"),
    "conflicts": ("text", "json"),
    "conflict_list": ("text", "json"),
    "parse": ("text", "json"),
    "budgets": ("text", "json"),
}
"""Result type -> the formats it can be written in (the first of a command's choices is not
its default: each command names its own)."""

OWN_MODULES: dict[str, str] = {"parse": "engine.report.parse"}
"""Result types whose formats live in a module of their own (a function per format), so the
command that writes them imports nothing else of this package."""


def formats(result_type: str) -> tuple[str, ...]:
    """The formats ``result_type`` can be written in."""
    return FORMATS[result_type]


def render(result_type: str, output_format: str, *result: Any) -> str:
    """``result`` (the arguments of the formatter) written as ``output_format``."""
    if output_format not in FORMATS.get(result_type, ()):
        raise ValueError(f"no {output_format!r} format for {result_type!r} results")
    # Imported on use: a command pays only for the format it writes; all of them are 0.19 s
    # of imports (SARIF's rule catalogue 0.14 s of it; python -X importtime).
    own = OWN_MODULES.get(result_type)
    if own is not None:
        text: str = getattr(importlib.import_module(own), output_format)(*result)
        return text
    module = importlib.import_module(f"engine.report.{output_format}")
    text = getattr(module, result_type)(*result)
    return text
