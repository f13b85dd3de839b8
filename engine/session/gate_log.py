"""Recording quality gate results: the pack's failure log (JSON lines under the session
folder) and the session's ledger.

Each line is written with one ``os.write`` on a descriptor opened with ``O_APPEND``, so
lines of concurrent writers never interleave and none is lost.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from engine.core.errors import EngineError
from engine.ledger.gates import GateRecord
from engine.ledger.store import Place, SessionLedger, locate
from engine.pack.compiled import Pack
from engine.policy.gates.runtime import GateOutcome
from engine.session.items import sha256


def append_json_line(path: Path, record: Mapping[str, Any]) -> None:
    """Append ``record`` as one JSON line to ``path`` (created with its folders)."""
    line = (json.dumps(record, ensure_ascii=False) + "\n").encode("utf-8")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd = os.open(path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    except OSError as exc:
        raise EngineError(f"{path}: cannot open the gate log: {exc.strerror or exc}") from None
    try:
        written = os.write(fd, line)
        if written != len(line):  # pragma: no cover - regular files write whole buffers
            raise EngineError(
                f"{path}: short write to the gate log ({written} of {len(line)} bytes)"
            )
    finally:
        os.close(fd)


def gate_fields(outcome: GateOutcome) -> dict[str, Any]:
    """The gate result's fields after its name, in the order of the JSON result
    (contracts/gate-result.schema.json); the callers put the gate's name first under the key
    their document gives it."""
    result = outcome.result
    return {
        "valid": result.valid,
        "checked": list(result.checked),
        "errors": list(result.errors),
        "action": result.action,
        "retry": result.retry,
        "reprompt": outcome.reprompt,
        "artifact": outcome.artifact,
    }


def record_gate(
    pack: Pack, session: Path | Place, outcome: GateOutcome, gate_result: Mapping[str, Any]
) -> Path | None:
    """Record ``outcome`` in the session's ledger and, when it is not PROCEED, a line
    ``{timestamp, gate_result, reprompt_generated}`` of its gate failure log (the ledger's
    ``failed_gates``); a session with a folder whose pack names a log also appends the line
    to that file. Returns the log file written, if any."""
    place = session if isinstance(session, Place) else locate(session)
    result = outcome.result
    line = {
        "timestamp": outcome.timestamp,
        "gate_result": dict(gate_result),
        "reprompt_generated": outcome.reprompt is not None,
    }
    with SessionLedger(place) as ledger:
        ledger.record_gate(
            GateRecord(
                outcome.timestamp,
                pack.name,
                vars(result),
                None if outcome.reprompt is None else sha256(outcome.reprompt),
                outcome.artifact,
            ),
            None if result.action == "PROCEED" else line,
        )
    log: str = pack.model.gates.log
    if result.action == "PROCEED" or not log or place.folder is None:
        return None
    path = place.folder / log
    append_json_line(path, line)
    return path
