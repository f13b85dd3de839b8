"""Value and block rules of sentinel grammars, compiled from plain data to closures.

``compile_rule`` turns one rule (a dict, as ``model_dump()`` writes it) into a check
``(value, fields) -> message | None``: ``value`` is the rule's subject (or ``ABSENT``),
``fields`` the block's fields (for an item rule: the item). A check returns None when it
holds or does not apply; it fills its message in only when it fails. Rules on an absent
value do not apply, except ``required``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from engine.core.patterns import compile_pattern
from engine.core.placeholders import fill

ABSENT: Any = object()
"""The subject of a rule whose field or key is not there."""

Check = Callable[[Any, Mapping[str, Any]], "str | None"]
_Say = Callable[..., str]


def to_int(text: str) -> int | None:
    """Digits to an int of any length (the interpreter's digit limit would refuse long ones)."""
    if not text or not text.isascii() or not text.isdigit():
        return None
    result = 0
    for start in range(0, len(text), 1000):
        chunk = text[start : start + 1000]
        result = result * 10 ** len(chunk) + int(chunk)
    return result


def _text(value: Any) -> Any:
    return "" if value is ABSENT or value is None else value


def compile_rule(
    rule: Mapping[str, Any],
    name: str,
    messages: Mapping[str, str],
    extra: Mapping[str, Any],
    item_fields: bool = False,
) -> Check:
    """The check of ``rule`` about the subject ``name``.

    Messages get ``extra`` (e.g. the block name) and, for item rules (``item_fields``), the
    item's keys; then ``name``/``field``/``key`` (the subject), ``value`` and the rule's own.
    """
    own = rule.get("message")

    def say(code: str, subject: Any, fields: Mapping[str, Any], /, **values: Any) -> str:
        base = {**extra, **fields} if item_fields else extra
        return fill(
            own or messages[code],
            {**base, "name": name, "field": name, "key": name, "value": _text(subject), **values},
        )

    body = _BUILDERS[rule["check"]](rule, say, name, messages, extra, item_fields)
    when = rule.get("when")
    if when is None:
        return body
    return lambda value, fields: body(value, fields) if _applies(when, fields) else None


def _applies(condition: Mapping[str, Any], fields: Mapping[str, Any]) -> bool:
    value = fields.get(condition["field"])
    present = condition.get("present")
    if present is not None and (value is not None) != present:
        return False
    equals = condition.get("equals")
    return equals is None or value == equals


# Each builder: (rule, say, name, messages, extra, item_fields) -> body(value, fields), called
# only when the rule applies (its `when`). Each body first skips an absent subject (ABSENT or
# None), except `required`'s: one call per rule on the happy path.


def _enum(rule: Mapping[str, Any], say: _Say, *_: Any) -> Check:
    values = tuple(rule["values"])
    shown = "/".join(values)

    def body(value: Any, fields: Mapping[str, Any]) -> str | None:
        if value is ABSENT or value is None:
            return None
        if value in values:
            return None
        return say("rule_enum", value, fields, values=shown)

    return body


def _pattern(rule: Mapping[str, Any], say: _Say, *_: Any) -> Check:
    search = compile_pattern(rule["pattern"]).search

    def body(value: Any, fields: Mapping[str, Any]) -> str | None:
        if value is ABSENT or value is None:
            return None
        if search(value if type(value) is str else str(value)) is not None:
            return None
        return say("rule_pattern", value, fields)

    return body


def _non_empty(rule: Mapping[str, Any], say: _Say, *_: Any) -> Check:
    def body(value: Any, fields: Mapping[str, Any]) -> str | None:
        if value is ABSENT or value is None:
            return None
        return say("rule_non_empty", value, fields) if len(value) == 0 else None

    return body


def _single_line(rule: Mapping[str, Any], say: _Say, *_: Any) -> Check:
    def body(value: Any, fields: Mapping[str, Any]) -> str | None:
        if value is ABSENT or value is None:
            return None
        text = value if type(value) is str else str(value)
        if "\n" in text or "\r" in text:
            return say("rule_single_line", value, fields)
        return None

    return body


def _length_bound(code: str, bound: str, size: str, at_least: bool) -> Callable[..., Check]:
    """The builder of a rule on ``len(value)``: at least (or at most) ``rule[bound]``; the
    message gets the bound as ``bound`` and the length as ``size``."""

    def build(rule: Mapping[str, Any], say: _Say, *_: Any) -> Check:
        limit = rule[bound]

        def body(value: Any, fields: Mapping[str, Any]) -> str | None:
            if value is ABSENT or value is None:
                return None
            length = len(value)
            if (length < limit) if at_least else (length > limit):
                return say(code, value, fields, **{bound: limit, size: length})
            return None

        return body

    return build


def _unique(rule: Mapping[str, Any], say: _Say, *_: Any) -> Check:
    key = rule.get("key")

    def body(value: Any, fields: Mapping[str, Any]) -> str | None:
        if value is ABSENT or value is None:
            return None
        seen: set[Any] = set()
        for item in value:
            subject = item.get(key) if isinstance(item, dict) and key else item
            if subject in seen:
                return say("rule_unique", value, fields, value=subject)
            seen.add(subject)
        return None

    return body


def _required(rule: Mapping[str, Any], say: _Say, *_: Any) -> Check:
    non_empty = rule.get("non_empty", True)

    def body(value: Any, fields: Mapping[str, Any]) -> str | None:
        if value is ABSENT or value is None or (non_empty and len(value) == 0):
            return say("rule_required", value, fields)
        return None

    return body


def _count_matches(rule: Mapping[str, Any], say: _Say, *_: Any) -> Check:
    section = rule["section"]

    def body(value: Any, fields: Mapping[str, Any]) -> str | None:
        if value is ABSENT or value is None:
            return None
        count = to_int(str(value).strip())
        items = fields.get(section)
        actual = len(items) if isinstance(items, list) else 0
        if count is None or count == actual:
            return None
        return say("rule_count_matches", value, fields, count=count, n=actual)

    return body


def _path(
    rule: Mapping[str, Any], say: _Say, name: str, messages: Mapping[str, str], *_: Any
) -> Check:
    search = compile_pattern(rule["chars"]).search
    chars_message = rule.get("chars_message") or messages["rule_path_chars"]
    absolute_message = rule.get("absolute_message") or messages["rule_path_absolute"]
    traversal_message = rule.get("traversal_message") or messages["rule_path_traversal"]

    def body(value: Any, fields: Mapping[str, Any]) -> str | None:
        if value is ABSENT or value is None:
            return None
        text = value if type(value) is str else str(value)
        if search(text) is None:
            return fill(chars_message, {"value": text})
        if text.startswith("/"):
            return fill(absolute_message, {"value": text})
        if ".." in text and ".." in text.split("/"):
            return fill(traversal_message, {"value": text})
        return None

    return body


def _each(
    rule: Mapping[str, Any],
    say: _Say,
    name: str,
    messages: Mapping[str, str],
    extra: Mapping[str, Any],
    item_fields: bool,
) -> Check:
    separator = rule.get("split", ",")
    strip = rule.get("strip", True)
    inner = [compile_rule(r, name, messages, extra, item_fields) for r in rule["rules"]]
    max_parts = rule.get("max_parts")
    parts_message = rule.get("max_parts_message") or messages["rule_max_parts"]

    def body(value: Any, fields: Mapping[str, Any]) -> str | None:
        if value is ABSENT or value is None:
            return None
        parts = str(value).split(separator)
        if strip:
            parts = [part.strip() for part in parts]
        for part in parts:
            for check in inner:
                message = check(part, fields)
                if message is not None:
                    return message
        if max_parts is not None and len(parts) > max_parts:
            return fill(parts_message, {"name": name, "count": len(parts), "max": max_parts})
        return None

    return body


_BUILDERS: dict[str, Callable[..., Check]] = {
    "enum": _enum,
    "pattern": _pattern,
    "non_empty": _non_empty,
    "single_line": _single_line,
    "max_len": _length_bound("rule_max_len", "max", "len", at_least=False),
    "min_items": _length_bound("rule_min_items", "min", "count", at_least=True),
    "max_items": _length_bound("rule_max_items", "max", "count", at_least=False),
    "unique": _unique,
    "required": _required,
    "count_matches": _count_matches,
    "path": _path,
    "each": _each,
}
