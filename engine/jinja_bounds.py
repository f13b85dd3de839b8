"""What else a template could make the sandbox compute without bound, refused.

Jinja compiles constant expressions by running them (``{{ 'x'|center(10**9) }}`` ran at
`rules check`), and a few filters and globals build text whose size a template chooses.
Here compiling computes nothing, those filters are bounded, and the globals a pack has no
use for (``lipsum``, ``cycler``, ``joiner``) are gone.
"""

from __future__ import annotations

import re
from typing import Any

from jinja2 import Environment, filters, nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import SecurityError

MAX_FILTER_CHARS = 4 * 1024 * 1024  # the render output cap: no filter builds more
MAX_WORDWRAP_CHARS = 256 * 1024
REMOVED_GLOBALS = ("lipsum", "cycler", "joiner")
# A width or precision of 7+ digits, or one taken from the arguments (`*`).
_WIDE_FORMAT = re.compile(
    r"%[-+ #0]*(?:\*|\d{7,})|%[-+ #0]*\d*\.(?:\*|\d{7,})|\{[^{}]*:[^{}]*\d{7,}"
)


class NoFoldingGenerator(CodeGenerator):
    """Compiles without evaluating a template's expressions: they run at render, under
    its budget, never while a pack is loaded or checked."""

    def _output_child_to_const(self, node: nodes.Expr, frame: Frame, finalize: Any) -> str:
        if not isinstance(node, nodes.TemplateData | nodes.Const):
            raise nodes.Impossible()
        return str(super()._output_child_to_const(node, frame, finalize))

    def visit_Add(self, node: nodes.BinExpr, frame: Frame) -> None:
        """``a + b`` as ``environment.bounded_add(a, b)`` when the environment has it: a
        direct call, cheaper than the sandbox's intercepted operators for every ``+``."""
        if not hasattr(self.environment, "bounded_add"):
            super().visit_Add(node, frame)
            return
        self.write("environment.bounded_add(")
        self.visit(node.left, frame)
        self.write(", ")
        self.visit(node.right, frame)
        self.write(")")

    def visit_Concat(self, node: nodes.Concat, frame: Frame) -> None:
        """``a ~ b ~ c`` as ``environment.bounded_concat(join, (a, b, c))`` when the
        environment has it (Jinja writes ``join((a, b, c))``), which refuses a text over the
        render's size bound: ``~`` in a loop cannot double a text without bound."""
        if not hasattr(self.environment, "bounded_concat"):
            super().visit_Concat(node, frame)
            return
        if frame.eval_ctx.volatile:
            join = "(markup_join if context.eval_ctx.volatile else str_join)"
        elif frame.eval_ctx.autoescape:
            join = "markup_join"
        else:
            join = "str_join"
        self.write(f"environment.bounded_concat({join}, (")
        for arg in node.nodes:
            self.visit(arg, frame)
            self.write(", ")
        self.write("))")


def refuse_wide_format(text: Any) -> None:
    """A format string whose width would build a huge text is refused."""
    if isinstance(text, str) and _WIDE_FORMAT.search(text):
        raise SecurityError("a format width or precision of a million or more")


def _width(value: Any) -> None:
    if isinstance(value, int) and value > MAX_FILTER_CHARS:
        raise SecurityError(f"a width of {value} (at most {MAX_FILTER_CHARS})")


def _center(value: Any, width: int = 80) -> str:
    _width(width)
    return filters.do_center(value, width)


def _indent(value: Any, width: Any = 4, *args: Any, **kwargs: Any) -> Any:
    if isinstance(width, str):
        _width(len(width) * (str(value).count("\n") + 1))
    elif isinstance(width, int):
        _width(width * (str(value).count("\n") + 1))
    return filters.do_indent(value, width, *args, **kwargs)


def _format(value: Any, *args: Any, **kwargs: Any) -> str:
    refuse_wide_format(value)
    return filters.do_format(value, *args, **kwargs)


def _wordwrap(environment: Environment, value: Any, *args: Any, **kwargs: Any) -> str:
    if len(str(value)) > MAX_WORDWRAP_CHARS:
        raise SecurityError(f"wordwrap of more than {MAX_WORDWRAP_CHARS} characters")
    return filters.do_wordwrap(environment, value, *args, **kwargs)


_wordwrap.jinja_pass_arg = filters.do_wordwrap.jinja_pass_arg  # type: ignore[attr-defined]


def harden(env: Environment) -> None:
    """Bound ``env``'s size-taking filters and drop the globals packs have no use for."""
    for name in REMOVED_GLOBALS:
        env.globals.pop(name, None)
    env.filters["center"] = _center
    env.filters["indent"] = _indent
    env.filters["format"] = _format
    env.filters["wordwrap"] = _wordwrap
