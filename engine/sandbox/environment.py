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
import math
import time
from collections.abc import Callable, Iterator
from contextvars import ContextVar
from functools import lru_cache
from typing import Any

import jinja2
from jinja2 import StrictUndefined, meta, nodes
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment

from engine.core.clock import add_minutes
from engine.core.errors import ConditionError, Position, RenderError
from engine.core.patterns import PatternError, compile_pattern
from engine.core.textio import clean_text, find_word
from engine.sandbox.bounds import (
    NoFoldingGenerator,
    bounded_output,
    harden,
    refuse_large_text,
    refuse_wide_format,
)
from engine.sandbox.conditions import Closure, native_condition


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


MAX_RENDER_SECONDS = 5.0
MAX_RENDER_CHARS = 4 * 1024 * 1024
MAX_RANGE = 100_000
MAX_POWER_BITS = 4096

_DEADLINE: ContextVar[float | None] = ContextVar("render_deadline", default=None)


def _past_deadline() -> bool:
    deadline = _DEADLINE.get()
    return deadline is not None and time.monotonic() > deadline


class _BoundedRange:
    """``range`` for templates: at most MAX_RANGE numbers, the deadline checked as it runs."""

    def __init__(self, *args: int) -> None:
        self.numbers = range(*args)
        if len(self.numbers) > MAX_RANGE:
            raise SecurityError(f"range of {len(self.numbers)} numbers (at most {MAX_RANGE})")

    def __len__(self) -> int:
        return len(self.numbers)

    def __getitem__(self, index: int) -> int:
        return self.numbers[index]

    def __iter__(self) -> Iterator[int]:
        for count, number in enumerate(self.numbers):
            if count % 1024 == 0 and _past_deadline():
                raise SecurityError(f"render ran over {MAX_RENDER_SECONDS:g} s")
            yield number


def _size(value: Any) -> int | None:
    return len(value) if isinstance(value, str | list | tuple) else None


class BoundedEnvironment(SandboxedEnvironment):
    """The sandbox with bounded ``*`` and ``**`` (intercepted, so never constant-folded),
    ``~`` and ``+``."""

    intercepted_binops = frozenset({"*", "**", "%"})
    code_generator_class = NoFoldingGenerator

    def bounded_concat(self, join: Callable[[Any], str], parts: tuple[Any, ...]) -> str:
        """``a ~ b ~ c`` (engine.sandbox.bounds has the generator call this): a text over
        MAX_RENDER_CHARS characters is refused, so doubling a text in a loop stops at the
        bound. Checked on the joined text (one ``len``), so a step may build a text as
        long as its parts together before it is refused, never more."""
        for part in parts:
            if not isinstance(part, str):
                refuse_large_text(part)
        joined = join(parts)
        if len(joined) > MAX_RENDER_CHARS:
            raise SecurityError(
                f"a concatenation of {len(joined)} characters (at most {MAX_RENDER_CHARS})"
            )
        return joined

    def bounded_add(self, left: Any, right: Any) -> Any:
        """``a + b`` (the generator calls this): a text, list or tuple over MAX_RENDER_CHARS
        characters or items is refused, as ``~`` is; checked on the sum, like ``~``."""
        result = left + right
        if isinstance(result, str | list | tuple) and len(result) > MAX_RENDER_CHARS:
            raise SecurityError(
                f"a concatenation of {len(result)} items (at most {MAX_RENDER_CHARS})"
            )
        return result

    def wrap_str_format(self, value: Any) -> Callable[..., str] | None:
        refuse_wide_format(getattr(value, "__self__", None))
        wrapped = super().wrap_str_format(value)
        if wrapped is None:
            return None
        formatting = wrapped

        def checked(*args: Any, **kwargs: Any) -> str:
            for argument in (*args, *kwargs.values()):
                refuse_large_text(argument)
            return formatting(*args, **kwargs)

        return checked

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "%":
            refuse_wide_format(left)
            refuse_large_text(right)
        if operator == "*":
            for seq, times in ((left, right), (right, left)):
                size = _size(seq)
                if (
                    size is not None
                    and isinstance(times, int)
                    and size * times > (MAX_RENDER_CHARS)
                ):
                    raise SecurityError(
                        f"a repetition of {size * times} items (at most {MAX_RENDER_CHARS})"
                    )
        if operator == "**" and isinstance(left, int | float) and isinstance(right, int | float):
            base = abs(float(left))
            if base > 1 and float(right) * math.log2(base) > MAX_POWER_BITS:
                raise SecurityError(f"a power over {MAX_POWER_BITS} bits")
        return super().call_binop(context, operator, left, right)


class BoundedTemplate(jinja2.Template):
    """A template whose render is bounded in time and output, and whose errors (sandbox
    violations, bounds, whatever its expressions raise) are ``RenderError``s naming the
    template (``origin``, set when it is loaded) and line."""

    origin: str = "template"

    def render(self, *args: Any, **kwargs: Any) -> str:
        deadline = time.monotonic() + MAX_RENDER_SECONDS
        token = _DEADLINE.set(deadline)
        parts: list[str] = []
        size = 0
        try:
            for chunk in self.generate(*args, **kwargs):
                size += len(chunk)
                if size > MAX_RENDER_CHARS:
                    raise RenderError(
                        f"{self.origin}: output over {MAX_RENDER_CHARS} characters; "
                        "bound the template's loops"
                    )
                if time.monotonic() > deadline:
                    raise RenderError(
                        f"{self.origin}: render ran over {MAX_RENDER_SECONDS:g} s; "
                        "bound the template's loops"
                    )
                parts.append(chunk)
        except RenderError:
            raise
        except RecursionError as exc:
            raise RenderError(
                f"{self.origin}:{_template_line(exc)}: recursion too deep (a macro calling itself?)"
            ) from None
        except Exception as exc:  # whatever a template's data, filters or operators raise
            raise RenderError(f"{self.origin}:{_template_line(exc)}: {_reason(exc)}") from None
        finally:
            _DEADLINE.reset(token)
        # a string literal may hold a lone surrogate ('\ud800'), which no output can encode
        return clean_text("".join(parts))


def _template_line(exc: BaseException) -> int:
    """The template line of an error (the last ``<template>`` frame), 1 when unknown."""
    line = 1
    tb = exc.__traceback__
    while tb is not None:
        if tb.tb_frame.f_code.co_filename == "<template>":
            line = tb.tb_lineno
        tb = tb.tb_next
    return line


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
    env.tests["search"] = _regex_test
    env.tests["fullmatch"] = _regex_fullmatch
    env.filters["json"] = _json
    env.filters["json_pretty"] = _json_pretty
    env.filters["add_minutes"] = add_minutes
    env.filters["percent"] = _percent
    env.globals["range"] = _BoundedRange
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
def _condition_parts(expression: str) -> tuple[Callable[..., Any], Closure | None]:
    """The expression compiled by Jinja and, when it is simple enough, as a closure."""
    return ENVIRONMENT.compile_expression(expression), native_condition(ENVIRONMENT, expression)


@lru_cache(maxsize=4096)
def compile_condition(expression: str, where: Position | None = None) -> Callable[..., Any]:
    """A condition expression compiled once per process: checking a pack and compiling it
    at load share the work. A simple expression runs as a Python closure
    (engine.sandbox.conditions) and falls back to Jinja whenever the closure raises, so Jinja's
    result or error stands wherever the closure does not finish.

    Whatever the expression raises as it runs (``1/0``, ``output < 50``, a sandbox bound,
    an undefined name) is a ``ConditionError`` naming it and ``where`` it is in the pack,
    for every caller alike."""
    jinja, native = _condition_parts(expression)

    def condition(**variables: Any) -> Any:
        try:
            return jinja(**variables)
        except Exception as exc:
            raise ConditionError(expression, _reason(exc), where) from None

    if native is None:
        return condition

    def native_first(**variables: Any) -> Any:
        try:
            result = native(variables)
        except Exception:  # a name not given, a type error...: Jinja decides and reports
            return condition(**variables)
        # Jinja gives None for an undefined result (a missing attribute)
        return None if isinstance(result, jinja2.Undefined) else result

    return native_first


def _reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "recursion too deep"
    return str(exc) or type(exc).__name__


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
    return frozenset(meta.find_undeclared_variables(tree) - set_in_branches)


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
    names starting with ``_``, include/import/extends, ``range`` over MAX_RANGE, and nested
    constant loops of more than MAX_RANGE iterations in all."""
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
    return tuple(sorted(set(found)))
