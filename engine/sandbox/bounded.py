"""The sandbox's environment and template classes: what bounds each operation.

``*`` and ``**`` are intercepted (so nothing is constant-folded at compile time) and refuse
results over ``MAX_RENDER_CHARS`` items or ``MAX_POWER_BITS`` bits (a product of integers
too); ``~`` and ``+`` are compiled to ``bounded_concat`` and ``bounded_add``; the methods
that build (``center``, ``replace``, ``format``, ``append``...) are handed out bounded
(engine.sandbox.methods); a slice, ``%`` and what those build are charged to the run's
memory budget (engine.sandbox.budget). A render is bounded in time, output and memory, and
whatever it raises is a ``RenderError`` naming the template and line.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable
from typing import Any

import jinja2
from jinja2 import nodes
from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEnvironment
from markupsafe import Markup

from engine.core.errors import RenderError
from engine.core.textio import clean_text
from engine.sandbox import budget
from engine.sandbox.bounds import (
    NoFoldingGenerator,
    is_loop_items,
    loop_items,
    refuse_large_text,
    refuse_wide_format,
)
from engine.sandbox.budget import (
    MAX_INT_BITS,
    MAX_RENDER_SECONDS,
    MAX_VALUE_CHARS,
    POINTER,
    BoundedRange,
    charge,
    charge_result,
    deadline_checked,
)
from engine.sandbox.methods import BoundedEscapeFormatter, BoundedFormatter, bounded_method

MAX_RENDER_CHARS = MAX_VALUE_CHARS
MAX_POWER_BITS = MAX_INT_BITS


def _size(value: Any) -> int | None:
    return len(value) if isinstance(value, str | list | tuple) else None


def _refuse_product(left: Any, right: Any) -> None:
    """``left * right`` over MAX_RENDER_CHARS items or MAX_POWER_BITS bits is refused (a
    value squared in a loop doubles its bits each time), else its size is charged."""
    if left.__class__ is int and right.__class__ is int:
        if left.bit_length() + right.bit_length() > MAX_POWER_BITS:
            raise SecurityError(f"a product over {MAX_POWER_BITS} bits")
        return
    for seq, times in ((left, right), (right, left)):
        size = _size(seq)
        if size is not None and isinstance(times, int):
            if size * times > MAX_RENDER_CHARS:
                raise SecurityError(
                    f"a repetition of {size * times} items (at most {MAX_RENDER_CHARS})"
                )
            charge(max(size * times, 0) * (1 if isinstance(seq, str) else POINTER))
            return


class BoundedEnvironment(SandboxedEnvironment):
    """The sandbox with bounded ``*`` and ``**`` (intercepted, so never constant-folded),
    ``~`` and ``+``, and bounded methods (engine.sandbox.methods)."""

    intercepted_binops = frozenset({"*", "**", "%"})
    code_generator_class = NoFoldingGenerator

    def _generate(
        self,
        source: nodes.Template,
        name: str | None,
        filename: str | None,
        defer_init: bool = False,
    ) -> str:
        """Every ``for`` loop walks its items through ``bounded_iter`` (the deadline checked
        as it goes); done on the tree being compiled, so `rules check` sees the source's."""
        for loop in source.find_all(nodes.For):
            if isinstance(loop.iter, nodes.Expr) and not is_loop_items(loop.iter):
                loop.iter = loop_items(loop.iter)
        return super()._generate(source, name, filename, defer_init)

    def bounded_iter(self, items: Any) -> Any:
        """What a ``for`` loop walks (``_generate``): a bounded range checks the deadline
        itself; anything else through ``deadline_checked``."""
        if items.__class__ is BoundedRange:
            return items
        return deadline_checked(items)

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
        return charge_result(joined)

    def bounded_add(self, left: Any, right: Any) -> Any:
        """``a + b`` (the generator calls this): a text, list or tuple over MAX_RENDER_CHARS
        characters or items is refused, as ``~`` is; checked on the sum, like ``~``."""
        result = left + right
        if isinstance(result, str | list | tuple):
            if len(result) > MAX_RENDER_CHARS:
                raise SecurityError(
                    f"a concatenation of {len(result)} items (at most {MAX_RENDER_CHARS})"
                )
            charge_result(result)
        return result

    def wrap_str_format(self, value: Any) -> Callable[..., Any] | None:
        """A method a template looks up (``getattr`` and ``getitem`` both ask): ``format``
        and ``format_map`` of a text through a bounded formatter, the methods that build
        through their bounded versions (engine.sandbox.methods), others as they are."""
        name = getattr(value, "__name__", None)
        if name != "format" and name != "format_map":
            return bounded_method(value)
        text = getattr(value, "__self__", None)
        if not isinstance(text, str):
            return None
        refuse_wide_format(text)
        formatter: BoundedFormatter | BoundedEscapeFormatter
        if isinstance(text, Markup):
            formatter = BoundedEscapeFormatter(self, escape=text.escape)
        else:
            formatter = BoundedFormatter(self)
        text_type = type(text)

        def formatted(*args: Any, **kwargs: Any) -> str:
            if name == "format_map":
                if kwargs or len(args) != 1:
                    raise TypeError("format_map() takes exactly one argument")
                return text_type(formatter.vformat(text, (), args[0]))
            return text_type(formatter.vformat(text, args, kwargs))

        return formatted

    def getitem(self, obj: Any, argument: Any) -> Any:
        """A slice builds a copy: charged."""
        if argument.__class__ is slice:
            return charge_result(super().getitem(obj, argument))
        return super().getitem(obj, argument)

    def call_binop(self, context: Any, operator: str, left: Any, right: Any) -> Any:
        if operator == "%":
            refuse_wide_format(left)
            refuse_large_text(right)
            return charge_result(left % right)
        if operator == "*":
            _refuse_product(left, right)
            return left * right
        if isinstance(left, int | float) and isinstance(right, int | float):
            base = abs(float(left))
            if base > 1 and float(right) * math.log2(base) > MAX_POWER_BITS:
                raise SecurityError(f"a power over {MAX_POWER_BITS} bits")
        return super().call_binop(context, operator, left, right)


class BoundedTemplate(jinja2.Template):
    """A template whose render is bounded in time, output and memory (engine.sandbox.budget),
    and whose errors (sandbox violations, bounds, whatever its expressions raise) are
    ``RenderError``s naming the template (``origin``, set when it is loaded) and line."""

    origin: str = "template"

    def render(self, *args: Any, **kwargs: Any) -> str:
        token = budget.start()
        deadline = time.monotonic() + MAX_RENDER_SECONDS
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
            raise RenderError(f"{self.origin}:{_template_line(exc)}: {reason(exc)}") from None
        finally:
            budget.stop(token)
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


def reason(exc: BaseException) -> str:
    if isinstance(exc, RecursionError):
        return "recursion too deep"
    return str(exc) or type(exc).__name__
