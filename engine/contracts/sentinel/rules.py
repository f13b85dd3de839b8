"""Value and block rules of sentinel grammars: each rule kind is one small function.

A rule returns the filled-in message when it fails, ``None`` when it holds or does not apply.
Rules on an absent field do not apply, except ``required``.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from engine.format.model import (
    CountMatchesRule,
    EachRule,
    EnumRule,
    MaxItemsRule,
    MaxLenRule,
    MinItemsRule,
    NonEmptyRule,
    PathRule,
    PatternRule,
    RequiredRule,
    SingleLineRule,
    UniqueRule,
)
from engine.patterns import compile_pattern
from engine.placeholders import fill

_ABSENT = object()


@dataclass(frozen=True)
class Subject:
    """What a rule looks at: a value (or _ABSENT), its name, and the whole block's fields."""

    value: Any
    name: str
    fields: Mapping[str, Any]
    messages: Mapping[str, str]
    extra: Mapping[str, Any]

    @property
    def present(self) -> bool:
        return self.value is not _ABSENT and self.value is not None

    def say(self, rule: Any, code: str, **values: Any) -> str:
        template = rule.message if getattr(rule, "message", None) else self.messages[code]
        return fill(template, {**self.extra, "name": self.name, "field": self.name,
                               "key": self.name, "value": _text(self.value), **values})


def _text(value: Any) -> Any:
    return "" if value is _ABSENT or value is None else value


def to_int(text: str) -> int | None:
    """Digits to an int of any length (the interpreter's digit limit would refuse long ones)."""
    if not text or not text.isascii() or not text.isdigit():
        return None
    result = 0
    for start in range(0, len(text), 1000):
        chunk = text[start:start + 1000]
        result = result * 10 ** len(chunk) + int(chunk)
    return result


def _enum(rule: EnumRule, s: Subject) -> str | None:
    if s.value in rule.values:
        return None
    return s.say(rule, "rule_enum", values="/".join(rule.values))


def _pattern(rule: PatternRule, s: Subject) -> str | None:
    if compile_pattern(rule.pattern).search(str(s.value)) is not None:
        return None
    return s.say(rule, "rule_pattern")


def _non_empty(rule: NonEmptyRule, s: Subject) -> str | None:
    return s.say(rule, "rule_non_empty") if len(s.value) == 0 else None


def _single_line(rule: SingleLineRule, s: Subject) -> str | None:
    text = str(s.value)
    return s.say(rule, "rule_single_line") if "\n" in text or "\r" in text else None


def _max_len(rule: MaxLenRule, s: Subject) -> str | None:
    size = len(s.value)
    return s.say(rule, "rule_max_len", max=rule.max, len=size) if size > rule.max else None


def _min_items(rule: MinItemsRule, s: Subject) -> str | None:
    count = len(s.value)
    return s.say(rule, "rule_min_items", min=rule.min, count=count) if count < rule.min else None


def _max_items(rule: MaxItemsRule, s: Subject) -> str | None:
    count = len(s.value)
    return s.say(rule, "rule_max_items", max=rule.max, count=count) if count > rule.max else None


def _unique(rule: UniqueRule, s: Subject) -> str | None:
    seen: set[Any] = set()
    for item in s.value:
        value = item.get(rule.key) if isinstance(item, dict) and rule.key else item
        if value in seen:
            return s.say(rule, "rule_unique", value=value)
        seen.add(value)
    return None


def _required(rule: RequiredRule, s: Subject) -> str | None:
    if not s.present or (rule.non_empty and len(s.value) == 0):
        return s.say(rule, "rule_required")
    return None


def _count_matches(rule: CountMatchesRule, s: Subject) -> str | None:
    count = to_int(str(s.value).strip())
    items = s.fields.get(rule.section)
    actual = len(items) if isinstance(items, list) else 0
    if count is None or count == actual:
        return None
    return s.say(rule, "rule_count_matches", count=count, n=actual)


def _path(rule: PathRule, s: Subject) -> str | None:
    text = str(s.value)
    if compile_pattern(rule.chars).search(text) is None:
        return fill(rule.chars_message or s.messages["rule_path_chars"], {"value": text})
    if text.startswith("/"):
        return fill(rule.absolute_message or s.messages["rule_path_absolute"], {"value": text})
    if ".." in text.split("/"):
        return fill(rule.traversal_message or s.messages["rule_path_traversal"], {"value": text})
    return None


def _each(rule: EachRule, s: Subject) -> str | None:
    parts = str(s.value).split(rule.split)
    if rule.strip:
        parts = [part.strip() for part in parts]
    for part in parts:
        for inner in rule.rules:
            message = run_rule(inner, Subject(part, s.name, s.fields, s.messages, s.extra))
            if message is not None:
                return message
    if rule.max_parts is not None and len(parts) > rule.max_parts:
        template = rule.max_parts_message or s.messages["rule_max_parts"]
        return fill(template, {"name": s.name, "count": len(parts), "max": rule.max_parts})
    return None


RULES: dict[type, Callable[[Any, Subject], str | None]] = {
    EnumRule: _enum,
    PatternRule: _pattern,
    NonEmptyRule: _non_empty,
    SingleLineRule: _single_line,
    MaxLenRule: _max_len,
    MinItemsRule: _min_items,
    MaxItemsRule: _max_items,
    UniqueRule: _unique,
    RequiredRule: _required,
    CountMatchesRule: _count_matches,
    PathRule: _path,
    EachRule: _each,
}


def applies(rule: Any, fields: Mapping[str, Any]) -> bool:
    condition = rule.when
    if condition is None:
        return True
    value = fields.get(condition.field)
    if condition.present is not None and (value is not None) != condition.present:
        return False
    return condition.equals is None or value == condition.equals


def run_rule(rule: Any, subject: Subject) -> str | None:
    """The message of a failing rule, or None."""
    if not applies(rule, subject.fields):
        return None
    if not subject.present and not isinstance(rule, RequiredRule):
        return None
    return RULES[type(rule)](rule, subject)


ABSENT = _ABSENT
