"""The methods of texts, lists and mappings a template can call, bounded before they build.

``'x'.center(1500000000)`` built 1.5 GB before any bound looked at it. The environment
hands a template a bounded version of each method that can build a large value (widths,
counts, joins, formatting, container growth), found when the method is looked up (both
``getattr`` and ``getitem`` go through ``bounded_method``); each computes the size of its
result from its arguments first, refuses it over MAX_VALUE_CHARS, and charges the run's
memory budget. ``int.to_bytes`` is bounded by its length; other methods build at most a few
times what they are given and are charged after they run.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from itertools import islice
from string import Formatter
from types import BuiltinMethodType, MethodType
from typing import Any

from jinja2.exceptions import SecurityError
from jinja2.sandbox import SandboxedEscapeFormatter, SandboxedFormatter

from engine.sandbox.bounds import refuse_large_text
from engine.sandbox.budget import (
    MAX_VALUE_CHARS,
    POINTER,
    charge,
    charge_result,
    refuse_long,
)

_DIGITS = re.compile(r"\d+")


def _width(text: Any, width: Any) -> None:
    if isinstance(width, int) and width > len(text):
        refuse_long(width, "a padded text")
        charge(width)


def _padding(method: Callable[..., Any]) -> Callable[..., Any]:
    def bounded(text: Any, width: Any, *args: Any) -> Any:
        _width(text, width)
        return method(text, width, *args)

    return bounded


def _expandtabs(text: Any, tabsize: Any = 8) -> Any:
    if isinstance(tabsize, int):
        size = len(text) + text.count("\t" if isinstance(text, str) else b"\t") * max(tabsize, 0)
        refuse_long(size, "expandtabs")
        charge(size)
    return text.expandtabs(tabsize)


def _replace(text: Any, old: Any, new: Any, count: Any = -1) -> Any:
    if isinstance(old, type(text)) and isinstance(new, type(text)) and isinstance(count, int):
        times = text.count(old) if old else len(text) + 1
        if 0 <= count < times:
            times = count
        size = len(text) + times * (len(new) - len(old))
        refuse_long(size, "a replace")
        charge(size)
    return text.replace(old, new, count)


def _join(separator: Any, items: Any) -> Any:
    items = list(islice(items, MAX_VALUE_CHARS + 1)) if not isinstance(items, list) else items
    refuse_long(len(items), "a join", "items")
    size = len(separator) * max(len(items) - 1, 0)
    for item in items:
        if isinstance(item, str | bytes):
            size += len(item)
    refuse_long(size, "a join")
    charge(size)
    return separator.join(items)


def _translate(text: Any, table: Any) -> Any:
    if isinstance(table, Mapping) and isinstance(text, str):
        longest = max((len(v) for v in table.values() if isinstance(v, str)), default=1)
        refuse_long(len(text) * max(longest, 1), "a translation")
    return charge_result(text.translate(table))


def _to_bytes(number: Any, length: Any = 1, *args: Any, **kwargs: Any) -> Any:
    if isinstance(length, int):
        refuse_long(length, "to_bytes", "bytes")
    return charge_result(number.to_bytes(length, *args, **kwargs))


def _charged(method: Callable[..., Any]) -> Callable[..., Any]:
    def bounded(target: Any, *args: Any, **kwargs: Any) -> Any:
        return charge_result(method(target, *args, **kwargs))

    return bounded


def _grow(target: Any, added: int) -> None:
    refuse_long(len(target) + added, "a list or mapping", "items")
    charge(POINTER * added)


def _append(target: list[Any], item: Any) -> None:
    _grow(target, 1)
    target.append(item)


def _insert(target: list[Any], index: Any, item: Any) -> None:
    _grow(target, 1)
    target.insert(index, item)


def _sized(items: Any) -> Sequence[Any] | Mapping[Any, Any]:
    """``items`` as a sized collection, read only up to the bound when it is lazy."""
    if isinstance(items, Sequence | Mapping):
        return items
    return list(islice(items, MAX_VALUE_CHARS + 1))


def _extend(target: list[Any], items: Any) -> None:
    sized = _sized(items)
    _grow(target, len(sized))
    target.extend(sized)


def _update(target: dict[Any, Any], *args: Any, **kwargs: Any) -> None:
    others = [_sized(other) for other in args]  # a lazy one read up to the bound
    _grow(target, len(kwargs) + sum(len(other) for other in others))
    target.update(*others, **kwargs)


def _setdefault(target: dict[Any, Any], *args: Any) -> Any:
    _grow(target, 1)
    return target.setdefault(*args)


def _fromkeys(cls: Any, keys: Iterable[Any], *args: Any) -> Any:
    sized = _sized(keys)
    refuse_long(len(sized), "a mapping", "items")
    charge(POINTER * len(sized))
    return cls.fromkeys(sized, *args)


def _copy(target: Any) -> Any:
    charge(POINTER * len(target))
    return target.copy()


_PADDING = {name: _padding(getattr(str, name)) for name in ("center", "ljust", "rjust")}
_BYTES_PADDING = {name: _padding(getattr(bytes, name)) for name in ("center", "ljust", "rjust")}
_TEXT_CHARGED = ("upper", "lower", "title", "capitalize", "swapcase", "casefold", "encode")
_SPLITS = ("split", "rsplit", "splitlines", "partition", "rpartition", "hex", "decode")

_STR_METHODS: dict[str, Callable[..., Any]] = {
    **_PADDING,
    "zfill": _padding(str.zfill),
    "expandtabs": _expandtabs,
    "replace": _replace,
    "join": _join,
    "translate": _translate,
    **{name: _charged(getattr(str, name)) for name in _TEXT_CHARGED if hasattr(str, name)},
    **{name: _charged(getattr(str, name)) for name in _SPLITS if hasattr(str, name)},
}
_BYTES_METHODS: dict[str, Callable[..., Any]] = {
    **_BYTES_PADDING,
    "zfill": _padding(bytes.zfill),
    "expandtabs": _expandtabs,
    "replace": _replace,
    "join": _join,
    **{name: _charged(getattr(bytes, name)) for name in _SPLITS if hasattr(bytes, name)},
    **{name: _charged(getattr(bytes, name)) for name in ("upper", "lower", "title")},
}
_LIST_METHODS: dict[str, Callable[..., Any]] = {
    "append": _append,
    "insert": _insert,
    "extend": _extend,
    "copy": _copy,
}
_DICT_METHODS: dict[str, Callable[..., Any]] = {
    "update": _update,
    "setdefault": _setdefault,
    "copy": _copy,
}
_INT_METHODS: dict[str, Callable[..., Any]] = {"to_bytes": _to_bytes}
_METHODS: dict[type, dict[str, Callable[..., Any]]] = {
    str: _STR_METHODS,
    bytes: _BYTES_METHODS,
    list: _LIST_METHODS,
    dict: _DICT_METHODS,
    int: _INT_METHODS,
}


def bounded_method(value: Any) -> Callable[..., Any] | None:
    """The bounded version of ``value`` when it is a method that builds (bound to its
    object), else None (the method is safe as it is, or not one of these)."""
    if value.__class__ is MethodType:
        return _escaping_method(value)
    if value.__class__ is not BuiltinMethodType:
        return None
    owner = value.__self__
    name = value.__name__
    if owner is dict and name == "fromkeys":
        return BoundedMethod(_fromkeys, dict, value)
    for cls in owner.__class__.__mro__:
        methods = _METHODS.get(cls)
        if methods is not None:
            method = methods.get(name)
            return None if method is None else BoundedMethod(method, owner, value)
    return None


def _escaping_method(value: Any) -> Callable[..., Any] | None:
    """A method of a text that escapes (``Markup``, from ``|safe`` or ``|escape``): its
    size checked by the plain text's bounded method first (escaping the arguments makes
    the result at most a few times longer), then the method itself, charged."""
    owner, name = value.__self__, value.__name__
    checked = _STR_METHODS.get(name) if isinstance(owner, str) else None
    if checked is None:
        return None

    def run(text: Any, *args: Any, **kwargs: Any) -> Any:
        checked(str.__str__(text), *args, **kwargs)
        return charge_result(value(*args, **kwargs))

    return BoundedMethod(run, owner, value)


class BoundedMethod:
    """A method of ``owner`` run through its bounded version; equal to, and written as,
    the method it stands for (``{{ x.upper }}`` prints as Python's method would)."""

    __slots__ = ("bounded", "original", "owner")

    def __init__(self, bounded: Callable[..., Any], owner: Any, original: Any) -> None:
        self.bounded = bounded
        self.owner = owner
        self.original = original

    def __call__(self, *args: Any, **kwargs: Any) -> Any:
        return self.bounded(self.owner, *args, **kwargs)

    def __eq__(self, other: object) -> bool:
        if isinstance(other, BoundedMethod):
            return bool(self.original == other.original)
        return bool(self.original == other)

    def __hash__(self) -> int:
        return hash(self.original)

    def __repr__(self) -> str:
        return repr(self.original)


class _FieldBound(Formatter):
    """Each field's width and precision (after nested fields are filled in:
    ``'{:>{}}'.format(x, 1500000000)``) checked before the field is written, and the whole
    text refused past MAX_VALUE_CHARS characters."""

    size = 0

    def format_field(self, value: Any, format_spec: str) -> Any:
        for digits in _DIGITS.findall(format_spec):
            if len(digits) > 7 or int(digits) > MAX_VALUE_CHARS:
                raise SecurityError(
                    f"a format width or precision of {digits[:12]} (at most {MAX_VALUE_CHARS})"
                )
        refuse_large_text(value)
        text = super().format_field(value, format_spec)
        self.size += len(text)
        refuse_long(self.size, "a formatted text")
        return charge_result(text)


class BoundedFormatter(_FieldBound, SandboxedFormatter):
    """``str.format`` and ``format_map`` of templates, bounded."""


class BoundedEscapeFormatter(_FieldBound, SandboxedEscapeFormatter):
    """``Markup.format`` (a text through ``|safe`` or ``|escape``), bounded."""
