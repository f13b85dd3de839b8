"""Quality gates: one row per run of a gate, and the gate failure log (one row per failed
evaluation: ``{timestamp, gate_result, reprompt_generated}``)."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.ledger.connection import Tx

RESULT_COLUMNS = ("gate", "retry", "valid", "action", "reason", "checked", "errors")
"""The gate result's fields that ``gate_results`` stores, each in a column of its name."""


@dataclass(frozen=True)
class GateRecord:
    """One run of a quality gate, as stored: its result with what the ledger adds (when,
    which pack, a hash of the reprompt it produced, its artifact)."""

    ts: str
    pack: str
    result: Mapping[str, Any]
    """The gate result's fields by name (``vars`` of engine.policy.gates.runtime.GateResult):
    those of ``RESULT_COLUMNS`` are stored."""
    reprompt_sha256: str | None = None
    artifact: Mapping[str, Any] | None = None


def insert(tx: Tx, session: str, record: GateRecord) -> int:
    """Record one gate result; its id."""
    result = record.result
    values = {name: result[name] for name in RESULT_COLUMNS}
    values["valid"] = int(result["valid"])
    values["checked"] = json.dumps(list(result["checked"]), ensure_ascii=False)
    values["errors"] = json.dumps(list(result["errors"]), ensure_ascii=False)
    values["ts"], values["pack"] = record.ts, record.pack
    values["reprompt_sha256"] = record.reprompt_sha256
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
