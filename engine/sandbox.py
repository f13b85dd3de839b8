"""The sandboxed Jinja2 environment: templates and condition expressions of packs.

A shared pack cannot run code (``SandboxedEnvironment``) and a misspelt variable fails
loudly (``StrictUndefined``). What each kind of template may use is declared here, once,
so `rules check` can name a variable that the engine will never provide.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any

from jinja2 import StrictUndefined, meta, nodes
from jinja2.sandbox import SandboxedEnvironment

from engine.clock import add_minutes
from engine.patterns import PatternError, compile_pattern
from engine.textio import find_word

# Variables the engine provides to a template, by the template's purpose. Generic only:
# templates may also use every context key their pack declares.
TEMPLATE_VARIABLES: dict[str, frozenset[str]] = {
    # the conflict presentation and the decisions record (engine.policy.conflicts)
    "conflicts": frozenset({"conflicts", "total", "rounds", "context"}),
    # a block's first prompt, with the decisions of the previous round
    "initial": frozenset(
        {
            "block",
            "resolutions",
            "params",
            "context",
            "example",
            "example_source",
            "example_tier",
            "example_truncated",
        }
    ),
    "repair": frozenset(
        {
            "block_type",
            "nonce",
            "parser_error",
            "micro_hint",
            "original_output",
            "format_contract",
            "failure_type",
            "attempt",
            "max_attempts",
            "params",
            "context",
        }
    ),
    "retry": frozenset(
        {
            "block",
            "block_type",
            "attempt",
            "max_attempts",
            "retries_left",
            "failure_type",
            "failure_message",
            "failures",
            "data",
            "modification",
            "example",
            "example_source",
            "example_tier",
            "example_truncated",
            "context",
        }
    ),
    "escalation": frozenset(
        {
            "block",
            "block_type",
            "attempt",
            "max_attempts",
            "retries_left",
            "failure_type",
            "failure_message",
            "failures",
            "data",
            "context",
        }
    ),
    "reprompt": frozenset(
        {
            "gate",
            "action",
            "valid",
            "errors",
            "missing",
            "checked",
            "outputs",
            "retry",
            "max_retry",
            "timestamp",
            "timestamp_compact",
            "output_file",
            "descriptions",
            "artifact",
            "context",
        }
    ),
    "artifact": frozenset(
        {
            "gate",
            "action",
            "valid",
            "errors",
            "missing",
            "checked",
            "outputs",
            "retry",
            "max_retry",
            "timestamp",
            "timestamp_compact",
            "output_file",
            "context",
        }
    ),
    "example": frozenset({"block", "context"}),
    "log": frozenset({"entries", "rounds", "session", "gate_results"}),
    "presentation": frozenset(
        {
            "block",
            "limit",
            "action",
            "message",
            "recommendation",
            "figures",
            "items",
            "context",
        }
    ),
}

# Variables of the gates' decision rules, and of their detection rules (with the context).
GATE_VARIABLES: frozenset[str] = frozenset(
    {
        "gate",
        "valid",
        "errors",
        "missing",
        "checked",
        "retry",
        "max_retry",
        "context",
    }
)
DETECT_VARIABLES: frozenset[str] = frozenset({"output", "context"})
# Variables of a condition on one context-list item (which items a coverage check or a
# rate limit counts).
ITEM_VARIABLES: frozenset[str] = frozenset({"item", "context"})

# Variables a condition expression (guards) may use.
CONDITION_VARIABLES: frozenset[str] = frozenset(
    {
        "output",
        "error",
        "failure_type",
        "failures",
        "attempt",
        "max_attempts",
        "block",
        "previous_errors",
        "status",
        "warnings",
        "data",
        "context",
        "missing",
        "errors",
    }
)


def _regex_test(value: Any, pattern: str) -> bool:
    try:
        return compile_pattern(pattern).search(str(value)) is not None
    except PatternError:
        return False


def _regex_fullmatch(value: Any, pattern: str) -> bool:
    try:
        return compile_pattern(pattern).fullmatch(str(value)) is not None
    except PatternError:
        return False


def _json(value: Any) -> str:
    """One line of JSON, non-ASCII kept (Jinja's ``tojson`` escapes for HTML)."""
    return json.dumps(value, ensure_ascii=False)


def _json_pretty(value: Any, indent: int = 2) -> str:
    """Indented JSON, non-ASCII kept, keys in their given order."""
    return json.dumps(value, ensure_ascii=False, indent=indent)


def _percent(value: Any, digits: int = 0) -> str:
    """A ratio as a percentage, as Python's ``{:.0%}`` writes it (0.4166 -> 42%)."""
    try:
        return format(float(value), f".{int(digits)}%")
    except (TypeError, ValueError):
        return str(value)


def make_environment() -> SandboxedEnvironment:
    env = SandboxedEnvironment(
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.tests["search"] = _regex_test
    env.tests["fullmatch"] = _regex_fullmatch
    env.filters["json"] = _json
    env.filters["json_pretty"] = _json_pretty
    env.filters["add_minutes"] = add_minutes
    env.filters["percent"] = _percent
    return env


ENVIRONMENT = make_environment()


@lru_cache(maxsize=4096)
def compile_condition(expression: str) -> Callable[..., Any]:
    """A condition expression compiled once per process: checking a pack and compiling it
    at load share the work."""
    return ENVIRONMENT.compile_expression(expression)


@lru_cache(maxsize=1024)
def undeclared_names(source: str) -> frozenset[str]:
    """The variables a template (or expression) reads without defining them (once per
    source: a base pack's templates are checked with every pack that extends it)."""
    return frozenset(meta.find_undeclared_variables(ENVIRONMENT.parse(source)))


def first_use(source: str, name: str) -> tuple[int, int]:
    """1-based line and column of the first use of variable ``name`` in a template."""
    tree = ENVIRONMENT.parse(source)
    lines = source.splitlines()
    for node in tree.find_all(nodes.Name):
        if node.name == name and node.ctx == "load":
            line = node.lineno
            text = lines[line - 1] if 0 < line <= len(lines) else ""
            index = find_word(text, name)
            return line, index + 1 if index >= 0 else 1
    return 1, 1


def expression_source(expression: str) -> str:
    """A condition as a template, so its names can be listed like a template's."""
    return "{{ (" + expression + ") }}"
