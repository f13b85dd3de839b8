"""The payload state machine: payload lines, top to bottom, into the block's fields.

One loop with local state (no per-line objects). Each line is classified by a few string
tests in the order the grammar fixes: tab start, blank, continuation, then (after closing a
pending multi-line field) list item, section header, ``KEY=value`` line. A field value is
decoded only when its line is reached; a failure object is built only when a check fails.
"""

from __future__ import annotations

from typing import Any

from engine.contracts.kinds.sentinel.compiler import CompiledContract, FieldPlan
from engine.contracts.kinds.sentinel.failures import Reporter
from engine.contracts.kinds.sentinel.values import ValueError_, parse_value


def _close(plan: FieldPlan, parts: list[str], line: int, report: Reporter) -> str:
    """The value of a pending multi-line field whose ``KEY=`` is on ``line``."""
    if plan.require_continuation and not parts:
        raise report.fail("needs_continuation", line, key=plan.key)
    value = "\n".join(parts)
    if plan.non_empty and not value.strip():
        raise report.fail("multiline_empty", line, key=plan.key)
    return value


def read_fields(
    lines: list[str], contract: CompiledContract, partial: bool = False, offset: int = 0
) -> dict[str, Any]:
    """The fields of a payload (values, multi-line texts, section item lists); raises
    ``Reject`` at the first failing check. ``partial``: the payload's first lines only (a
    stream still arriving), so a multi-line field still open at the end is left open.
    ``offset``: the output's lines before the payload (through its opener), so a failure
    names the output's own line without being renumbered afterwards."""
    reader = FieldReader(contract, offset)
    reader.read(lines)
    return reader.fields if partial else reader.end()


class FieldReader:
    """``read_fields`` in steps: the payload's lines given a few at a time (a stream as it
    arrives), each line read once, the state kept between steps; ``end`` closes what is
    still open. The lines of all steps read as one ``read_fields`` of them all.
    ``offset`` is added to every line number a failure names (0: the payload's own)."""

    __slots__ = ("_contract", "_items", "_offset", "_parse_item", "_parts", "_pending",
                 "_pending_line", "fields", "lines")  # fmt: skip

    def __init__(self, contract: CompiledContract, offset: int = 0) -> None:
        self._contract = contract
        self._offset = offset
        self.fields: dict[str, Any] = {}
        self.lines = 0  # the lines read so far
        self._items: list[Any] | None = None  # the current section's item list
        self._parse_item: Any = None
        self._pending: FieldPlan | None = None  # a multi-line field collecting lines
        self._pending_line = 0
        self._parts: list[str] = []

    def end(self) -> dict[str, Any]:
        """The fields, a multi-line field still open at the end closed."""
        pending = self._pending
        if pending is not None:
            report = self._contract.loop_settings[0]
            self.fields[pending.key] = _close(pending, self._parts, self._pending_line, report)
            self._pending = None
        return self.fields

    def read(self, lines: list[str]) -> None:
        """Read the next ``lines`` of the payload; ``Reject`` at the first failing check
        (numbered from the payload's first line, plus the reader's offset)."""
        contract = self._contract
        (
            report,
            plans,
            field_keys,
            fast_keys,
            indent,
            item_prefix,
            header,
            field_line,
            quote,
            escapes,
        ) = contract.loop_settings
        indent_size = len(indent)

        fields = self.fields
        items = self._items
        parse_item = self._parse_item
        pending = self._pending
        pending_line = self._pending_line
        parts = self._parts
        first = self._offset + self.lines + 1
        for number, line in enumerate(lines, first):
            if not line:  # blank: close a pending field; the current section stays
                if pending is not None:
                    fields[pending.key] = _close(pending, parts, pending_line, report)
                    pending = None
                continue
            if line[0] == "\t":
                raise report.fail("tab_start", number)
            if line.startswith(indent):
                if pending is None:
                    raise report.fail("unexpected_continuation", number)
                parts.append(line[indent_size:])
                continue
            if pending is not None:
                fields[pending.key] = _close(pending, parts, pending_line, report)
                pending = None
            if line.startswith(item_prefix):
                if items is None or parse_item is None:
                    raise report.fail("item_outside_section", number)
                items.append(parse_item(line, number))
                continue
            plan = None
            if fast_keys:  # default syntax: a declared key before the first '=' is a field line
                key, equals, raw = line.partition("=")
                if equals:
                    plan = field_keys.get(key)
            if plan is None:
                name = header(line)
                if name is not None:
                    if not contract.field_name(name):
                        raise report.fail("invalid_field_name", number, key=name)
                    plan = plans.get(name)
                    if plan is None:
                        raise report.fail("unknown_field", number, key=name)
                    if not plan.section:
                        raise report.fail("not_a_section", number, key=name)
                    if name in fields:
                        raise report.fail("duplicate_field", number, key=name)
                    items = fields[name] = []
                    parse_item = plan.item
                    continue
                key_value = field_line(line)
                if key_value is None:
                    raise report.fail("unrecognized_line", number)
                key, raw = key_value
                plan = plans.get(key)
                if plan is None:
                    raise report.fail("unknown_field", number, key=key)
            if plan.section:
                raise report.fail("must_be_section", number, key=key)
            if key in fields:
                raise report.fail("duplicate_field", number, key=key)
            items = parse_item = None
            if plan.multiline:
                blank = not raw.strip()
                if plan.forced and not blank:
                    raise report.fail("must_be_multiline", number, key=key)
                if blank:
                    pending, pending_line, parts = plan, number, []
                    continue
            text = raw.strip()
            quoted = False
            if text.startswith(quote):  # only a quoted value needs decoding
                inner = text[1:-1]
                if (
                    len(text) > 1
                    and text.endswith(quote)
                    and "\\" not in inner
                    and quote not in inner
                ):  # fast path: no escape, nothing to check
                    text, quoted = inner, True
                else:
                    try:
                        text, quoted = parse_value(text, quote, escapes)
                    except ValueError_ as bad:
                        raise report.fail_with(bad.code, bad.values, number) from None
            if quoted:
                if plan.must_not_quote:
                    raise report.fail("must_be_unquoted", number, key=key)
            elif plan.must_quote:
                raise report.fail("must_be_quoted", number, key=key)
            fields[key] = text
        # kept for the next lines (after a Reject the reader is not used again)
        self.lines += len(lines)
        self._items, self._parse_item = items, parse_item
        self._pending, self._pending_line, self._parts = pending, pending_line, parts
