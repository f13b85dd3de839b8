"""What else a template could make the sandbox compute without bound, refused.

Jinja compiles constant expressions by running them (``{{ 'x'|center(10**9) }}`` ran at
`rules check`), and a few filters and globals build text whose size a template chooses.
Here compiling computes nothing, those filters (``center``, ``indent``, ``format``,
``wordwrap``, ``replace``, ``join``) and what a macro, a ``{% set %}`` block or a
``{% call %}`` body captures are bounded, ``~`` and ``+`` are compiled to the environment's
bounded versions when it has them, and the globals a pack has no use for (``lipsum``,
``cycler``, ``joiner``) are gone.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Iterator
from itertools import islice
from typing import Any

from jinja2 import Environment, filters, meta, nodes
from jinja2.compiler import CodeGenerator, Frame
from jinja2.exceptions import SecurityError

from engine.sandbox.budget import (
    MAX_RANGE,
    MAX_VALUE_CHARS,
    POINTER,
    charge,
    charge_result,
    refuse_long,
)

MAX_FILTER_CHARS = MAX_VALUE_CHARS  # the render output cap: no filter builds more
MAX_INT_DIGITS = 4300  # Python's default limit, which the command line lifts for data
MAX_WORDWRAP_CHARS = 256 * 1024
REMOVED_GLOBALS = ("lipsum", "cycler", "joiner")
# A width or precision of 7+ digits, or one taken from the arguments (`*`).
_WIDE_FORMAT = re.compile(
    r"%(?:\([^)]*\))?[-+ #0]*(?:\*|\d{7,})|%(?:\([^)]*\))?[-+ #0]*\d*\.(?:\*|\d{7,})"
    r"|\{[^{}]*:[^{}]*\d{7,}"
)


LOOP_ITEMS = "bounded_iter"


def loop_items(items: nodes.Expr) -> nodes.Call:
    """``environment.bounded_iter(items)``, what a ``for`` loop walks instead of ``items``
    (compiled to a direct call by NoFoldingGenerator, cheaper than a sandboxed call)."""
    checker = nodes.EnvironmentAttribute(LOOP_ITEMS, lineno=items.lineno)
    return nodes.Call(checker, [items], [], None, None, lineno=items.lineno)


def is_loop_items(node: nodes.Node) -> bool:
    return (
        isinstance(node, nodes.Call)
        and isinstance(node.node, nodes.EnvironmentAttribute)
        and node.node.name == LOOP_ITEMS
    )


class NoFoldingGenerator(CodeGenerator):
    """Compiles without evaluating a template's expressions: they run at render, under
    its budget, never while a pack is loaded or checked."""

    def _output_child_to_const(self, node: nodes.Expr, frame: Frame, finalize: Any) -> str:
        if not isinstance(node, nodes.TemplateData | nodes.Const):
            raise nodes.Impossible()
        return str(super()._output_child_to_const(node, frame, finalize))

    def visit_Call(self, node: nodes.Call, frame: Frame, forward_caller: bool = False) -> None:
        if not is_loop_items(node):
            super().visit_Call(node, frame, forward_caller=forward_caller)
            return
        self.write(f"environment.{LOOP_ITEMS}(")
        self.visit(node.args[0], frame)
        self.write(")")

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


class NameTracker(meta.TrackingCodeGenerator, NoFoldingGenerator):
    """Jinja's ``find_undeclared_variables`` without its optimizer: that one computed
    constant expressions while a pack was checked (``{{ {'a': 1}[18] ~ 1 }}`` raised out of
    `rules check` as an internal error)."""

    def __init__(self, environment: Environment) -> None:
        CodeGenerator.__init__(
            self, environment, "<introspection>", "<introspection>", optimized=False
        )
        self.undeclared_identifiers: set[str] = set()


def find_undeclared_names(env: Environment, tree: nodes.Template) -> set[str]:
    tracker = NameTracker(env)
    tracker.visit(tree)
    return tracker.undeclared_identifiers


TEXT_FILTERS = (
    "string", "json", "json_pretty", "tojson", "pprint", "upper", "lower", "title", "capitalize",
    "trim", "truncate", "wordcount", "striptags", "urlencode", "urlize", "center", "indent",
    "format", "replace", "wordwrap", "escape", "e", "forceescape", "safe", "join",
)  # fmt: skip
"""Filters that turn their value into text: a list or mapping is checked first."""
CHARGED_FILTERS = ("sort", "reverse", "dictsort")
"""Filters that copy their value: the copy is charged to the run's memory budget."""


def text_size(value: Any, limit: int) -> int:
    """At least the length of ``str(value)`` for what templates build (texts, numbers,
    lists, tuples, sets, mappings, nested), counted only until it passes ``limit``: a list
    of a million references to one long text is as long as Python would write it. Walked
    lazily (memory: the nesting depth); below 200 levels containers count as ``[...]``."""
    total = 0
    stack: list[Iterator[Any]] = [iter((value,))]
    while stack and total <= limit:
        item = next(stack[-1], _DONE)
        if item is _DONE:
            stack.pop()
        elif isinstance(item, str):
            total += len(item) + 2
        elif isinstance(item, list | tuple | set | frozenset | dict):
            total += 2 + 2 * len(item)
            if len(stack) < 200:
                stack.append(iter(item.items() if isinstance(item, dict) else item))
        else:
            total += 8
    return total


_DONE: Any = object()

_PLAIN = frozenset({str, int, float, bool, type(None)})


def refuse_large_text(value: Any) -> None:
    """A list or mapping whose text would be over MAX_FILTER_CHARS characters is refused
    before Python writes it (``str``, a filter, ``~``, ``%``, ``format``, the output)."""
    if value.__class__ not in _PLAIN:
        size = text_size(value, MAX_FILTER_CHARS)
        if size > MAX_FILTER_CHARS:
            raise SecurityError(
                f"a value of more than {MAX_FILTER_CHARS} characters as text (at least {size})"
            )


def bounded_output(value: Any) -> Any:
    """The environment's ``finalize``: what ``{{ ... }}`` writes, checked first."""
    if value.__class__ not in _PLAIN:
        refuse_large_text(value)
    return value


def _text_checked(function: Any) -> Any:
    """``function`` (a filter) with its value checked by ``refuse_large_text`` first."""
    pass_arg = getattr(function, "jinja_pass_arg", None)
    if pass_arg is None:

        def checked(value: Any, *args: Any, **kwargs: Any) -> Any:
            refuse_large_text(value)
            return charge_result(function(value, *args, **kwargs))

        return checked

    def checked_with(first: Any, value: Any, *args: Any, **kwargs: Any) -> Any:
        refuse_large_text(value)
        return charge_result(function(first, value, *args, **kwargs))

    checked_with.jinja_pass_arg = pass_arg  # type: ignore[attr-defined]
    return checked_with


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


def _list(value: Any) -> list[Any]:
    """``|list``: a text of 64 MB is 64 million items; the size is checked first."""
    items = value if hasattr(value, "__len__") else list(islice(value, MAX_VALUE_CHARS + 1))
    refuse_long(len(items), "a list", "items")
    charge(POINTER * len(items))
    return list(items)


def _int(value: Any, *args: Any, **kwargs: Any) -> Any:
    """``|int``: reading a text of millions of digits takes minutes (the command line lifts
    Python's digit limit for data), so a text over MAX_INT_DIGITS characters is refused."""
    if isinstance(value, str | bytes) and len(value) > MAX_INT_DIGITS:
        raise SecurityError(f"|int of a text of {len(value)} characters (at most {MAX_INT_DIGITS})")
    return filters.do_int(value, *args, **kwargs)


MAX_JSON_INDENT = 64


def _json_indent(function: Any) -> Any:
    """``|tojson(indent)``, ``|json_pretty(indent)``: an indent repeats on every line, so a
    large one builds a text of millions of spaces from a short list; at most 64."""
    pass_arg = getattr(function, "jinja_pass_arg", None)

    def checked(*args: Any, **kwargs: Any) -> Any:
        indent = kwargs.get(
            "indent", args[2 if pass_arg else 1] if len(args) > 1 + bool(pass_arg) else None
        )
        if isinstance(indent, int) and indent > MAX_JSON_INDENT:
            raise SecurityError(f"a JSON indent of {indent} (at most {MAX_JSON_INDENT})")
        if isinstance(indent, str) and len(indent) > MAX_JSON_INDENT:
            raise SecurityError(
                f"a JSON indent of {len(indent)} characters (at most {MAX_JSON_INDENT})"
            )
        return function(*args, **kwargs)

    if pass_arg is not None:
        checked.jinja_pass_arg = pass_arg  # type: ignore[attr-defined]
    return checked


def _batch(value: Any, linecount: Any, fill_with: Any = None) -> Any:
    """``|batch``: the last batch is padded to ``linecount`` items, so the count is bounded."""
    if isinstance(linecount, int):
        refuse_long(linecount, "a batch", "items")
    return filters.do_batch(value, linecount, fill_with)


def _slice(value: Any, slices: Any, fill_with: Any = None) -> Any:
    """``|slice``: one list per slice, however few items; at most MAX_RANGE slices."""
    if isinstance(slices, int) and slices > MAX_RANGE:
        raise SecurityError(f"a slice into {slices} lists (at most {MAX_RANGE})")
    return filters.sync_do_slice(value, slices, fill_with)


def _charged(function: Any) -> Any:
    """``function`` (a filter building a list or text at most its value's size) with its
    result charged to the run's memory budget."""

    def charged(*args: Any, **kwargs: Any) -> Any:
        return charge_result(function(*args, **kwargs))

    pass_arg = getattr(function, "jinja_pass_arg", None)
    if pass_arg is not None:
        charged.jinja_pass_arg = pass_arg  # type: ignore[attr-defined]
    return charged


def _indent(value: Any, width: Any = 4, *args: Any, **kwargs: Any) -> Any:
    if isinstance(width, str):
        _width(len(width) * (str(value).count("\n") + 1))
    elif isinstance(width, int):
        _width(width * (str(value).count("\n") + 1))
    return filters.do_indent(value, width, *args, **kwargs)


def _format(value: Any, *args: Any, **kwargs: Any) -> str:
    refuse_wide_format(value)
    return filters.do_format(value, *args, **kwargs)


def _replace(eval_ctx: Any, value: Any, old: Any, new: Any, count: Any = None) -> Any:
    text, old_text = str(value), str(old)
    times = text.count(old_text)
    if isinstance(count, int) and 0 <= count < times:
        times = count
    size = len(text) + times * (len(str(new)) - len(old_text))
    if size > MAX_FILTER_CHARS:
        raise SecurityError(f"a replace giving {size} characters (at most {MAX_FILTER_CHARS})")
    return filters.do_replace(eval_ctx, value, old, new, count)


_replace.jinja_pass_arg = filters.do_replace.jinja_pass_arg  # type: ignore[attr-defined]


def _join(eval_ctx: Any, value: Any, d: Any = "", attribute: Any = None) -> Any:
    if attribute is None and isinstance(value, list | tuple):
        texts = sum(len(item) for item in value if isinstance(item, str))
        size = texts + len(str(d)) * max(len(value) - 1, 0)
        if size > MAX_FILTER_CHARS:
            raise SecurityError(f"a join of {size} characters (at most {MAX_FILTER_CHARS})")
    joined = filters.do_join(eval_ctx, value, d, attribute)
    if len(joined) > MAX_FILTER_CHARS:
        raise SecurityError(f"a join of {len(joined)} characters (at most {MAX_FILTER_CHARS})")
    return joined


_join.jinja_pass_arg = filters.do_join.jinja_pass_arg  # type: ignore[attr-defined]


def bounded_capture(parts: Iterable[str]) -> str:
    """What a macro, a ``{% set %}`` block or a ``{% call %}`` body captures (Jinja joins
    it with ``environment.concat``): over MAX_FILTER_CHARS characters is refused, so a
    macro doubling its argument cannot grow a text without bound."""
    joined = "".join(parts)
    if len(joined) > MAX_FILTER_CHARS:
        raise SecurityError(
            f"a captured text of {len(joined)} characters (at most {MAX_FILTER_CHARS})"
        )
    return charge_result(joined)


def _wordwrap(environment: Environment, value: Any, *args: Any, **kwargs: Any) -> str:
    if len(str(value)) > MAX_WORDWRAP_CHARS:
        raise SecurityError(f"wordwrap of more than {MAX_WORDWRAP_CHARS} characters")
    return filters.do_wordwrap(environment, value, *args, **kwargs)


_wordwrap.jinja_pass_arg = filters.do_wordwrap.jinja_pass_arg  # type: ignore[attr-defined]


_BOUNDED_FILTERS: dict[str, Callable[..., Any]] = {
    "center": _center,
    "indent": _indent,
    "format": _format,
    "wordwrap": _wordwrap,
    "replace": _replace,
    "join": _join,
    "list": _list,
    "batch": _batch,
    "slice": _slice,
    "int": _int,
}
"""Jinja's size-taking filters, by name, replaced with bounded ones."""


def harden(env: Environment) -> None:
    """Bound ``env``'s size-taking filters and drop the globals packs have no use for."""
    for name in REMOVED_GLOBALS:
        env.globals.pop(name, None)
    env.filters.update(_BOUNDED_FILTERS)
    for name in ("tojson", "json_pretty"):
        if name in env.filters:
            env.filters[name] = _json_indent(env.filters[name])
    for name in CHARGED_FILTERS:
        env.filters[name] = _charged(env.filters[name])
    for name in TEXT_FILTERS:
        if name in env.filters:
            env.filters[name] = _text_checked(env.filters[name])
    env.concat = bounded_capture  # type: ignore[method-assign]
