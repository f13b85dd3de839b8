"""A sentinel contract of a pack, ready to parse outputs: a delimited, line-oriented block
whose grammar the pack declares.

Order of work, each step stopping at the first error: inputs (params, then the expected
nonce), line normalisation, delimiter counting/order/nonce checks, payload size, payload lines
top to bottom (items checked as their line is reached), end of payload (pending multi-line
field, required fields), block rules in declared order, output and warnings.

Fast paths: CRs are removed only when the text has one; the delimiters are found by
``str.find`` over the whole text (delimiters.py) and only the payload is split into lines;
the grammar is compiled once into closures (compiler.py) run by one loop (runtime.py).
This module imports no pydantic: ``SentinelParser.from_data`` builds a parser from the plain
data of ``model_dump()``.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from engine.contracts.kinds.sentinel.compiler import CompiledContract
from engine.contracts.kinds.sentinel.delimiters import DelimiterLine
from engine.contracts.kinds.sentinel.failures import Reject
from engine.contracts.kinds.sentinel.near import near_miss
from engine.contracts.kinds.sentinel.prefix import SentinelPrefix, sentinel_prefix
from engine.contracts.kinds.sentinel.rules import ABSENT, to_int
from engine.contracts.kinds.sentinel.runtime import read_fields
from engine.contracts.placeholder import is_placeholder
from engine.core.placeholders import fill
from engine.core.results import Failure, ParseResult
from engine.core.textio import find_word

if TYPE_CHECKING:
    from engine.contracts.kinds.sentinel.model import SentinelContract, SentinelGrammar

_WORD = re.compile(r"[A-Za-z][A-Za-z0-9_]{2,}")

Reading = dict[str, Any] | Failure
"""What ``SentinelParser.read`` gives: the payload's fields, or the failure that stopped it."""


class SentinelParser:
    """One sentinel contract of a pack, ready to parse outputs."""

    def __init__(self, name: str, contract: SentinelContract, grammar: SentinelGrammar) -> None:
        self._setup(name, CompiledContract(name, contract.model_dump(), grammar.model_dump()))

    @classmethod
    def from_data(
        cls, name: str, contract: Mapping[str, Any], grammar: Mapping[str, Any]
    ) -> SentinelParser:
        """A parser from plain data: ``contract.model_dump()`` and ``grammar.model_dump()``."""
        parser = cls.__new__(cls)
        parser._setup(name, CompiledContract(name, contract, grammar))
        return parser

    def _setup(self, name: str, compiled: CompiledContract) -> None:
        self.name = name
        self._compiled = compiled
        # Inputs (nonce, param values) that passed the input checks, with the delimiters
        # bound to them: a run repeats the same few, so a parse usually skips both steps.
        names = {param[0] for param in compiled.params}
        names.update(compiled.opener.names, compiled.closer.names)
        self._input_names = tuple(sorted(names))
        self.param_names = frozenset(param[0] for param in compiled.params)
        self.required_params = tuple(param[0] for param in compiled.params if param[1])
        self._checked: dict[Any, tuple[DelimiterLine, DelimiterLine]] = {}

    def parse(self, text: str, nonce: str | None, params: Mapping[str, str]) -> ParseResult:
        try:
            if self._compiled.many:
                blocks, warnings = self._parse_many(text, nonce or "", params)
                return ParseResult.success(blocks, warnings)
            data, warnings = self._parse(text, nonce if nonce is not None else "", params)
        except Reject as rejected:
            return ParseResult(ok=False, failure=rejected.failure)
        return ParseResult.success(data, warnings)

    @property
    def reading_key(self) -> str | None:
        """What ``read`` depends on: two parsers with the same key read every output alike
        (their contracts may differ in block rules, warnings and output only). None for a
        contract of several blocks, which is parsed whole."""
        return None if self._compiled.many else self._compiled.reading_key

    def read(self, text: str, nonce: str | None, params: Mapping[str, str]) -> Reading:
        """The first part of a single-block ``parse``: inputs, delimiters and payload lines
        into fields (a dict), or the failure that stopped it. ``finish`` does the rest."""
        try:
            return self._read(text, nonce if nonce is not None else "", params)
        except Reject as rejected:
            return rejected.failure

    def prefix_reader(self, nonce: str | None, params: Mapping[str, str]) -> SentinelPrefix | None:
        """A reader of a streamed output (``engine.contracts.kinds.sentinel.prefix``)."""
        return sentinel_prefix(
            self._compiled,
            self._delimiters,
            nonce or "",
            params,
            self._count_failure,
            self._payload,
            self.reading_key,
        )

    def finish(self, reading: Reading, params: Mapping[str, str]) -> ParseResult:
        """The rest of ``parse`` after ``read`` (of this parser or of one with the same
        ``reading_key``): required fields, block rules, warnings and output. The reading is
        not changed, so it can be finished by several parsers."""
        if isinstance(reading, Failure):
            return ParseResult(ok=False, failure=reading)
        try:
            data, warnings = self._finish(reading, params)
        except Reject as rejected:
            return ParseResult(ok=False, failure=rejected.failure)
        return ParseResult.success(data, warnings)

    def _delimiters(
        self, nonce: str, params: Mapping[str, str]
    ) -> tuple[DelimiterLine, DelimiterLine]:
        """The opener and closer bound to these inputs, checked once per distinct inputs."""
        contract = self._compiled
        key = (nonce, *map(params.get, self._input_names))
        delimiters = self._checked.get(key)
        if delimiters is None:
            self._check_inputs(nonce, params)
            delimiters = contract.opener.bind(params), contract.closer.bind(params)
            if len(self._checked) >= 1024:
                self._checked.clear()
            self._checked[key] = delimiters
        return delimiters

    def _parse_many(
        self, text: str, nonce: str, params: Mapping[str, str]
    ) -> tuple[list[dict[str, Any]], list[str]]:
        """One or more complete blocks in order, each parsed as a single block; the first
        failing block's failure, prefixed with its number."""
        contract = self._compiled
        report = contract.report
        opener, closer = self._delimiters(nonce, params)
        if "\r" in text:
            text = text.replace("\r", "")
        openers = opener.find(text)
        closers = closer.find(text)
        if not openers or len(openers) > contract.max_blocks:
            raise report.fail("block_count", count=len(openers), max=contract.max_blocks)
        if len(closers) != len(openers):
            raise report.fail("closer_count_many", openers=len(openers), closers=len(closers))
        previous_end = -1
        for index, (start, _, _) in enumerate(openers, 1):
            close_start, close_end, _ = closers[index - 1]
            if start <= previous_end:
                raise report.fail("block_nested", index=index, previous=index - 1)
            if close_start <= start:
                raise report.fail("block_order", index=index)
            if previous_end >= 0 and not contract.text_between and text[previous_end:start].strip():
                raise report.fail("text_between", index=index - 1, next=index)
            previous_end = close_end
        blocks: list[dict[str, Any]] = []
        warnings: list[str] = []
        prefix = contract.messages["block_prefix"]
        for index, ((start, _, _), (_, close_end, _)) in enumerate(
            zip(openers, closers, strict=True), 1
        ):
            try:
                data, found = self._parse(text[start:close_end], nonce, params)
            except Reject as rejected:
                # the block's lines counted in the whole output, not in its own text
                failure = report.shifted(rejected, text.count("\n", 0, start)).failure
                message = fill(prefix, {"index": index, "message": failure.message})
                raise Reject(Failure(failure.type, message, failure.line)) from None
            blocks.append(data)
            warnings.extend(fill(prefix, {"index": index, "message": w}) for w in found)
        return blocks, warnings

    def _parse(
        self, text: str, nonce: str, params: Mapping[str, str]
    ) -> tuple[dict[str, Any], list[str]]:
        return self._finish(self._read(text, nonce, params), params)

    def _read(self, text: str, nonce: str, params: Mapping[str, str]) -> dict[str, Any]:
        delimiters = self._delimiters(nonce, params)
        payload, opener_line = self._payload(text, nonce, *delimiters)
        # payload line N is the output's line opener_line + N: numbered so from the start,
        # a failure's message is filled once
        return read_fields(payload, self._compiled, offset=opener_line)

    def _finish(
        self, fields: Mapping[str, Any], params: Mapping[str, str]
    ) -> tuple[dict[str, Any], list[str]]:
        contract = self._compiled
        report = contract.report
        if not contract.required <= fields.keys():
            missing = sorted(contract.required - fields.keys())
            raise report.fail("missing_fields", fields=", ".join(missing))
        copied = _placeholder(fields)
        if copied is not None:
            raise report.fail("placeholder", name=copied[0], value=copied[1])
        for name, check in contract.rules:
            message = check(fields.get(name, ABSENT), fields)
            if message is not None:
                raise report.reject(message)
        warnings = self._warnings(fields) if contract.warnings else []
        return self._output(fields, params, warnings), warnings

    # ------------------------------------------------------------------ inputs, delimiters

    def _check_inputs(self, nonce: str, params: Mapping[str, str]) -> None:
        contract = self._compiled
        for name, required, search, missing_message, invalid_message in contract.params:
            value = params.get(name)
            if value is None:
                if required:
                    template = missing_message or contract.messages["param_missing"]
                    raise contract.report.reject(fill(template, {"param": name}), kind="input")
                continue
            if search(value) is None:
                template = invalid_message or contract.messages["param_invalid"]
                raise contract.report.reject(
                    fill(template, {"param": name, "value": value}), kind="input"
                )
        if contract.nonce_input(nonce) is None:
            raise contract.report.fail("nonce_invalid", kind="input", nonce=nonce)

    def _payload(
        self, text: str, nonce: str, opener: DelimiterLine, closer: DelimiterLine
    ) -> tuple[list[str], int]:
        """The payload lines and the output's line number of the opener; the text is
        scanned for delimiters, never split whole."""
        contract = self._compiled
        report = contract.report
        if "\r" in text:  # CRLF -> LF and a lone CR deleted: both just drop the CR
            text = text.replace("\r", "")
        openers = opener.find(text)
        closers = closer.find(text)
        if len(openers) != 1:
            raise self._count_failure("opener_count", openers, text, nonce, opener, closers)
        if len(closers) != 1:
            raise self._count_failure("closer_count", closers, text, nonce, closer, openers)
        (open_start, open_end, open_nonce), (close_start, _, close_nonce) = openers[0], closers[0]
        if open_start >= close_start:
            raise report.fail("order")
        if open_nonce != close_nonce:
            raise report.fail("nonce_pair", opener=open_nonce, closer=close_nonce)
        if open_nonce != nonce:
            raise report.fail("nonce_expected", kind="nonce", found=open_nonce, expected=nonce)
        opener_line = text.count("\n", 0, open_start) + 1
        if close_start == open_end + 1:  # adjacent lines: no payload line at all
            return [], opener_line
        size = close_start - 1 - (open_end + 1)  # the payload lines joined with LF
        if size > contract.max_payload_chars:
            raise report.fail("payload_too_large", max=contract.max_payload_chars, size=size)
        return text[open_end + 1 : close_start - 1].split("\n"), opener_line

    def _count_failure(
        self,
        code: str,
        found: list[tuple[int, int, str]],
        text: str,
        nonce: str,
        wanted: DelimiterLine,
        others: list[tuple[int, int, str]],
    ) -> Reject:
        """A delimiter found other than once; when it is absent, the line that nearly is it
        (or, for an opener, the closer that came first) is named, so a repair can fix it."""
        contract = self._compiled
        message = fill(
            contract.messages[code], {"block": contract.report.block, "count": len(found)}
        )
        if not found:
            expected = wanted.line(nonce)
            skip = frozenset(start for start, _, _ in others)
            miss = near_miss(text, expected, _keyword(expected), skip)
            which = "opener" if code == "opener_count" else "closer"
            if miss is not None:
                values = {"line": miss.line, "found": miss.found, "expected": expected}
                near = fill(
                    contract.messages[f"near_{which}"], {**values, "difference": miss.difference}
                )
                message = f"{message}; {near}"
            elif which == "opener" and others:
                line = text.count("\n", 0, others[0][0]) + 1
                near = fill(contract.messages["closer_first"], {"line": line, "expected": expected})
                message = f"{message}; {near}"
        return contract.report.reject(message)

    # ------------------------------------------------------------------ output

    def _output(
        self, fields: Mapping[str, Any], params: Mapping[str, str], warnings: list[str]
    ) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for key, kind, argument in self._compiled.output:
            if kind == "value":
                out[key] = fields.get(argument)
            elif kind == "param":
                out[key] = params.get(argument)
            elif kind == "warnings":
                out[key] = list(warnings)
            elif kind == "split":
                field, separator = argument
                value = fields.get(field)
                out[key] = (
                    None
                    if value is None
                    else [part.strip() for part in str(value).split(separator)]
                )
            else:
                value = fields.get(argument)
                if value is None:
                    out[key] = None
                elif kind == "int":
                    number = to_int(str(value).strip())
                    if number is None:
                        raise self._compiled.report.fail("rule_int_too_long", name=argument)
                    out[key] = number
                else:  # bool
                    out[key] = value == "true"
        return out

    def _warnings(self, fields: Mapping[str, Any]) -> list[str]:
        warnings: list[str] = []
        for spec in self._compiled.warnings:
            for item in fields.get(spec["section"]) or []:
                if not isinstance(item, dict):
                    continue
                text = str(item.get(spec["key"], ""))
                if spec.get("lowercase", True):
                    text = text.lower()
                for word in spec["words"]:
                    if find_word(text, word) >= 0:
                        warnings.append(fill(spec["message"], {**item, "word": word}))
                        break
        return warnings


def parser_from_data(name: str, data: Mapping[str, Any]) -> SentinelParser:
    """The parser of block ``name`` rebuilt from what ``SentinelKind.parser_data`` wrote
    down (the compiled-pack cache of `rules parse`)."""
    return SentinelParser.from_data(name, data["contract"], data["grammar"])


def _placeholder(fields: Mapping[str, Any]) -> tuple[str, str] | None:
    """The first field (or section item key) whose value is still a template placeholder
    such as ``<one line>``: the model copied the contract's form instead of answering."""
    for name, value in fields.items():
        if is_placeholder(value):
            return name, str(value).strip()
        if isinstance(value, list):
            for number, item in enumerate(value, 1):
                pairs = item.items() if isinstance(item, dict) else [("", item)]
                for key, part in pairs:
                    if is_placeholder(part):
                        where = f"{name} item {number}" + (f" {key}" if key else "")
                        return where, str(part).strip()
    return None


def _keyword(line: str) -> str:
    """The block's name in a delimiter line (its first word of three or more characters):
    the lines that hold it are the candidates for a near miss."""
    match = _WORD.search(line)
    return match.group(0) if match else ""
