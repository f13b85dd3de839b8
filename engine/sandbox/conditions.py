"""Condition expressions as Python closures: the simple ones, without Jinja's per-call cost.

A pack's conditions (guards, gate rules, rate-limit ``where``, conflict options) are Jinja
expressions run in the sandbox. Jinja sets up a context for every call (it copies the
environment's globals), which costs more than most conditions themselves: a guard such as
``output | length < 50`` is decided on every failing output, a ``where`` on every counted
item. ``native_condition`` turns an expression built only of names, constants, lists and
tuples, comparisons, ``and``/``or``/``not``, ``-x``, attribute and item access (through the
sandbox's own ``getattr``/``getitem``), and filters and tests that take no context (the
environment's own functions, so bounded as they are in a template) into a closure over the
variables. The closure computes what Jinja's generated code computes, in the same order;
anything else is left to Jinja (None). ``compile_condition`` (sandbox.environment) runs the closure
and falls back to Jinja when it raises (a name not given, a type error), so Jinja decides
every case the closure does not finish.
"""

from __future__ import annotations

import operator
from collections.abc import Callable, Mapping
from typing import Any

from jinja2 import Environment, nodes
from jinja2.exceptions import TemplateSyntaxError
from jinja2.parser import Parser

Closure = Callable[[Mapping[str, Any]], Any]

_COMPARISONS: dict[str, Callable[[Any, Any], Any]] = {
    "eq": operator.eq,
    "ne": operator.ne,
    "gt": operator.gt,
    "gteq": operator.ge,
    "lt": operator.lt,
    "lteq": operator.le,
    "in": lambda left, right: left in right,
    "notin": lambda left, right: left not in right,
}


class _Unsupported(Exception):
    """The expression uses something only Jinja runs."""


def native_condition(env: Environment, expression: str) -> Closure | None:
    """``expression`` as a closure over a mapping of variables, or None when it uses
    anything but the supported constructs (see the module docstring)."""
    try:
        parser = Parser(env, expression, state="variable")
        node = parser.parse_expression()
        if not parser.stream.eos:
            return None
        return _compile(env, node)
    except (_Unsupported, TemplateSyntaxError):
        return None


# Filters that build nothing larger than a number or one item of their value.
_SCALAR_FILTERS = frozenset(
    {"length", "count", "first", "last", "int", "float", "abs", "round", "bool", "min", "max"}
)


def builds_values(env: Environment, expression: str) -> bool:
    """Whether ``expression`` may build a text or list (a list or tuple display, a filter
    other than those giving a number or an item), so its closure needs a memory budget;
    names, constants, comparisons, attributes, items and tests build nothing."""
    try:
        node = Parser(env, expression, state="variable").parse_expression()
    except TemplateSyntaxError:
        return True
    for found in node.find_all((nodes.List, nodes.Tuple, nodes.Dict, nodes.Filter)):
        if not isinstance(found, nodes.Filter) or found.name not in _SCALAR_FILTERS:
            return True
    return False


def _compile(env: Environment, node: nodes.Node) -> Closure:
    if isinstance(node, nodes.Name) and node.ctx == "load":
        name = node.name
        return lambda variables: variables[name]
    if isinstance(node, nodes.Const):
        value = node.value
        return lambda variables: value
    if isinstance(node, nodes.List) or (isinstance(node, nodes.Tuple) and node.ctx == "load"):
        items = [_compile(env, item) for item in node.items]
        if isinstance(node, nodes.List):
            return lambda variables: [item(variables) for item in items]
        return lambda variables: tuple([item(variables) for item in items])
    if isinstance(node, nodes.Compare):
        return _comparison(env, node)
    if isinstance(node, nodes.And):
        left, right = _compile(env, node.left), _compile(env, node.right)
        return lambda variables: left(variables) and right(variables)
    if isinstance(node, nodes.Or):
        left, right = _compile(env, node.left), _compile(env, node.right)
        return lambda variables: left(variables) or right(variables)
    if isinstance(node, nodes.Not):
        operand = _compile(env, node.node)
        return lambda variables: not operand(variables)
    if isinstance(node, nodes.Neg):
        operand = _compile(env, node.node)
        return lambda variables: -operand(variables)
    if isinstance(node, nodes.Getattr) and node.ctx == "load":
        target, attribute = _compile(env, node.node), node.attr
        getattr_ = env.getattr
        return lambda variables: getattr_(target(variables), attribute)
    if (
        isinstance(node, nodes.Getitem)
        and node.ctx == "load"
        and not isinstance(node.arg, nodes.Slice)
    ):
        target, key = _compile(env, node.node), _compile(env, node.arg)
        getitem = env.getitem
        return lambda variables: getitem(target(variables), key(variables))
    if isinstance(node, nodes.Filter) and node.node is not None:
        return _call(env, env.filters, node.name, node)
    if isinstance(node, nodes.Test):
        return _call(env, env.tests, node.name, node)
    raise _Unsupported(type(node).__name__)


def _comparison(env: Environment, node: nodes.Compare) -> Closure:
    """A chain ``a < b < c``: each operand computed once, stopping at the first false."""
    first = _compile(env, node.expr)
    steps = [(_COMPARISONS[op.op], _compile(env, op.expr)) for op in node.ops]
    if len(steps) == 1:
        compare, right = steps[0]
        return lambda variables: compare(first(variables), right(variables))

    def chain(variables: Mapping[str, Any]) -> Any:
        left = first(variables)
        for compare, operand in steps:
            right = operand(variables)
            if not compare(left, right):
                return False
            left = right
        return True

    return chain


def _call(
    env: Environment, functions: Mapping[str, Any], name: str, node: nodes.Filter | nodes.Test
) -> Closure:
    """A filter or test of the environment applied to its node and constant-shaped args:
    only those that take no context, environment or eval context (Jinja passes those)."""
    function = functions.get(name)
    if (
        function is None
        or getattr(function, "jinja_pass_arg", None) is not None
        or node.dyn_args is not None
        or node.dyn_kwargs is not None
        or node.node is None
    ):
        raise _Unsupported(name)
    target = _compile(env, node.node)
    args = [_compile(env, arg) for arg in node.args]
    kwargs = [(str(pair.key), _compile(env, pair.value)) for pair in node.kwargs]
    if not args and not kwargs:
        return lambda variables: function(target(variables))
    return lambda variables: function(
        target(variables),
        *[arg(variables) for arg in args],
        **{key: value(variables) for key, value in kwargs},
    )
