"""The review queue: final decisions a person resolves (``engine.session.review``).

A review is ``open``, ``claimed`` (by one person until a time) or ``resolved`` (approved,
edited, rejected, or expired: the pack's fallback action taken). Every change of state is
one ``UPDATE ... WHERE <the state it changes from> RETURNING``: on PostgreSQL the row is
locked by the first writer and a second one, waiting on the lock, re-reads the row and no
longer matches; on SQLite the write transaction (``BEGIN IMMEDIATE``) holds the whole
ledger. So of two workers claiming, resolving or expiring the same review at once exactly
one changes it, and a lapsed claim (``claimed_until`` past) counts as open.

Times are ISO 8601 UTC text of one width (``2026-01-04T06:30:00Z``), compared as text.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from engine.ledger.connection import Tx

LISTED = (
    "id, session, pack, revision, block, item, run, attempt_id, action, state, created,"
    " due, fallback, on_reject, claimed_by, claimed_until, resolution, resolved_by,"
    " resolved_at, reason, final_attempt_id"
)
"""The columns of a review as lists show it (without its material and output)."""


@dataclass(frozen=True)
class Opening:
    """A review to open, in the transaction that records the decision that opens it."""

    session: str
    pack: str
    revision: str | None
    block: str
    item: str
    run: int
    attempt_id: int
    action: str
    created: str
    due: str
    fallback: str
    on_reject: str
    material: str  # JSON text: the attempts, their outputs and prompts, the inputs


def insert(tx: Tx, opening: Opening) -> int:
    """Open a review; its id."""
    row = tx.one(
        "INSERT INTO reviews (session, pack, revision, block, item, run, attempt_id, action,"
        " state, created, due, fallback, on_reject, material)"
        " VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'open', ?, ?, ?, ?, ?) RETURNING id",
        (
            opening.session,
            opening.pack,
            opening.revision,
            opening.block,
            opening.item,
            opening.run,
            opening.attempt_id,
            opening.action,
            opening.created,
            opening.due,
            opening.fallback,
            opening.on_reject,
            opening.material,
        ),
    )
    assert row is not None
    return int(row[0])


def get(tx: Tx, session: str, review: int, material: bool = False) -> dict[str, Any] | None:
    """The review ``review`` of ``session`` (with its material and output when asked)."""
    columns = LISTED + (", material, output" if material else "")
    return tx.first(
        f"SELECT {columns} FROM reviews WHERE session = ? AND id = ?", (session, review)
    )


def listing(
    tx: Tx, session: str | None, states: Sequence[str], limit: int = 500
) -> list[dict[str, Any]]:
    """The reviews in ``states`` (of ``session``, or of every session when None), oldest
    first, at most ``limit``."""
    marks = ", ".join("?" for _ in states)
    where = f"state IN ({marks})"
    params: list[Any] = list(states)
    if session is not None:
        where = "session = ? AND " + where
        params.insert(0, session)
    return tx.dicts(
        f"SELECT {LISTED} FROM reviews WHERE {where} ORDER BY created, id LIMIT ?",
        [*params, limit],
    )


def claim(tx: Tx, session: str, review: int, by: str, until: str, now: str) -> bool:
    """Claim the review for ``by`` until ``until`` when nobody holds it (or ``by`` holds it:
    the claim is renewed); whether it was claimed."""
    row = tx.one(
        "UPDATE reviews SET state = 'claimed', claimed_by = ?, claimed_until = ?"
        " WHERE session = ? AND id = ? AND (state = 'open' OR (state = 'claimed' AND"
        " (claimed_by = ? OR claimed_until < ?))) RETURNING id",
        (by, until, session, review, by, now),
    )
    return row is not None


def release(tx: Tx, session: str, review: int, by: str) -> bool:
    """Give the claim of ``by`` back: the review is open again; whether it was held."""
    row = tx.one(
        "UPDATE reviews SET state = 'open', claimed_by = NULL, claimed_until = NULL"
        " WHERE session = ? AND id = ? AND state = 'claimed' AND claimed_by = ? RETURNING id",
        (session, review, by),
    )
    return row is not None


def resolve(
    tx: Tx,
    session: str,
    review: int,
    *,
    by: str,
    now: str,
    resolution: str,
    reason: str | None,
    output: bytes | None,
) -> bool:
    """Resolve the review unless it is resolved or another person's claim holds it;
    whether it was resolved."""
    row = tx.one(
        "UPDATE reviews SET state = 'resolved', resolution = ?, resolved_by = ?,"
        " resolved_at = ?, reason = ?, output = ?"
        " WHERE session = ? AND id = ? AND due > ? AND (state = 'open' OR (state = 'claimed'"
        " AND (claimed_by = ? OR claimed_until < ?))) RETURNING id",
        (resolution, by, now, reason, output, session, review, now, by, now),
    )
    return row is not None


def expire_due(tx: Tx, now: str, session: str | None = None) -> list[dict[str, Any]]:
    """Resolve every review past its due time as ``expired`` (of ``session``, or of every
    session when None); those this transaction expired (another one's are not)."""
    where = "state IN ('open', 'claimed') AND due <= ?"
    params: list[Any] = [now]
    if session is not None:
        where += " AND session = ?"
        params.append(session)
    return tx.dicts(
        "UPDATE reviews SET state = 'resolved', resolution = 'expired', resolved_by = NULL,"
        f" resolved_at = ? WHERE {where} RETURNING id, session, block, item, run, fallback,"
        " due",
        [now, *params],
    )


def set_final(tx: Tx, review: int, attempt_id: int) -> None:
    """Link the review to the attempt row that recorded the item's final decision."""
    tx.execute("UPDATE reviews SET final_attempt_id = ? WHERE id = ?", (attempt_id, review))


def reviewed_outputs(tx: Tx, session: str, block: str, limit: int = 20) -> list[dict[str, Any]]:
    """The outputs people wrote for ``block`` in ``session`` (edited reviews), newest first."""
    return tx.dicts(
        "SELECT id, item, resolved_by, resolved_at, output FROM reviews WHERE session = ?"
        " AND block = ? AND resolution = 'edited' AND output IS NOT NULL"
        " ORDER BY resolved_at DESC, id DESC LIMIT ?",
        (session, block, limit),
    )


def for_item(tx: Tx, session: str, block: str, item: str) -> list[dict[str, Any]]:
    """The item's reviews, oldest first."""
    return tx.dicts(
        f"SELECT {LISTED} FROM reviews WHERE session = ? AND block = ? AND item = ? ORDER BY id",
        (session, block, item),
    )


def figures_rows(tx: Tx, session: str | None = None) -> list[dict[str, Any]]:
    """What the queue's figures are computed from: each review's pack, block, state,
    resolution and times (of ``session``, or of every session when None)."""
    sql = "SELECT pack, block, state, resolution, created, resolved_at, claimed_until FROM reviews"
    if session is None:
        return tx.dicts(sql + " ORDER BY id")
    return tx.dicts(sql + " WHERE session = ? ORDER BY id", (session,))


def round_of(tx: Tx, attempt_id: int) -> int | None:
    """The round recorded with an attempt (the one that opened a review), or None."""
    row = tx.one("SELECT round FROM attempts WHERE id = ?", (attempt_id,))
    return None if row is None or row[0] is None else int(row[0])
