"""Shadow evaluations: each output a live pack decided, with what a candidate pack would
have decided (`rules serve --shadow NAME=CANDIDATE`). One row per output; a summary reads
them back a page at a time, so it holds few rows in memory whatever the ledger holds."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.ledger.attempts import now
from engine.ledger.connection import Ledger, Tx

PAGE_ROWS = 5000
"""Rows a reader fetches per transaction."""

SHADOW_FOLDER = "_shadow"
"""The default shadow ledger's folder under a server's --sessions-dir (no session name
starts with an underscore)."""


def default_location(sessions_dir: str | Path) -> Path:
    """Where a server records shadow evaluations without --shadow-ledger."""
    return Path(sessions_dir) / SHADOW_FOLDER / "ledger.db"


@dataclass(frozen=True)
class Side:
    """One pack's outcome on an output: verdict status, failure type, action, whether the
    action asks for another attempt, and the verdict's error."""

    status: str
    failure_type: str | None
    action: str
    further: bool
    error: str | None = None


@dataclass(frozen=True)
class ShadowEvaluation:
    """One output under the live pack and under its candidate (``candidate_side`` None:
    the candidate could not evaluate it; ``candidate_error`` then says why; one column
    holds it or the candidate's verdict error)."""

    pack: str
    revision: str
    candidate: str
    candidate_revision: str
    block: str
    live: Side
    candidate_side: Side | None
    candidate_error: str | None = None
    flipped: bool = False
    excerpt: str | None = None
    """The output's beginning, kept for a flip's example only."""
    session: str = ""
    id: int | None = None
    """The row id (set when read back)."""


_COLUMNS = (
    "session",
    "ts",
    "pack",
    "revision",
    "candidate",
    "candidate_revision",
    "block",
    "live_status",
    "live_failure_type",
    "live_action",
    "live_further",
    "live_error",
    "candidate_status",
    "candidate_failure_type",
    "candidate_action",
    "candidate_further",
    "candidate_error",
    "flipped",
    "excerpt",
)


def _values(row: ShadowEvaluation, ts: str) -> tuple[Any, ...]:
    live = row.live
    other = row.candidate_side
    candidate: tuple[Any, ...] = (None, None, None, None, row.candidate_error)
    if other is not None:
        candidate = (other.status, other.failure_type, other.action, int(other.further))
        candidate += (other.error,)
    return (
        row.session,
        ts,
        row.pack,
        row.revision,
        row.candidate,
        row.candidate_revision,
        row.block,
        live.status,
        live.failure_type,
        live.action,
        int(live.further),
        live.error,
        *candidate,
        int(row.flipped),
        row.excerpt,
    )


def _row(values: Sequence[Any]) -> ShadowEvaluation:
    (row_id, session, _ts, pack, revision, candidate, candidate_revision, block) = values[:8]
    live = Side(values[8], values[9], values[10], bool(values[11]), values[12])
    other = None
    if values[13] is not None:
        other = Side(values[13], values[14], values[15], bool(values[16]), values[17])
    return ShadowEvaluation(
        pack=pack,
        revision=revision,
        candidate=candidate,
        candidate_revision=candidate_revision,
        block=block,
        live=live,
        candidate_side=other,
        candidate_error=values[17] if other is None else None,
        flipped=bool(values[18]),
        excerpt=values[19],
        session=session,
        id=int(row_id),
    )


class ShadowLog:
    """The shadow evaluations repository of a ledger."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def record(self, rows: Sequence[ShadowEvaluation]) -> None:
        """Record ``rows`` in one transaction."""
        if not rows:
            return
        ts = now()
        sql = (
            f"INSERT INTO shadow_evaluations ({', '.join(_COLUMNS)})"
            f" VALUES ({', '.join('?' for _ in _COLUMNS)})"
        )

        def work(tx: Tx) -> None:
            for row in rows:
                tx.execute(sql, _values(row, ts))

        self.ledger.write(work)

    def pairs(self) -> list[tuple[str, str]]:
        """Every (pack, candidate) pair with shadow evaluations, sorted."""
        rows = self.ledger.read(
            lambda tx: tx.all(
                "SELECT DISTINCT pack, candidate FROM shadow_evaluations ORDER BY pack, candidate"
            )
        )
        return [(str(pack), str(candidate)) for pack, candidate in rows]

    def revisions(self, pack: str, candidate: str) -> dict[str, list[str]]:
        """The revisions of the pack and of the candidate the pair's rows were made at."""

        def work(tx: Tx) -> dict[str, list[str]]:
            where = " FROM shadow_evaluations WHERE pack = ? AND candidate = ? ORDER BY 1"
            live = tx.all("SELECT DISTINCT revision" + where, (pack, candidate))
            other = tx.all("SELECT DISTINCT candidate_revision" + where, (pack, candidate))
            return {"pack": [str(r[0]) for r in live], "candidate": [str(r[0]) for r in other]}

        return self.ledger.read(work)

    def evaluations(self, pack: str, candidate: str) -> Iterator[ShadowEvaluation]:
        """The pair's rows, oldest first, read ``PAGE_ROWS`` at a time."""
        sql = (
            f"SELECT id, {', '.join(_COLUMNS)} FROM shadow_evaluations"
            " WHERE pack = ? AND candidate = ? AND id > ? ORDER BY id LIMIT ?"
        )
        after = 0
        while True:

            def page_after(tx: Tx, after: int = after) -> list[tuple[Any, ...]]:
                return tx.all(sql, (pack, candidate, after, PAGE_ROWS))

            page = self.ledger.read(page_after)
            for values in page:
                yield _row(values)
            if len(page) < PAGE_ROWS:
                return
            after = int(page[-1][0])
