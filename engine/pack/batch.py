"""Parsing many records in one process: JSON Lines in, JSON Lines out, order kept.

Each input line is ``{"id", "block", "nonce", "vars", "text"}`` (``text_base64`` may carry
raw bytes instead of ``text``). A malformed line becomes that record's error; the run goes on.
"""

from __future__ import annotations

import base64
import binascii
from collections.abc import Iterator, Mapping
from typing import Any, BinaryIO

from engine.core.errors import EngineError
from engine.core.numbers import strict_loads
from engine.core.textio import holds_lone_surrogate
from engine.pack.parsing import Parsing


def _record_error(record_id: Any, message: str) -> dict[str, Any]:
    return {
        "id": record_id,
        "ok": False,
        "data": None,
        "error": message,
        "failure_type": "INVALID_RECORD",
        "warnings": [],
    }


def text_of_record(record: Mapping[str, Any]) -> str | bytes:
    if "text_base64" in record:
        encoded = record["text_base64"]
        if not isinstance(encoded, str):
            raise ValueError("'text_base64' must be a string")
        return base64.b64decode(encoded, validate=True)
    text = record.get("text", "")
    if not isinstance(text, str):
        raise ValueError("'text' must be a string")
    return text


def record_inputs(
    record: Mapping[str, Any],
    default_block: str | None = None,
    default_nonce: str | None = None,
    block_hint: str = "",
) -> tuple[str, str | None, dict[str, str]]:
    """The block, nonce and vars of a record (the defaults for keys it leaves out),
    checked: ValueError naming the key that is wrong (``block_hint`` follows the message of
    a missing block)."""
    block = record.get("block", default_block)
    nonce = record.get("nonce", default_nonce)
    variables = record.get("vars", {})
    if variables is None:  # JSON null: no vars, as when the key is left out
        variables = {}
    if not isinstance(block, str):
        raise ValueError("'block' is missing" + block_hint)
    if nonce is not None and not isinstance(nonce, str):
        raise ValueError("'nonce' must be a string")
    if not isinstance(variables, dict):
        raise ValueError("'vars' must be an object of strings")
    for key, value in variables.items():  # a loop: all() of a generator costs more here
        if not (isinstance(key, str) and isinstance(value, str)):
            raise ValueError("'vars' must be an object of strings")
    return block, nonce, variables


def _not_text(record: Mapping[str, Any]) -> str | None:
    """The first of a record's id, block, nonce and vars holding a lone surrogate, which no
    output can print (its text is cleaned as every output is: U+FFFD)."""
    for key in ("id", "block", "nonce"):
        if isinstance(record.get(key), str) and holds_lone_surrogate(record[key]):
            return key
    variables = record.get("vars")
    if isinstance(variables, dict):
        for pair in variables.items():
            if any(isinstance(part, str) and holds_lone_surrogate(part) for part in pair):
                return "vars"
    return None


def parse_record(
    pack: Parsing,
    line: bytes | str,
    number: int,
    default_block: str | None,
    default_nonce: str | None,
) -> dict[str, Any]:
    raw = line.decode("utf-8", errors="replace") if isinstance(line, bytes) else line
    try:
        record = strict_loads(raw)
    except ValueError as exc:
        return _record_error(None, f"input line {number}: not valid JSON ({exc})")
    except RecursionError:
        return _record_error(None, f"input line {number}: JSON nested too deeply")
    if not isinstance(record, dict):
        return _record_error(None, f"input line {number}: expected a JSON object")
    record_id = record.get("id")
    if ("\\ud" in raw or "\\uD" in raw) and (key := _not_text(record)):  # only an escape
        return _record_error(
            None if key == "id" else record_id,
            f"input line {number}: '{key}' holds a lone surrogate (a \\ud800-\\udfff escape "
            "alone), not text",
        )
    try:
        block, nonce, variables = record_inputs(
            record, default_block, default_nonce, " (give it in the record or with --block)"
        )
        missing = [n for n in pack.required_params(block) if n not in variables]
        if missing:
            needed = " and ".join(f'"vars": {{"{name}": ...}}' for name in missing)
            raise ValueError(f"block {block!r} needs {needed} (the caller's input)")
        text = text_of_record(record)
        result = pack.parse(block, text, nonce=nonce, vars=variables)
    except (ValueError, binascii.Error, EngineError) as exc:
        return _record_error(record_id, f"input line {number}: {exc}")
    return {
        "id": record_id,
        "ok": result.ok,
        "data": result.data,
        "error": result.error,
        "failure_type": result.failure.type if result.failure else None,
        "warnings": result.warnings,
    }


SKIP_LIMIT = 64 * 1024 * 1024
"""How far past ``max_line_bytes`` a long line is skipped looking for its end (at least
as far as the line limit itself): past that the input is read no further."""


def capped_lines(stream: BinaryIO, max_line_bytes: int) -> Iterator[bytes | None]:
    """The lines of ``stream``, each read up to ``max_line_bytes``: a longer line is skipped
    to its end without being kept and given as None. A line whose end does not come within
    ``max(max_line_bytes, SKIP_LIMIT)`` more bytes (``/dev/zero``) ends the input there."""
    skip_limit = max(max_line_bytes, SKIP_LIMIT)
    while True:
        line = stream.readline(max_line_bytes + 1)
        if not line:
            return
        if len(line) <= max_line_bytes or line.endswith(b"\n"):
            yield line
            continue
        skipped = 0
        while line and not line.endswith(b"\n"):  # the rest of the long line
            if skipped > skip_limit:
                yield None
                return
            line = stream.readline(1024 * 1024)
            skipped += len(line)
        yield None


def parse_jsonl(
    pack: Parsing,
    lines: BinaryIO,
    default_block: str | None = None,
    default_nonce: str | None = None,
    max_line_bytes: int = 64 * 1024 * 1024,
) -> Iterator[dict[str, Any]]:
    """One result per non-blank input line, in input order; a line over ``max_line_bytes``
    is that record's error."""
    for number, line in enumerate(capped_lines(lines, max_line_bytes), start=1):
        if line is None:
            yield _record_error(
                None, f"input line {number}: longer than {max_line_bytes} bytes; not read"
            )
        elif line.strip():
            yield parse_record(pack, line, number, default_block, default_nonce)
