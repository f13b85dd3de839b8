"""Compiling a sentinel contract from plain data (``model_dump()`` dicts) into closures.

Everything a parse needs is decided here once: messages merged, patterns compiled (stdlib
``re`` when proven linear, RE2 otherwise), line-syntax matchers chosen (string methods for
the engine's defaults), item parsers and rule checks built as closures. The parse itself
(runtime.py) then only runs string tests and calls these closures; it builds a message only
when a check fails. Nothing here imports pydantic: a cached pack's plain data is enough.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from engine.contracts.kinds.sentinel.delimiters import DelimiterTemplate
from engine.contracts.kinds.sentinel.failures import Reporter
from engine.contracts.kinds.sentinel.messages import DEFAULT_MESSAGES
from engine.contracts.kinds.sentinel.rules import ABSENT, Check, compile_rule
from engine.contracts.kinds.sentinel.syntax import (
    field_line_matcher,
    header_matcher,
    name_check,
    splits_at_first_equals,
)
from engine.contracts.kinds.sentinel.values import ValueError_, parse_value, tokenize
from engine.core.patterns import compile_pattern
from engine.core.placeholders import fill, render_list

# Contract keys used only after the payload is read into fields (and documentation).
_AFTER_READING = frozenset({"rules", "warnings", "output", "description"})

ItemParser = Callable[[str, int], Any]
"""(item line, payload line number) -> the item's value; raises ``Reject``."""

# Grammar defaults, for plain data that leaves keys out (model_dump() writes them all).
_GRAMMAR_DEFAULTS: dict[str, Any] = {
    "nonce_input": "^[0-9A-F]{6}$",
    "nonce_token": "[0-9A-F]{6}",
    "max_payload_chars": 16000,
    "continuation_indent": "  ",
    "item_prefix": "- ",
    "section_header": "^([A-Z_]+):$",
    "field_line": "^([A-Z][A-Z0-9_]*)=",
    "field_name": "^[A-Z]",
    "item_key": "^[a-z][a-z_]*$",
    "quote": '"',
    "escapes": {"\\": "\\", '"': '"', "n": "\n", "t": "\t", "r": "\r"},
    "parse_failure": "PARSE_ERROR",
    "nonce_failure": "NONCE_MISMATCH",
    "input_failure": "PARSE_ERROR",
    "messages": {},
}


class FieldPlan:
    """One declared field: its form and multi-line behaviour, as flags the loop tests."""

    __slots__ = (
        "forced",
        "item",
        "key",
        "multiline",
        "must_not_quote",
        "must_quote",
        "non_empty",
        "require_continuation",
        "required",
        "section",
    )

    def __init__(self, key: str, spec: Mapping[str, Any], item: ItemParser | None) -> None:
        form = spec.get("form", "either")
        multiline = spec.get("multiline", "no")
        self.key = key
        self.section = form == "section"
        self.required = bool(spec.get("required", False))
        self.multiline = multiline != "no"
        self.forced = multiline == "forced"
        self.must_quote = form == "quoted"
        self.must_not_quote = form == "unquoted"
        self.require_continuation = bool(spec.get("require_continuation", False))
        self.non_empty = bool(spec.get("non_empty", False))
        self.item = item


class CompiledContract:
    """A sentinel contract, ready to parse: plain attributes and closures only."""

    def __init__(self, name: str, contract: Mapping[str, Any], grammar: Mapping[str, Any]) -> None:
        grammar = {**_GRAMMAR_DEFAULTS, **grammar}
        self.name = name
        self.messages: dict[str, str] = {
            **DEFAULT_MESSAGES,
            **(grammar["messages"] or {}),
            **(contract.get("messages") or {}),
        }
        self.report = Reporter(
            contract.get("grammar") or name,  # messages name the block the grammar is of
            self.messages,
            {
                "parse": grammar["parse_failure"],
                "nonce": grammar["nonce_failure"],
                "input": grammar["input_failure"],
            },
        )
        # inputs and delimiters
        self.params = [
            (
                param,
                spec.get("required", True),
                compile_pattern(spec["pattern"]).search,
                spec.get("missing_message"),
                spec.get("invalid_message"),
            )
            for param, spec in (contract.get("params") or {}).items()
        ]
        self.nonce_input = compile_pattern(grammar["nonce_input"]).search
        self.opener = DelimiterTemplate(contract["opener"], grammar["nonce_token"])
        self.closer = DelimiterTemplate(contract["closer"], grammar["nonce_token"])
        self.max_payload_chars: int = grammar["max_payload_chars"]
        self.many: bool = contract.get("count", "one") == "many"
        self.text_between: bool = contract.get("between", "blank") == "text"
        self.max_blocks: int = contract.get("max_blocks", 20)
        # line syntax
        self.continuation_indent: str = grammar["continuation_indent"]
        self.item_prefix: str = grammar["item_prefix"]
        self.quote: str = grammar["quote"]
        self.escapes: dict[str, str] = dict(grammar["escapes"])
        self.header = header_matcher(grammar["section_header"])
        self.field_line = field_line_matcher(grammar["field_line"])
        self.field_name = name_check(grammar["field_name"])
        self.item_key = name_check(grammar["item_key"])
        self.item_key_pattern: str = grammar["item_key"]
        self.fast_keys = splits_at_first_equals(grammar["section_header"], grammar["field_line"])
        # fields, rules, output
        self.fields: dict[str, FieldPlan] = {}
        for key, spec in contract["fields"].items():
            item = spec.get("item")
            parser = self._item_parser(key, item) if item is not None else None
            self.fields[key] = FieldPlan(key, spec, parser)
        self.required = frozenset(key for key, plan in self.fields.items() if plan.required)
        # declared keys a field line may carry (checked once here, not on every line)
        self.field_keys = {
            key: plan
            for key, plan in self.fields.items()
            if self.field_line(key + "=") == (key, "")
        }
        extra = {"block": name}
        self.rules: list[tuple[str, Check]] = [
            (
                rule.get("field") or "",
                compile_rule(rule, rule.get("field") or "", self.messages, extra),
            )
            for rule in contract.get("rules") or []
        ]
        self.loop_settings = (
            self.report,
            self.fields,
            self.field_keys,
            self.fast_keys,
            self.continuation_indent,
            self.item_prefix,
            self.header,
            self.field_line,
            self.quote,
            self.escapes,
        )
        self.output = [_output_step(spec) for spec in contract.get("output") or []]
        self.warnings = list(contract.get("warnings") or [])
        self.reading_key = json.dumps(
            [name, grammar, {k: v for k, v in contract.items() if k not in _AFTER_READING}],
            sort_keys=True,
            default=str,
        )
        """Everything reading a payload into fields depends on (see SentinelParser.read)."""

    # ------------------------------------------------------------------ list items

    def _item_parser(self, section: str, item: Mapping[str, Any]) -> ItemParser:
        report = self.report
        quote, escapes = self.quote, self.escapes
        limit: int | None = item.get("line_limit")
        skip = len(self.item_prefix)
        extra = {"block": self.name, "section": section}
        rules = [
            (
                rule.get("key") or None,
                compile_rule(
                    rule, rule.get("key") or section, self.messages, extra, item_fields=True
                ),
            )
            for rule in item.get("rules") or []
        ]
        value_kind = item.get("value", "tokens")

        if value_kind != "tokens":
            quoted_message = item.get("quoted_message") or self.messages["item_value_quoted"]

            def parse_value_item(line: str, number: int) -> Any:
                if limit is not None and len(line) > limit:
                    raise report.fail("item_line_too_long", number, section=section, limit=limit)
                try:
                    text, quoted = parse_value(line[skip:], quote, escapes)
                except ValueError_ as bad:
                    raise report.fail_with(bad.code, bad.values, number) from None
                if value_kind == "quoted" and not quoted:
                    raise report.reject(fill(quoted_message, {"section": section}), number)
                empty: dict[str, str] = {}
                for rule_key, check in rules:
                    message = check(ABSENT if rule_key else text, empty)
                    if message is not None:
                        raise report.reject(message, number)
                return text

            return parse_value_item

        keys = tuple(item.get("keys") or ())
        key_set = frozenset(keys)
        must_quote = frozenset(item.get("quoted") or ())
        key_ok = self.item_key
        key_pattern = self.item_key_pattern
        valid_keys = frozenset(key for key in keys if key_ok(key))

        def parse_token_item(line: str, number: int) -> Any:
            if limit is not None and len(line) > limit:
                raise report.fail("item_line_too_long", number, section=section, limit=limit)
            try:
                tokens = tokenize(line[skip:], quote)
            except ValueError_ as bad:
                raise report.fail(bad.code, number) from None
            found: dict[str, str] = {}
            for token in tokens:
                key, equals, raw = token.partition("=")
                if not equals:
                    raise report.fail("expected_key_value", number, token=token)
                if key not in valid_keys and not key_ok(key):
                    raise report.fail("invalid_item_key", number, key=key, pattern=key_pattern)
                if key in found:
                    raise report.fail("duplicate_item_key", number, key=key)
                text = raw.strip()
                quoted = False
                if text.startswith(quote):
                    try:
                        text, quoted = parse_value(text, quote, escapes)
                    except ValueError_ as bad:
                        raise report.fail_with(bad.code, bad.values, number) from None
                if not quoted and key in must_quote:
                    raise report.fail("item_key_quoted", number, key=key)
                found[key] = text
            if found.keys() != key_set:
                unknown = [k for k in found if k not in key_set]
                if unknown:
                    raise report.fail(
                        "unknown_item_keys", number, section=section, keys=render_list(unknown)
                    )
                missing = [k for k in keys if k not in found]
                if missing:
                    raise report.fail(
                        "missing_item_keys", number, section=section, keys=render_list(missing)
                    )
            for rule_key, check in rules:
                message = check(found.get(rule_key, ABSENT) if rule_key else None, found)
                if message is not None:
                    raise report.reject(message, number)
            return {k: found[k] for k in keys}

        return parse_token_item


def _output_step(spec: Mapping[str, Any]) -> tuple[str, str, Any]:
    """``(output key, kind, argument)``; kinds: warnings, param, int, bool, split, value."""
    if spec.get("warnings"):
        return spec["key"], "warnings", None
    if spec.get("param") is not None:
        return spec["key"], "param", spec["param"]
    kind = spec.get("type", "string")
    field = spec.get("field") or ""
    if kind == "split":
        return spec["key"], "split", (field, spec.get("split", ","))
    return spec["key"], kind if kind in ("int", "bool") else "value", field
