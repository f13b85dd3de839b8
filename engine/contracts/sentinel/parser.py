"""The sentinel-block interpreter: a delimited, line-oriented block whose grammar a pack declares.

Order of work, each step stopping at the first error: inputs (params, then the expected
nonce), line normalisation, delimiter counting/order/nonce checks, payload size, payload lines
top to bottom (items checked as their line is reached), end of payload (pending multi-line
field, required fields), block rules in declared order, output and warnings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Any

from engine.contracts.sentinel.messages import DEFAULT_MESSAGES
from engine.contracts.sentinel.rules import ABSENT, Subject, run_rule, to_int
from engine.contracts.sentinel.values import ValueError_, parse_value, tokenize
from engine.format.model import FieldSpec, ItemSpec, SentinelContract, SentinelGrammar
from engine.patterns import CompiledPattern, compile_pattern
from engine.placeholders import fill, render_list
from engine.results import Failure, ParseResult
from engine.textio import find_word

_PUNCTUATION = set("\\^$.|?*+()[]{}-/#&~!@%=:;,'\"<>`")


def _escape(text: str) -> str:
    """Escape ASCII punctuation for RE2; everything else stands for itself."""
    return "".join("\\" + c if c in _PUNCTUATION else c for c in text)


@lru_cache(maxsize=4096)
def delimiter_pattern(template: str, nonce_token: str,
                      params: tuple[tuple[str, str], ...]) -> tuple[str, CompiledPattern]:
    """The literal prefix (a fast pre-filter) and the full pattern of a delimiter line.

    Params are matched literally; ``{nonce}`` captures ``nonce_token``. Cached: the same
    template and params recur on every call of a run.
    """
    values = dict(params)
    pattern: list[str] = []
    prefix: str | None = None
    rest = template
    while rest:
        start = rest.find("{")
        end = rest.find("}", start)
        if start < 0 or end < 0:
            pattern.append(_escape(rest))
            prefix = rest if prefix is None else prefix
            break
        literal, name, rest = rest[:start], rest[start + 1:end], rest[end + 1:]
        if prefix is None:
            prefix = literal
        pattern.append(_escape(literal))
        if name == "nonce":
            pattern.append("(" + nonce_token + ")")
        else:
            pattern.append(_escape(values.get(name, "")))
    return prefix or "", compile_pattern("^" + "".join(pattern) + "$")


class _Reject(Exception):
    def __init__(self, failure: Failure) -> None:
        super().__init__(failure.message)
        self.failure = failure


@dataclass
class _State:
    fields: dict[str, Any] = field(default_factory=dict)
    section: str | None = None
    pending: str | None = None
    pending_line: int = 0
    parts: list[str] = field(default_factory=list)


class SentinelParser:
    """One sentinel contract of a pack, ready to parse outputs."""

    def __init__(self, name: str, contract: SentinelContract, grammar: SentinelGrammar) -> None:
        self.name = name
        self.contract = contract
        self.grammar = grammar
        self.messages = {**DEFAULT_MESSAGES, **grammar.messages, **contract.messages}
        self.fields: dict[str, FieldSpec] = dict(contract.fields)
        self.header = compile_pattern(grammar.section_header)
        self.field_line = compile_pattern(grammar.field_line)
        self.field_name = compile_pattern(grammar.field_name)
        self.item_key = compile_pattern(grammar.item_key)
        self.nonce_input = compile_pattern(grammar.nonce_input)
        self.escapes = dict(grammar.escapes)

    @classmethod
    def from_data(cls, name: str, contract: Mapping[str, Any],
                  grammar: Mapping[str, Any]) -> SentinelParser:
        """A parser from the plain data of a contract and the pack's grammar settings."""
        from engine.format.model import SentinelContract, SentinelGrammar

        return cls(name, SentinelContract.model_validate(contract),
                   SentinelGrammar.model_validate(grammar))

    # ------------------------------------------------------------------ messages

    def _fail(self, code: str, line: int | None = None, kind: str = "parse",
              **values: object) -> _Reject:
        message = fill(self.messages[code], {"block": self.name, **values})
        return self._reject(message, line, kind)

    def _reject(self, message: str, line: int | None = None, kind: str = "parse") -> _Reject:
        if line is not None:
            message = fill(self.messages["line_prefix"], {"line": line, "message": message})
        failure_type = {
            "parse": self.grammar.parse_failure,
            "nonce": self.grammar.nonce_failure,
            "input": self.grammar.input_failure,
        }[kind]
        return _Reject(Failure(failure_type, message, line))

    # ------------------------------------------------------------------ entry

    def parse(self, text: str, nonce: str | None, params: Mapping[str, str]) -> ParseResult:
        try:
            data, warnings = self._parse(text, nonce if nonce is not None else "", params)
        except _Reject as rejected:
            return ParseResult(ok=False, failure=rejected.failure)
        return ParseResult(ok=True, data=data, warnings=warnings)

    def _parse(self, text: str, nonce: str,
               params: Mapping[str, str]) -> tuple[dict[str, Any], list[str]]:
        self._check_inputs(nonce, params)
        lines = text.replace("\r\n", "\n").replace("\r", "").split("\n")
        payload = self._payload(lines, nonce, params)
        state = _State()
        for number, line in enumerate(payload, start=1):
            self._line(state, number, line)
        self._close_pending(state)
        missing = sorted(k for k, spec in self.fields.items()
                         if spec.required and k not in state.fields)
        if missing:
            raise self._fail("missing_fields", fields=", ".join(missing))
        for rule in self.contract.rules:
            name = rule.field or ""
            subject = Subject(state.fields.get(name, ABSENT), name, state.fields, self.messages,
                              {"block": self.name})
            message = run_rule(rule, subject)
            if message is not None:
                raise self._reject(message)
        return self._output(state.fields, params), self._warnings(state.fields)

    # ------------------------------------------------------------------ inputs, delimiters

    def _check_inputs(self, nonce: str, params: Mapping[str, str]) -> None:
        for name, spec in self.contract.params.items():
            value = params.get(name)
            if value is None:
                if spec.required:
                    template = spec.missing_message or self.messages["param_missing"]
                    raise self._reject(fill(template, {"param": name}), kind="input")
                continue
            if compile_pattern(spec.pattern).search(value) is None:
                template = spec.invalid_message or self.messages["param_invalid"]
                raise self._reject(fill(template, {"param": name, "value": value}),
                                   kind="input")
        if self.nonce_input.search(nonce) is None:
            raise self._fail("nonce_invalid", kind="input", nonce=nonce)

    def _find(self, lines: list[str], template: str,
              params: Mapping[str, str]) -> list[tuple[int, str]]:
        values = tuple(sorted(params.items()))
        prefix, pattern = delimiter_pattern(template, self.grammar.nonce_token, values)
        found = []
        for index, line in enumerate(lines):
            if not line.startswith(prefix):
                continue
            match = pattern.search(line.rstrip())
            if match is not None:
                found.append((index, match.group(1)))
        return found

    def _payload(self, lines: list[str], nonce: str, params: Mapping[str, str]) -> list[str]:
        openers = self._find(lines, self.contract.opener, params)
        closers = self._find(lines, self.contract.closer, params)
        if len(openers) != 1:
            raise self._fail("opener_count", count=len(openers))
        if len(closers) != 1:
            raise self._fail("closer_count", count=len(closers))
        (open_at, open_nonce), (close_at, close_nonce) = openers[0], closers[0]
        if open_at >= close_at:
            raise self._fail("order")
        if open_nonce != close_nonce:
            raise self._fail("nonce_pair", opener=open_nonce, closer=close_nonce)
        if open_nonce != nonce:
            raise self._fail("nonce_expected", kind="nonce", found=open_nonce, expected=nonce)
        payload = lines[open_at + 1:close_at]
        size = sum(len(line) for line in payload) + max(len(payload) - 1, 0)
        if size > self.grammar.max_payload_chars:
            raise self._fail("payload_too_large", max=self.grammar.max_payload_chars, size=size)
        return payload

    # ------------------------------------------------------------------ payload lines

    def _close_pending(self, state: _State) -> None:
        if state.pending is None:
            return
        key, spec = state.pending, self.fields[state.pending]
        if spec.require_continuation and not state.parts:
            raise self._fail("needs_continuation", state.pending_line, key=key)
        value = "\n".join(state.parts)
        if spec.non_empty and not value.strip():
            raise self._fail("multiline_empty", state.pending_line, key=key)
        state.fields[key] = value
        state.pending = None
        state.parts = []

    def _line(self, state: _State, number: int, line: str) -> None:
        grammar = self.grammar
        if line.startswith("\t"):
            raise self._fail("tab_start", number)
        if line == "":
            self._close_pending(state)
            return
        if line.startswith(grammar.continuation_indent):
            if state.pending is None:
                raise self._fail("unexpected_continuation", number)
            state.parts.append(line[len(grammar.continuation_indent):])
            return
        self._close_pending(state)
        if line.startswith(grammar.item_prefix):
            if state.section is None:
                raise self._fail("item_outside_section", number)
            spec = self.fields[state.section]
            assert spec.item is not None
            item = self._item(state.section, spec.item, line, number)
            state.fields[state.section].append(item)
            return
        header = self.header.search(line)
        if header is not None:
            self._header(state, number, header.group(1))
            return
        key_match = self.field_line.search(line)
        if key_match is not None:
            key = key_match.group(1)
            self._key_value(state, number, key, line[key_match.end():])
            return
        raise self._fail("unrecognized_line", number)

    def _header(self, state: _State, number: int, key: str) -> None:
        if self.field_name.search(key) is None:
            raise self._fail("invalid_field_name", number, key=key)
        spec = self.fields.get(key)
        if spec is None:
            raise self._fail("unknown_field", number, key=key)
        if spec.form != "section":
            raise self._fail("not_a_section", number, key=key)
        if key in state.fields:
            raise self._fail("duplicate_field", number, key=key)
        state.fields[key] = []
        state.section = key

    def _key_value(self, state: _State, number: int, key: str, raw: str) -> None:
        spec = self.fields.get(key)
        if spec is None:
            raise self._fail("unknown_field", number, key=key)
        if spec.form == "section":
            raise self._fail("must_be_section", number, key=key)
        if key in state.fields or key == state.pending:
            raise self._fail("duplicate_field", number, key=key)
        state.section = None
        blank = not raw.strip()
        if spec.multiline == "forced" and not blank:
            raise self._fail("must_be_multiline", number, key=key)
        if spec.multiline != "no" and blank:
            state.pending, state.pending_line, state.parts = key, number, []
            state.fields.pop(key, None)
            return
        value = self._value(raw, number)
        if spec.form == "quoted" and not value.quoted:
            raise self._fail("must_be_quoted", number, key=key)
        if spec.form == "unquoted" and value.quoted:
            raise self._fail("must_be_unquoted", number, key=key)
        state.fields[key] = value.text

    def _value(self, raw: str, number: int) -> Any:
        try:
            return parse_value(raw, self.grammar.quote, self.escapes)
        except ValueError_ as bad:
            raise self._fail(bad.code, number, "parse", **bad.values) from None

    # ------------------------------------------------------------------ list items

    def _item(self, section: str, spec: ItemSpec, line: str, number: int) -> Any:
        if spec.line_limit is not None and len(line) > spec.line_limit:
            raise self._fail("item_line_too_long", number, section=section,
                             limit=spec.line_limit)
        text = line[len(self.grammar.item_prefix):]
        if spec.value != "tokens":
            value = self._value(text, number)
            if spec.value == "quoted" and not value.quoted:
                template = spec.quoted_message or self.messages["item_value_quoted"]
                raise self._reject(fill(template, {"section": section}), number)
            self._item_rules(spec, value.text, {}, number, section)
            return value.text
        try:
            tokens = tokenize(text, self.grammar.quote)
        except ValueError_ as bad:
            raise self._fail(bad.code, number) from None
        item: dict[str, str] = {}
        for token in tokens:
            key, equals, raw = token.partition("=")
            if not equals:
                raise self._fail("expected_key_value", number, token=token)
            if self.item_key.search(key) is None:
                raise self._fail("invalid_item_key", number, key=key,
                                 pattern=self.grammar.item_key)
            if key in item:
                raise self._fail("duplicate_item_key", number, key=key)
            value = self._value(raw, number)
            if key in spec.quoted and not value.quoted:
                raise self._fail("item_key_quoted", number, key=key)
            item[key] = value.text
        unknown = [k for k in item if k not in spec.keys]
        if unknown:
            raise self._fail("unknown_item_keys", number, section=section,
                             keys=render_list(unknown))
        missing = [k for k in spec.keys if k not in item]
        if missing:
            raise self._fail("missing_item_keys", number, section=section,
                             keys=render_list(missing))
        self._item_rules(spec, None, item, number, section)
        return {k: item[k] for k in spec.keys}

    def _item_rules(self, spec: ItemSpec, value: str | None, item: dict[str, str],
                    number: int, section: str) -> None:
        for rule in spec.rules:
            name = rule.key or section
            subject_value = item.get(rule.key, ABSENT) if rule.key else value
            subject = Subject(subject_value, name, item, self.messages,
                              {"block": self.name, "section": section, **item})
            message = run_rule(rule, subject)
            if message is not None:
                raise self._reject(message, number)

    # ------------------------------------------------------------------ output

    def _output(self, fields: Mapping[str, Any], params: Mapping[str, str]) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for spec in self.contract.output:
            if spec.warnings:
                out[spec.key] = self._warnings(fields)
                continue
            if spec.param is not None:
                out[spec.key] = params.get(spec.param)
                continue
            value = fields.get(spec.field or "")
            if value is None:
                out[spec.key] = None
            elif spec.type == "int":
                number = to_int(str(value).strip())
                if number is None:
                    raise self._fail("rule_int_too_long", name=spec.field)
                out[spec.key] = number
            elif spec.type == "bool":
                out[spec.key] = value == "true"
            elif spec.type == "split":
                out[spec.key] = [part.strip() for part in str(value).split(spec.split)]
            else:
                out[spec.key] = value
        return out

    def _warnings(self, fields: Mapping[str, Any]) -> list[str]:
        warnings: list[str] = []
        for spec in self.contract.warnings:
            for item in fields.get(spec.section) or []:
                if not isinstance(item, dict):
                    continue
                text = str(item.get(spec.key, ""))
                if spec.lowercase:
                    text = text.lower()
                for word in spec.words:
                    if find_word(text, word) >= 0:
                        warnings.append(fill(spec.message, {**item, "word": word}))
                        break
        return warnings
