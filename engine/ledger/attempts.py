"""The attempts of items: recording an evaluated output with its decision, and an item's
history.

Attempt numbers are allocated atomically: the transaction that inserts an attempt first
takes the next number from the item's row of ``item_counters`` (``INSERT ... ON CONFLICT
DO UPDATE ... RETURNING``; on PostgreSQL in the same statement as the insert). The row
stays locked until the transaction ends (on SQLite the whole ledger is, from
``BEGIN IMMEDIATE``), so writers on any number of machines recording the same item get
distinct, consecutive numbers 1..k, and a transaction that fails gives its number back.

An item's attempts come in runs: a final decision (PROCEED or an after-failure action)
ends the item's run (``end_run``, in the transaction that records it), and the item's next
attempt starts the next run at number 1, unless the caller continues the ended run
(``next_attempt(..., continuing=True)``). The counter's row holds the run, its last number
and whether it ended, so the numbering stays atomic across writers.
"""

from __future__ import annotations

import json
import uuid
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, fields
from typing import Any

from engine.core import clock
from engine.ledger.connection import Ledger, Tx


@dataclass(frozen=True)
class Attempt:
    """What is recorded of one evaluated output and its decision, besides its session,
    block, item and number (the columns of ``attempts``)."""

    pack: str
    status: str
    action: str
    reason: str
    rule: str
    final: bool
    output_sha256: str
    output_chars: int
    round: int | None = None
    failure_type: str | None = None
    error: str | None = None
    nonce: str | None = None
    model: str | None = None
    validation: str | None = None
    data_summary: str | None = None
    pack_version: str | None = None
    revision: str | None = None  # the pack's revision: a hash of its files and its bases
    stderr: str | None = None  # the tail of the model command's stderr (bounded, scrubbed)
    streamed_chars: int | None = None  # a streamed output: the characters read
    stream_cut: int | None = None  # 1: the stream was closed early (at a definite failure)
    kind: str | None = None  # why the prompt was sent: first, repair, retry, transport_retry
    tokens_in: int | None = None
    tokens_out: int | None = None
    tokens_estimated: bool | None = None  # the tokens were counted from characters
    cost: float | None = None  # at the pack's price of the model; None without one
    tokens_not_generated: int | None = None  # a stream closed early: what it did not produce
    not_generated_estimated: bool | None = None  # that count is an estimate


@dataclass(frozen=True)
class KeptOutput:
    """An attempt's output kept for replay (``--keep-outputs``) with its vars and context."""

    text: str
    vars: Mapping[str, str]
    context: Mapping[str, Any]


@dataclass(frozen=True)
class ItemAttempt:
    """An attempt to record: the item it is an attempt of (its session, block and name),
    its row, what its evaluation warned about and its kept output."""

    session: str
    block: str
    item: str
    attempt: Attempt
    warnings: Sequence[str] = ()
    kept: KeptOutput | None = None


def now() -> str:
    """ISO 8601 UTC with seconds (``SOURCE_DATE_EPOCH`` fixes it: engine.core.clock)."""
    return clock.iso(clock.now())


_UPSERT = (
    "INSERT INTO item_counters (session, block, item, last, run, ended)"
    " VALUES (?, ?, ?, 1, 1, 0) ON CONFLICT (session, block, item) DO UPDATE SET "
)
# SET reads the row as it was: an ended run gives way to the next one, numbered from 1
_NEXT = _UPSERT + (
    "last = CASE WHEN item_counters.ended = 0 THEN item_counters.last + 1 ELSE 1 END,"
    " run = item_counters.run + item_counters.ended, ended = 0"
)
_CONTINUE = _UPSERT + "last = item_counters.last + 1, ended = 0"


def next_attempt(
    tx: Tx, session: str, block: str, item: str, *, continuing: bool = False
) -> tuple[int, int]:
    """The item's run and next attempt number in it, taken inside ``tx`` (the item stays
    locked until ``tx`` ends): the next run at 1 when the last one ended, unless
    ``continuing``."""
    sql = _CONTINUE if continuing else _NEXT
    row = tx.one(sql + " RETURNING run, last", (session, block, item))
    assert row is not None
    return int(row[0]), int(row[1])


def end_run(tx: Tx, session: str, block: str, item: str) -> None:
    """End the item's current run (its attempt just recorded had a final decision)."""
    tx.execute(
        "UPDATE item_counters SET ended = 1 WHERE session = ? AND block = ? AND item = ?",
        (session, block, item),
    )


def give_back(tx: Tx, session: str, block: str, item: str) -> None:
    """Give back the number the item's attempt just took (inside ``tx``): a transport
    retry resends the same prompt, and the try after it is the same attempt again."""
    tx.execute(
        "UPDATE item_counters SET last = last - 1 WHERE session = ? AND block = ? AND item = ?",
        (session, block, item),
    )


def _values(record: ItemAttempt, token: str | None) -> dict[str, Any]:
    attempt = record.attempt
    values: dict[str, Any] = {
        "session": record.session,
        "block": record.block,
        "item": record.item,
        "ts": now(),
        "token": token,
        **{name: getattr(attempt, name) for name in _FIELDS},  # asdict deep-copies: slow
    }
    values["final"] = int(attempt.final)
    for flag in ("tokens_estimated", "not_generated_estimated"):
        if getattr(attempt, flag) is not None:
            values[flag] = int(getattr(attempt, flag))
    return values


_FIELDS = tuple(f.name for f in fields(Attempt))
_INTEGERS = frozenset(
    f.name for f in fields(Attempt) if str(f.type).startswith(("int", "bool"))
)  # columns of INTEGER type (the annotations are strings: ``from __future__``)
_FLOATS = frozenset(f.name for f in fields(Attempt) if str(f.type).startswith("float"))


_SQL_TYPES = {
    **{name: "bigint" for name in _INTEGERS},
    **{name: "double precision" for name in _FLOATS},
}


def _record_in_one_statement(tx: Tx, record: ItemAttempt, token: str) -> int:
    """Number and insert the attempt in one PostgreSQL statement (run as a transaction of
    its own: the item's row is locked only while the server executes and commits it, not
    across round trips to this process); its number."""
    values = _values(record, token)
    columns = ", ".join(values)
    # typed parameters in a SELECT from the counter's row: the row id is taken as the row
    # is projected, after the counter row is locked, so ids follow attempt numbers
    marks = ", ".join(f"?::{_SQL_TYPES.get(name, 'text')}" for name in values)
    row = tx.one(
        f"WITH n AS ({_NEXT} RETURNING run, last) INSERT INTO attempts ({columns}, run,"
        f" attempt) SELECT {marks}, n.run, n.last FROM n RETURNING attempt",
        (record.session, record.block, record.item, *values.values()),
    )
    assert row is not None
    return int(row[0])


def insert_attempt(
    tx: Tx, record: ItemAttempt, number: int, token: str | None = None, run: int = 1
) -> int:
    """Insert ``record`` as attempt ``number`` of run ``run`` of its item inside ``tx``;
    its row id."""
    values = {**_values(record, token), "run": run, "attempt": number}
    columns = ", ".join(values)
    marks = ", ".join("?" for _ in values)
    row = tx.one(
        f"INSERT INTO attempts ({columns}) VALUES ({marks}) RETURNING id", list(values.values())
    )
    assert row is not None
    attempt_id = int(row[0])
    for message in record.warnings:
        tx.execute(
            "INSERT INTO warnings (attempt_id, ts, message) VALUES (?, ?, ?)",
            (attempt_id, values["ts"], message),
        )
    if (kept := record.kept) is not None:
        tx.execute(
            "INSERT INTO kept_outputs (attempt_id, vars, context, output) VALUES (?, ?, ?, ?)",
            (
                attempt_id,
                json.dumps(dict(kept.vars), ensure_ascii=False),
                json.dumps(dict(kept.context), ensure_ascii=False, default=str),
                zlib.compress(kept.text.encode("utf-8", errors="surrogatepass")),
            ),
        )
    return attempt_id


def id_by_token(tx: Tx, token: str) -> int | None:
    """The row id of the attempt recorded with write token ``token``, or None (a retried
    transaction looks for what its first run may have committed)."""
    row = tx.one("SELECT id FROM attempts WHERE token = ?", (token,))
    return None if row is None else int(row[0])


class Attempts:
    """The attempts repository of a ledger."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def record_attempt(self, record: ItemAttempt) -> int:
        """Record ``record`` as its item's next attempt, with its warnings and kept
        output, in one transaction; its attempt number in its run (a final attempt ends
        the run). A write retried after a lost connection is recorded once (a token marks
        it)."""
        token = uuid.uuid4().hex
        single = (
            self.ledger.dialect == "postgresql"
            and not record.warnings
            and record.kept is None
            and not record.attempt.final
        )

        def work(tx: Tx) -> int:
            if tx.retry:  # the first run may have committed before its connection broke
                done = tx.one("SELECT attempt FROM attempts WHERE token = ?", (token,))
                if done is not None:
                    return int(done[0])
            elif single:
                return _record_in_one_statement(tx, record, token)
            run, number = next_attempt(tx, record.session, record.block, record.item)
            insert_attempt(tx, record, number, token, run)
            if record.attempt.final:
                end_run(tx, record.session, record.block, record.item)
            return number

        return self.ledger.write(work, single=single)

    def history(self, session: str, block: str, item: str) -> list[dict[str, Any]]:
        """The item's attempts, oldest first, each with its warnings' messages."""

        def work(tx: Tx) -> list[dict[str, Any]]:
            rows = tx.all(
                "SELECT * FROM attempts WHERE session = ? AND block = ? AND item = ? ORDER BY id",
                (session, block, item),
            )
            names = tx.columns()
            found = tx.all(
                "SELECT w.attempt_id, w.message FROM warnings w JOIN attempts a"
                " ON a.id = w.attempt_id WHERE a.session = ? AND a.block = ? AND a.item = ?"
                " ORDER BY w.id",
                (session, block, item),
            )
            messages: dict[int, list[str]] = {}
            for attempt_id, message in found:
                messages.setdefault(int(attempt_id), []).append(str(message))
            records = []
            for row in rows:
                record = dict(zip(names, row, strict=True))
                record["final"] = bool(record["final"])
                for flag in ("example_truncated", "tokens_estimated", "not_generated_estimated"):
                    if record.get(flag) is not None:
                        record[flag] = bool(record[flag])
                record.pop("token", None)
                record["warnings"] = messages.get(int(record["id"]), [])
                records.append(record)
            return records

        return self.ledger.read(work)

    def numbers(self, session: str) -> dict[tuple[str, str], list[int]]:
        """Every item's attempt numbers in the order they were recorded, by (block, item)."""
        rows = self.ledger.read(
            lambda tx: tx.all(
                "SELECT block, item, attempt FROM attempts WHERE session = ? ORDER BY id",
                (session,),
            )
        )
        out: dict[tuple[str, str], list[int]] = {}
        for block, item, number in rows:
            out.setdefault((str(block), str(item)), []).append(int(number))
        return out


# ------------------------------------------------------------------------- reading items


def item_history(tx: Tx, session: str, block: str, item: str) -> list[dict[str, Any]]:
    """The item's attempts, oldest first, as stored (inside ``tx``)."""
    return tx.dicts(
        "SELECT * FROM attempts WHERE session = ? AND block = ? AND item = ? ORDER BY id",
        (session, block, item),
    )


def latest(
    tx: Tx, session: str, block: str, round_number: int | None = None
) -> dict[str, Any] | None:
    """The latest attempt of ``block`` (in round ``round_number`` when given), or None."""
    sql = "SELECT * FROM attempts WHERE session = ? AND block = ?"
    params: list[Any] = [session, block]
    if round_number is not None:
        sql += " AND round = ?"
        params.append(round_number)
    return tx.first(sql + " ORDER BY id DESC LIMIT 1", params)


def latest_pack(tx: Tx, session: str, block: str) -> str | None:
    """The pack recorded with the latest attempt of ``block``, or None (no attempt)."""
    row = tx.one(
        "SELECT pack FROM attempts WHERE session = ? AND block = ? ORDER BY id DESC LIMIT 1",
        (session, block),
    )
    return None if row is None else str(row[0])


BATCH = 1000


def batch(
    tx: Tx, session: str, after: int, warnings: bool, size: int = BATCH
) -> tuple[list[str], list[tuple[Any, ...]], list[tuple[Any, ...]]]:
    """Up to ``size`` attempts of the session with ids above ``after``, oldest first: (the
    column names, the rows, and with ``warnings`` the (attempt_id, message, id) of their
    warnings in attempt order)."""
    rows = tx.all(
        "SELECT * FROM attempts WHERE session = ? AND id > ? ORDER BY id LIMIT ?",
        (session, after, size),
    )
    names = tx.columns()
    found: list[tuple[Any, ...]] = []
    if warnings and rows:
        last = rows[-1][names.index("id")]
        found = tx.all(
            "SELECT w.attempt_id, w.message, w.id FROM warnings w JOIN attempts a"
            " ON a.id = w.attempt_id WHERE a.session = ? AND w.attempt_id > ?"
            " AND w.attempt_id <= ? ORDER BY w.attempt_id, w.id",
            (session, after, last),
        )
    return names, rows, found
