"""Sizes a template asks for in constants, seen by `rules check` without rendering.

``{{ x.center(1500000000) }}`` is refused when it renders; a constant width given to a
method over the bound is also a finding at check, as a constant ``range`` over its bound
is.
"""

from __future__ import annotations

import re

from jinja2 import nodes

from engine.sandbox.budget import MAX_VALUE_CHARS

# methods and filters whose first argument is the size of what they build
_WIDTH_METHODS = frozenset({"center", "ljust", "rjust", "zfill", "expandtabs", "to_bytes"})
# a replacement field whose spec takes a nested field: '{:>{}}'
_NESTED_SPEC = re.compile(r"\{[^{}]*:[^{}]*\{")


def _big(node: nodes.Node) -> int | None:
    value = node.value if isinstance(node, nodes.Const) else None
    if isinstance(value, int) and not isinstance(value, bool) and value > MAX_VALUE_CHARS:
        return value
    return None


def _call_problem(call: nodes.Call) -> str | None:
    target = call.node
    if not isinstance(target, nodes.Getattr) or not call.args:
        return None
    if target.attr in _WIDTH_METHODS and (size := _big(call.args[0])) is not None:
        return f"{target.attr}({size}) builds over {MAX_VALUE_CHARS} characters"
    if target.attr == "format" and isinstance(target.node, nodes.Const):
        text = target.node.value
        if isinstance(text, str) and _NESTED_SPEC.search(text):
            for arg in call.args:
                if (size := _big(arg)) is not None:
                    return f"a format width of {size} (at most {MAX_VALUE_CHARS})"
    return None


def wide_constants(tree: nodes.Template) -> list[tuple[int, str]]:
    """(line, problem) for each constant size over MAX_VALUE_CHARS a template asks for: a
    width of ``center``/``ljust``/``rjust``/``zfill``/``expandtabs``/``to_bytes``, a nested
    format width. (A filter's width or a repetition over the bound is left to the render,
    which names it.)"""
    found: list[tuple[int, str]] = []
    for call in tree.find_all(nodes.Call):
        problem = _call_problem(call)
        if problem is not None:
            found.append((call.lineno, problem))
    return found


def context_reads(tree: nodes.Template, name: str = "context") -> list[tuple[tuple[str, ...], int]]:
    """(key path, line) of the reads of ``name.a.b`` or ``name["a"]["b"]`` in a template or
    expression, the longest path read at each place: the constant keys read in a row from
    the variable. A method called on a value ends its path (``name.a.get("b")`` reads
    ``a``); a key that is not a constant string ends it too. A template that assigns
    ``name`` itself reads nothing of the pack's."""
    if any(n.name == name and n.ctx != "load" for n in tree.find_all(nodes.Name)):
        return []
    called = {id(call.node) for call in tree.find_all(nodes.Call)}
    first: dict[tuple[str, ...], int] = {}
    for node in tree.find_all((nodes.Getattr, nodes.Getitem)):
        if id(node) in called:
            continue
        path: list[str] = []
        current: nodes.Node = node
        while isinstance(current, nodes.Getattr | nodes.Getitem):
            if isinstance(current, nodes.Getattr):
                key: object = current.attr
            else:
                key = current.arg.value if isinstance(current.arg, nodes.Const) else None
            # a dynamic key: only the keys before it (nearer the variable) are known
            path = [key, *path] if isinstance(key, str) else []
            current = current.node
        if isinstance(current, nodes.Name) and current.name == name and path:
            first.setdefault(tuple(path), node.lineno)
    return sorted(
        (
            (path, line)
            for path, line in first.items()
            if not any(len(o) > len(path) and o[: len(path)] == path for o in first)
        ),
        key=lambda item: (item[1], item[0]),
    )
