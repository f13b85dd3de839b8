"""The records of a backtest, cut into chunks and read a chunk at a time.

The records are the ``--jsonl`` records of engine.pack.batch (``id``, ``block``, ``nonce``,
``vars``, ``text`` or ``text_base64``) with three optional keys: ``context`` (an object),
``attempt`` (the attempt number the output was, default 1) and ``previous_errors`` (the
item's earlier errors, oldest first). They come from JSONL files (chunks: byte ranges cut
at line starts), Parquet files (row ranges), session folders that kept outputs (ranges of
attempt ids) or sessions in a ledger given by URL (likewise); every source gives a chunk's
records as JSON lines.
"""

from __future__ import annotations

import contextlib
import importlib
import json
import os
import stat
from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

from engine.core.errors import EngineError
from engine.core.numbers import strict_loads
from engine.core.textio import MAX_OUTPUT_BYTES
from engine.ledger.store import locate
from engine.pack.batch import record_inputs, text_of_record
from engine.session.export import export_records, kept_id_range

CHUNK_BYTES = 1 << 20

SESSION_CHUNK = 20_000

PARQUET_CHUNK = 4096
"""Rows of a Parquet file per chunk, at least; a row group (one may hold the whole file)
is cut into PARQUET_SPLITS chunks at most, as each decodes its group from the start."""

PARQUET_SPLITS = 16

PARQUET_BATCH = 1024
"""Rows a Parquet chunk makes Python objects of at a time."""


class BacktestError(EngineError):
    """A backtest cannot run: a pack does not load, an input cannot be read."""


@dataclass(frozen=True)
class Chunk:
    """Lines starting in ``[start, end)`` of the JSONL file ``path``; for a session folder
    the kept attempts with ids in ``(start, end]``; for a Parquet file the rows
    ``[start, end)``. ``index`` orders chunks."""

    index: int
    path: str
    start: int
    end: int
    source: str = "jsonl"
    """jsonl, session or parquet"""
    first: bool = True
    """The first chunk of its input (line numbers start again)."""
    ledger: str | None = None
    """A session in a ledger: the ledger's URL (``path`` is then the session's name)."""


class InvalidRecord(ValueError):
    """A line that is not a record (reported, counted, skipped)."""


def read_record(line: bytes) -> tuple[dict[str, Any], str | bytes]:
    """A record of a JSONL line, its keys checked, and its text; InvalidRecord otherwise."""
    try:
        record = strict_loads(line)
    except (ValueError, RecursionError) as exc:
        raise InvalidRecord(f"not valid JSON ({exc})") from None
    if not isinstance(record, dict):
        raise InvalidRecord("expected a JSON object")
    try:
        record_inputs(record)  # block, nonce and vars: checked as rules parse --jsonl does
    except ValueError as exc:
        raise InvalidRecord(str(exc)) from None
    context = record.get("context") or {}
    if not isinstance(context, dict):
        raise InvalidRecord("'context' must be an object")
    attempt = record.get("attempt", 1)
    if not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 1:
        raise InvalidRecord("'attempt' must be a whole number from 1")
    previous = record.get("previous_errors") or []
    if not isinstance(previous, list) or not all(isinstance(e, str) for e in previous):
        raise InvalidRecord("'previous_errors' must be a list of strings")
    try:
        return record, text_of_record(record)
    except ValueError as exc:
        raise InvalidRecord(str(exc)) from None


def plan_chunks(
    paths: Sequence[str],
    chunk_bytes: int = CHUNK_BYTES,
    chunk_rows: int = PARQUET_CHUNK,
    *,
    ledger: str | None = None,
    sessions: Sequence[str] = (),
) -> list[Chunk]:
    """Cut the files into byte ranges of about ``chunk_bytes`` (session folders: into
    ranges of ``SESSION_CHUNK`` attempt ids; Parquet files: of ``chunk_rows`` rows); then
    the ``sessions`` named in the ledger at URL ``ledger`` into ranges of attempt ids."""
    chunks: list[Chunk] = []
    for name in sessions:
        if ledger is None:
            raise BacktestError(f"session {name!r}: a session by name needs --ledger URL")
        chunks += _session_chunks(name, len(chunks), ledger)
    for path in paths:
        if os.path.isdir(path):
            chunks += _session_chunks(path, len(chunks))
            continue
        if path.endswith(".parquet"):
            chunks += _parquet_chunks(path, len(chunks), chunk_rows)
            continue
        try:
            status = os.stat(path)
        except OSError as exc:
            raise BacktestError(f"{path}: cannot read ({exc.strerror or exc})") from None
        if not stat.S_ISREG(status.st_mode):  # a pipe, a FIFO, a device: no positions
            raise BacktestError(
                f"{path}: not a regular file (a backtest reads records in chunks by position: "
                "write them to a file first)"
            )
        size = status.st_size
        start = 0
        while True:
            end = min(size, start + chunk_bytes)
            chunks.append(Chunk(len(chunks), path, start, end, first=start == 0))
            if end >= size:
                break
            start = end
    return chunks


SKIP_BYTES = 1 << 16
"""What a chunk reads at a time of a line that began before it, to find its end."""


def read_chunk(
    chunk: Chunk, max_line_bytes: int = MAX_OUTPUT_BYTES
) -> Iterator[bytes | InvalidRecord]:
    """The lines that start in the chunk's byte range (a session's kept attempts, a
    Parquet file's rows: one JSON line each, made as they are read); an InvalidRecord for
    a line longer than ``max_line_bytes`` (not kept) or a damaged kept output. A JSONL
    chunk reads its own bytes, at most one line beyond them up to ``max_line_bytes``, and
    no more than its own size of a line that began before it."""
    encode = json.JSONEncoder(ensure_ascii=False).encode
    if chunk.source == "session":
        where = chunk.path if chunk.ledger is None else locate(chunk.path, chunk.ledger)
        for record in export_records(where, chunk.start, chunk.end, max_line_bytes):
            if "damaged" in record:
                yield InvalidRecord(record["damaged"])
            else:
                yield _capped(encode(record).encode("utf-8", "surrogatepass"), max_line_bytes)
    elif chunk.source == "parquet":
        for row in _parquet_rows(chunk):
            try:
                line = encode(_parquet_record(row)).encode("utf-8", "surrogatepass")
            except (TypeError, ValueError) as exc:  # bytes, dates, decimals; a list for vars
                yield InvalidRecord(_unjsonable(row, exc))
                continue
            yield _capped(line, max_line_bytes)
    else:
        yield from _jsonl_lines(chunk, max_line_bytes)


def _capped(line: bytes | InvalidRecord, max_line_bytes: int) -> bytes | InvalidRecord:
    if isinstance(line, bytes) and len(line) > max_line_bytes:
        return InvalidRecord(f"longer than {max_line_bytes} bytes; not read (--max-output-bytes)")
    return line


def _jsonl_lines(chunk: Chunk, max_line_bytes: int) -> list[bytes | InvalidRecord]:
    with open(chunk.path, "rb") as handle:
        if chunk.start > 0:
            # the line that began before the chunk belongs to an earlier one: skip to its
            # end, or give up at the chunk's end (no line starts in this chunk)
            handle.seek(chunk.start - 1)
            while True:
                piece = handle.readline(SKIP_BYTES)
                if not piece or piece.endswith(b"\n"):
                    break
                if handle.tell() >= chunk.end:
                    return []
        begin = handle.tell()
        if begin >= chunk.end:
            return []
        parts = handle.read(chunk.end - begin).split(b"\n")
        last = parts.pop()  # after the last newline: a line that goes on past the chunk
        if last and len(last) <= max_line_bytes:
            last += handle.readline(max_line_bytes + 1 - len(last))
            parts.append(last[:-1] if last.endswith(b"\n") else last)
        elif last:
            parts.append(last)  # too long: not read further, reported as such
    return [_capped(part, max_line_bytes) for part in parts]


def _parquet(path: str) -> Any:
    """The Parquet file at ``path`` (pyarrow, optional: Any-typed on purpose)."""
    try:
        parquet = importlib.import_module("pyarrow.parquet")
    except ImportError:
        raise BacktestError(f"{path}: Parquet input needs pyarrow (pip install pyarrow)") from None
    try:
        return parquet.ParquetFile(path)
    except (OSError, ValueError) as exc:
        raise BacktestError(f"{path}: not a readable Parquet file ({exc})") from None


def _parquet_record(row: dict[str, Any]) -> dict[str, Any]:
    """A Parquet row as a record: null columns left out, map columns (lists of key/value
    pairs) and JSON text in ``vars``/``context`` made objects."""
    record = {key: value for key, value in row.items() if value is not None}
    for key in ("vars", "context"):
        value = record.get(key)
        if isinstance(value, list):
            with contextlib.suppress(TypeError, ValueError):  # a map: key/value pairs; else
                record[key] = dict(value)  # left a list, reported as a bad record
        elif isinstance(value, str):
            with contextlib.suppress(ValueError):  # else reported as a bad record
                record[key] = json.loads(value)
    return record


def _unjsonable(row: dict[str, Any], error: Exception) -> str:
    """What is wrong with a Parquet row that is no JSON record: where the first value JSON
    cannot hold is (a binary, date, time or decimal column or field), or ``error``."""
    for key, value in row.items():
        found = _first_unjsonable(value, repr(key))
        if found is not None:
            where, kind = found
            return (
                f"column {where} holds a {kind} value; records hold strings, whole numbers "
                "and objects (vars, context)"
            )
    return f"not a record ({error})"


def _first_unjsonable(value: Any, where: str, depth: int = 0) -> tuple[str, str] | None:
    """(where, type name) of the first value under ``value`` that JSON cannot hold."""
    if value is None or isinstance(value, (str, int, float, bool)) or depth > 32:
        return None
    if isinstance(value, dict):
        items: Iterable[tuple[Any, Any]] = value.items()
    elif isinstance(value, (list, tuple)):
        items = enumerate(value)
    else:
        return where, type(value).__name__
    for inner_key, inner in items:
        found = _first_unjsonable(inner, f"{where}[{inner_key!r}]", depth + 1)
        if found is not None:
            return found
    return None


def _parquet_chunks(path: str, first_index: int, rows: int) -> list[Chunk]:
    metadata = _parquet(path).metadata
    ranges: list[tuple[int, int]] = []
    offset = 0
    for group in range(metadata.num_row_groups):
        size = int(metadata.row_group(group).num_rows)
        step = max(rows, -(-size // PARQUET_SPLITS))
        end = offset + size
        ranges += [(start, min(start + step, end)) for start in range(offset, end, step)]
        offset = end
    return [
        Chunk(first_index + n, path, start, end, "parquet", start == 0)
        for n, (start, end) in enumerate(ranges)
    ]


def _parquet_rows(chunk: Chunk) -> Iterator[dict[str, Any]]:
    """The rows ``[start, end)`` of a Parquet file, a batch at a time (the row groups
    that hold them are decoded from their start; rows before ``start`` are not made
    Python objects)."""
    file = _parquet(chunk.path)
    groups: list[int] = []
    row = offset = 0  # row: the first row of the first group read
    for group in range(file.num_row_groups):
        size = int(file.metadata.row_group(group).num_rows)
        if offset < chunk.end and offset + size > chunk.start:
            if not groups:
                row = offset
            groups.append(group)
        offset += size
    try:
        for batch in file.iter_batches(batch_size=PARQUET_BATCH, row_groups=groups):
            begin, stop = max(chunk.start - row, 0), min(chunk.end - row, batch.num_rows)
            if begin < stop:
                yield from batch.slice(begin, stop - begin).to_pylist()
            row += batch.num_rows
            if row >= chunk.end:
                return
    except (OSError, ValueError, OverflowError) as exc:  # pyarrow's: a damaged file, a date
        # out of Python's range
        raise BacktestError(f"{chunk.path}: not a readable Parquet file ({exc})") from None


def _session_chunks(path: str, first_index: int, ledger: str | None = None) -> list[Chunk]:
    place = locate(path, ledger)
    count, first, last = kept_id_range(place)
    if count == 0:
        raise BacktestError(
            f"{place.label}: the session kept no outputs (run it with --keep-outputs, or give "
            "the pack `session: {keep_outputs: true}`)"
        )
    return [
        Chunk(
            first_index + n,
            path,
            after,
            min(after + SESSION_CHUNK, last),
            source="session",
            first=n == 0,
            ledger=ledger,
        )
        for n, after in enumerate(range(first - 1, last, SESSION_CHUNK))
    ]
