"""Quality gates: one row per run of a gate, and the gate failure log (one row per failed
evaluation: ``{timestamp, gate_result, reprompt_generated}``)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.ledger.connection import Tx


@dataclass(frozen=True)
class GateRecord:
    """One run of a quality gate, as stored."""

    ts: str
    pack: str
    gate: str
    retry: int
    valid: bool
    action: str
    reason: str
    checked: Sequence[str]
    errors: Sequence[str]
    reprompt_sha256: str | None = None
    artifact: Mapping[str, Any] | None = None


def insert(tx: Tx, session: str, record: GateRecord) -> int:
    """Record one gate result; its id."""
    values = dict(record.__dict__)
    values["valid"] = int(record.valid)
    values["checked"] = json.dumps(list(record.checked), ensure_ascii=False)
    values["errors"] = json.dumps(list(record.errors), ensure_ascii=False)
    values["artifact"] = (
        None if record.artifact is None else json.dumps(record.artifact, ensure_ascii=False)
    )
    values["session"] = session
    columns = ", ".join(values)
    marks = ", ".join("?" for _ in values)
    row = tx.one(
        f"INSERT INTO gate_results ({columns}) VALUES ({marks}) RETURNING id",
        list(values.values()),
    )
    assert row is not None
    return int(row[0])


def results(tx: Tx, session: str) -> list[dict[str, Any]]:
    """Every recorded gate result, oldest first (JSON columns as stored: text)."""
    rows = tx.dicts("SELECT * FROM gate_results WHERE session = ? ORDER BY id", (session,))
    for row in rows:
        row.pop("session", None)
    return rows


def insert_failure(
    tx: Tx, session: str, ts: str, gate: str, gate_result: Mapping[str, Any], reprompt: bool
) -> None:
    """Add a line to the gate failure log."""
    tx.execute(
        "INSERT INTO failed_gates (session, ts, gate, gate_result, reprompt_generated)"
        " VALUES (?, ?, ?, ?, ?)",
        (session, ts, gate, json.dumps(dict(gate_result), ensure_ascii=False), int(reprompt)),
    )


def failures(tx: Tx, session: str) -> list[tuple[int, str, str, bool]]:
    """The gate failure log: (id, timestamp, gate_result as JSON text, reprompt_generated)."""
    rows = tx.all(
        "SELECT id, ts, gate_result, reprompt_generated FROM failed_gates WHERE session = ?"
        " ORDER BY id",
        (session,),
    )
    return [(int(r[0]), str(r[1]), str(r[2]), bool(r[3])) for r in rows]
