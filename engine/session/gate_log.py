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
from engine.pack.loaded import Pack
from engine.policy.gates.runtime import GateOutcome
from engine.session.ledger import GateRecord, Ledger, sha256


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


def record_gate(
    pack: Pack, session_dir: Path, outcome: GateOutcome, gate_result: Mapping[str, Any]
) -> Path | None:
    """Record ``outcome`` in the session's ledger and, when it is not PROCEED and the pack
    names a log, append ``{timestamp, gate_result, reprompt_generated}`` to it. Returns the
    log file written, if any."""
    result = outcome.result
    ledger = Ledger(session_dir)
    try:
        ledger.record_gate(
            GateRecord(
                ts=outcome.timestamp,
                pack=pack.name,
                gate=result.gate,
                retry=result.retry,
                valid=result.valid,
                action=result.action,
                reason=result.reason,
                checked=result.checked,
                errors=result.errors,
                reprompt_sha256=None if outcome.reprompt is None else sha256(outcome.reprompt),
                artifact=outcome.artifact,
            )
        )
    finally:
        ledger.close()
    log = pack.model.gates.log
    if result.action == "PROCEED" or not log:
        return None
    path = session_dir / log
    append_json_line(
        path,
        {
            "timestamp": outcome.timestamp,
            "gate_result": dict(gate_result),
            "reprompt_generated": outcome.reprompt is not None,
        },
    )
    return path
