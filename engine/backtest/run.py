"""A whole backtest: the packs loaded, the records planned into chunks, the tallies of an
executor merged in input order into a Report."""

from __future__ import annotations

import os
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from engine.backtest.executors import Executor, Task, run_inline
from engine.backtest.judge import loaded_pack
from engine.backtest.records import (
    CHUNK_BYTES,
    PARQUET_CHUNK,
    BacktestError,
    Chunk,
    plan_chunks,
)
from engine.backtest.tally import Tally, empty_tally
from engine.core.errors import EngineError
from engine.core.textio import MAX_OUTPUT_BYTES
from engine.ledger.url import parse_url


@dataclass
class Report:
    """A finished backtest: the pack references and the merged tally."""

    pack: str
    baseline: str | None
    tally: Tally
    max_flips: int | None = None

    @property
    def exceeded(self) -> bool:
        return self.max_flips is not None and self.tally.flipped > self.max_flips

    def to_json(self) -> dict[str, Any]:
        tally = self.tally
        summary = {"pack": {"ref": self.pack, **tally.packs[0].to_json()}}
        if self.baseline is not None:
            summary["baseline"] = {"ref": self.baseline, **tally.packs[1].to_json()}
        return {
            "total": tally.records,
            "invalid": tally.invalid,
            "invalid_examples": tally.first_invalid,
            "summary": summary,
            "flipped": tally.flipped,
            "max_flips": self.max_flips,
            "flips": dict(sorted(tally.flips.items())),
            "flips_by_block": {
                block: dict(sorted(counts.items()))
                for block, counts in sorted(tally.by_block.items())
            },
            "flips_by_failure_type": {
                kind: dict(sorted(counts.items()))
                for kind, counts in sorted(tally.by_failure_type.items())
            },
            "examples": {kind: tally.examples[kind] for kind in sorted(tally.examples)},
        }


def backtest(
    pack: str,
    records: Sequence[str],
    *,
    baseline: str | None = None,
    executor: Executor = run_inline,
    max_flips: int | None = None,
    chunk_bytes: int = CHUNK_BYTES,
    progress: Callable[[int, int], None] | None = None,
    max_line_bytes: int | None = None,
    chunk_rows: int = PARQUET_CHUNK,
    locked: bool | None = None,
    ledger: str | None = None,
    sessions: Sequence[str] = (),
) -> Report:
    """Backtest ``pack`` (against ``baseline``) on the JSONL files ``records``.

    The packs are loaded here first, so a pack that does not load is a BacktestError
    before any worker starts. ``progress`` receives the chunks done and the chunk count
    after each chunk. A record line longer than ``max_line_bytes`` (default: the largest
    of the packs' ``limits.max_output_bytes``, else 64 MiB) is an invalid record, not read.
    With ``locked`` (default: when CI=true) a git pack the packs extend needs a rules.lock
    entry. ``sessions`` are sessions named in the ledger at URL ``ledger`` whose kept
    outputs are records too.
    """
    # Workers get absolute paths (a cluster's workers run in folders of their own); the
    # report shows the paths as given. A name that is no path stays a builtin pack's name.
    refs = tuple(
        os.path.abspath(ref) if os.path.exists(ref) else ref
        for ref in ((pack,) if baseline is None else (pack, baseline))
    )
    try:
        limits = [loaded_pack(ref, locked).model.limits.max_output_bytes for ref in refs]
    except EngineError as exc:
        raise BacktestError(str(exc)) from None
    cap = max_line_bytes or max(limit or MAX_OUTPUT_BYTES for limit in limits)
    chunks = plan_chunks(records, chunk_bytes, chunk_rows, ledger=ledger, sessions=sessions)
    tasks = [Task(refs, _absolute(chunk), cap) for chunk in chunks]
    total = empty_tally(len(refs))
    offset = 0
    for done, (chunk, tally) in enumerate(zip(chunks, executor(tasks), strict=True), start=1):
        if chunk.first:
            offset = 0
        total.merge(tally, chunk.path, offset)
        offset += tally.lines
        if progress is not None:
            progress(done, len(tasks))
    return Report(pack, baseline, total, max_flips)


def _absolute(chunk: Chunk) -> Chunk:
    """``chunk`` with absolute paths: its file's, or its SQLite ledger's (a session name in
    a ledger stays as it is)."""
    if chunk.ledger is None:
        return replace(chunk, path=os.path.abspath(chunk.path))
    url = parse_url(chunk.ledger)
    if url.path is None:  # a server
        return chunk
    return replace(chunk, ledger=str(url.path.resolve()))
