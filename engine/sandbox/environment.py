"""The sandboxed Jinja2 environment: templates and condition expressions of packs.

A shared pack cannot run code (``SandboxedEnvironment``) and a misspelt variable fails
loudly (``StrictUndefined``). What each kind of template and condition may use is declared
by the section that owns it (``engine.policy``, ``engine.prompts``); the checks pass it in.

Bounds: ``*`` and ``**`` are intercepted (so nothing is constant-folded at compile time)
and refuse results over ``MAX_RENDER_CHARS`` characters or ``MAX_POWER_BITS`` bits; ``~``
and ``+`` are compiled to ``BoundedEnvironment.bounded_concat`` and ``bounded_add``, which
refuse results over ``MAX_RENDER_CHARS`` characters (or items);
``range`` gives at most ``MAX_RANGE`` numbers and checks the render's deadline as it goes;
a render stops after ``MAX_RENDER_SECONDS`` or ``MAX_RENDER_CHARS`` characters of output.
A sandbox violation, a bound reached or any other error a template raises while it renders
(``1/0``, ``[1, 'a']|sort``, an undefined attribute) is a ``RenderError`` naming the
template and line; a lone surrogate in the output becomes U+FFFD.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from functools import lru_cache
from typing import Any

import jinja2
from jinja2 import StrictUndefined, nodes
from jinja2.sandbox import SandboxedEnvironment

from engine.core.clock import add_minutes
from engine.core.errors import ConditionError, Position
from engine.core.patterns import PatternError, compile_pattern
from engine.core.textio import find_word
from engine.sandbox import budget
from engine.sandbox.bounded import BoundedEnvironment, BoundedTemplate, reason
from engine.sandbox.bounds import bounded_output, find_undeclared_names, harden
from engine.sandbox.budget import MAX_RANGE, BoundedRange
from engine.sandbox.conditions import Closure, builds_values, native_condition
from engine.sandbox.fence import fence
from engine.sandbox.static import wide_constants


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
    env = BoundedEnvironment(
        finalize=bounded_output,
        optimized=False,
        undefined=StrictUndefined,
        keep_trailing_newline=True,
        autoescape=False,
        trim_blocks=True,
        lstrip_blocks=True,
    )
    env.tests.update(search=_regex_test, fullmatch=_regex_fullmatch)
    env.filters.update(
        json=_json, json_pretty=_json_pretty, add_minutes=add_minutes, percent=_percent, fence=fence
    )
    env.globals["range"] = BoundedRange
    harden(env)
    env.template_class = BoundedTemplate
    return env


ENVIRONMENT = make_environment()


MAX_EXPRESSION_CHARS = 4000
MAX_EXPRESSION_DEPTH = 40


def expression_problem(expression: str) -> str | None:
    """Why an expression is too big to compile safely (length, bracket depth), or None."""
    if len(expression) > MAX_EXPRESSION_CHARS:
        return f"{len(expression)} characters (at most {MAX_EXPRESSION_CHARS})"
    depth = deepest = 0
    for char in expression:
        if char in "([{":
            depth += 1
            deepest = max(deepest, depth)
        elif char in ")]}":
            depth -= 1
    if deepest > MAX_EXPRESSION_DEPTH:
        return f"brackets nested {deepest} deep (at most {MAX_EXPRESSION_DEPTH})"
    return None


@lru_cache(maxsize=4096)
def _condition_parts(expression: str) -> tuple[Callable[..., Any], Closure | None, bool]:
    """The expression compiled by Jinja and, when it is simple enough, as a closure; and
    whether that closure may build values (engine.sandbox.conditions.builds_values)."""
    native = native_condition(ENVIRONMENT, expression)
    builds = native is not None and builds_values(ENVIRONMENT, expression)
    return ENVIRONMENT.compile_expression(expression), native, builds


@lru_cache(maxsize=4096)
def compile_condition(expression: str, where: Position | None = None) -> Callable[..., Any]:
    """A condition expression compiled once per process: checking a pack and compiling it
    at load share the work. A simple expression runs as a Python closure
    (engine.sandbox.conditions) and falls back to Jinja whenever the closure raises, so Jinja's
    result or error stands wherever the closure does not finish.

    Whatever the expression raises as it runs (``1/0``, ``output < 50``, a sandbox bound,
    an undefined name) is a ``ConditionError`` naming it and ``where`` it is in the pack,
    for every caller alike."""
    jinja, native, builds = _condition_parts(expression)

    def run_jinja(variables: dict[str, Any]) -> Any:
        try:
            return jinja(**variables)
        except Exception as exc:
            raise ConditionError(expression, reason(exc), where) from None

    def condition(**variables: Any) -> Any:
        token = budget.start()
        try:
            return run_jinja(variables)
        finally:
            budget.stop(token)

    if native is None:
        return condition

    def native_first(**variables: Any) -> Any:
        token = budget.start()  # one budget for the closure and Jinja after it
        try:
            result = native(variables)
        except Exception:  # a name not given, a type error...: Jinja decides and reports
            return run_jinja(variables)
        finally:
            budget.stop(token)
        # Jinja gives None for an undefined result (a missing attribute)
        return None if isinstance(result, jinja2.Undefined) else result

    def native_scalar(**variables: Any) -> Any:
        """A closure that builds nothing (``output | length < 50``): no budget to set up,
        the condition's most frequent case."""
        try:
            result = native(variables)
        except Exception:  # a name not given, a type error...: Jinja decides and reports
            return condition(**variables)
        return None if isinstance(result, jinja2.Undefined) else result

    return native_first if builds else native_scalar


@lru_cache(maxsize=1024)
def undeclared_names(source: str) -> frozenset[str]:
    """The variables a template (or expression) reads without defining them (once per
    source: a base pack's templates are checked with every pack that extends it).

    Jinja's ``find_undeclared_variables`` counts a name set inside an ``{% if %}`` branch
    as read from outside wherever it is read, even right after the branch sets it; such
    names are left out (reading one where no branch set it fails at render, naming the
    template and line)."""
    tree = ENVIRONMENT.parse(source)
    set_in_branches = {
        name.name
        for branch in tree.find_all(nodes.If)
        for name in branch.find_all(nodes.Name)
        if name.ctx == "store"
    }
    return frozenset(find_undeclared_names(ENVIRONMENT, tree) - set_in_branches)


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


_IMPORTS = (nodes.Include, nodes.Import, nodes.FromImport, nodes.Extends)


def _range_length(node: nodes.Call) -> int | None:
    """The length of ``range(...)`` with constant arguments, else None."""
    if not isinstance(node.node, nodes.Name) or node.node.name != "range":
        return None
    values = [a.value for a in node.args if isinstance(a, nodes.Const)]
    if len(values) != len(node.args) or not all(isinstance(v, int) for v in values):
        return None
    try:
        return len(range(*values))
    except (TypeError, ValueError):
        return None


@lru_cache(maxsize=1024)
def unsafe_constructs(source: str) -> tuple[tuple[int, str], ...]:
    """(line, problem) for what the sandbox refuses or cannot bound, seen without rendering:
    names starting with ``_``, include/import/extends, ``range`` over MAX_RANGE, nested
    constant loops of more than MAX_RANGE iterations in all, and constant widths, counts
    and repetitions over the value bound (engine.sandbox.static)."""
    tree = ENVIRONMENT.parse(source)
    found: list[tuple[int, str]] = []
    for access in tree.find_all((nodes.Getattr, nodes.Getitem)):
        name = getattr(access, "attr", None) or getattr(getattr(access, "arg", None), "value", None)
        if isinstance(name, str) and name.startswith("_"):
            found.append((access.lineno, f"attribute {name!r} is refused by the sandbox"))
    for statement in tree.find_all(_IMPORTS):
        found.append((statement.lineno, "templates cannot include, import or extend other files"))
    for call in tree.find_all(nodes.Call):
        length = _range_length(call)
        if length is not None and length > MAX_RANGE:
            found.append((call.lineno, f"range of {length} numbers (at most {MAX_RANGE})"))
    for loop in tree.find_all(nodes.For):
        total = 1
        for inner in [loop, *loop.find_all(nodes.For)]:
            length = _range_length(inner.iter) if isinstance(inner.iter, nodes.Call) else None
            total *= length or 1
        if total > MAX_RANGE * 10:
            found.append((loop.lineno, f"nested loops of {total} iterations"))
            break
    found.extend(wide_constants(tree))
    return tuple(sorted(set(found)))
