"""The gate use case: a pack's quality gate run on JSON outputs, its result document (the
one `rules gate --format json` prints and POST /v1/gate answers), and with a session the
result recorded in its ledger and, on failure, in the pack's failure log (JSON lines under
the session folder).

Each line is written with one ``os.write`` on a descriptor opened with ``O_APPEND``, so
lines of concurrent writers never interleave and none is lost.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.core.errors import EngineError
from engine.ledger.gates import GateRecord
from engine.ledger.store import Place, SessionLedger, locate
from engine.pack.compiled import Pack
from engine.policy.gates.runtime import GateOutcome
from engine.session.items import sha256
from engine.session.session_ref import SessionRef

GATE_KEY = "stage"
"""The key of the gate's name in its result document: the name seed 004 gives it
(contracts/gate-result.schema.json); inside the engine the gate's name is just the gate."""


@dataclass(frozen=True)
class GateRequest:
    """A gate to run (a name of the pack's `gates.steps`) on ``outputs`` (JSON values):
    which retry this is, the context (``context``, and ``strings`` from the caller's
    KEY=VALUE pairs), a fixed clock (``now``), the errors found reading the outputs
    (``input_errors``), and the session to record the result in, if any."""

    gate: str
    outputs: Sequence[Any]
    retry: int = 0
    context: Mapping[str, Any] = field(default_factory=dict)
    strings: Mapping[str, str] = field(default_factory=dict)
    now: str | None = None
    input_errors: Sequence[str] = ()
    session: SessionRef | None = None


@dataclass(frozen=True)
class GateReport:
    """A gate's outcome and its result document; ``log``: the failure log file written."""

    outcome: GateOutcome
    document: dict[str, Any]
    log: Path | None = None


def run_gate(pack: Pack, request: GateRequest) -> GateReport:
    """Run the gate ``request`` names; with a session, record its result there."""
    outcome = pack.gate(
        request.gate,
        request.outputs,
        retry=request.retry,
        context=request.context,
        strings=request.strings,
        now=request.now,
        input_errors=request.input_errors,
    )
    document = gate_document(outcome)
    log = None
    if request.session is not None:
        log = record_gate(pack, request.session.place(), outcome, failure_record(document))
    return GateReport(outcome, document, log)


def gate_document(outcome: GateOutcome) -> dict[str, Any]:
    """The result as `rules gate --format json` prints it and POST /v1/gate answers it
    (contracts/gate-result.schema.json)."""
    return {GATE_KEY: outcome.result.gate, **gate_fields(outcome)}


def failure_record(document: Mapping[str, Any]) -> dict[str, Any]:
    """The gate result as seed 004's failure log writes it (``result.to_dict()``): the
    result document without the reprompt and the artifact."""
    return {k: v for k, v in document.items() if k not in ("reprompt", "artifact")}


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
    (contracts/gate-result.schema.json)."""
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
