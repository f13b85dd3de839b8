"""Kept outputs (``--keep-outputs``): an attempt's evaluated text, zlib-compressed, with
its vars and context; read back as `--jsonl` records (exports, backtests) and as the
accepted outputs of earlier rounds (example tier 2 of a session without a folder)."""

from __future__ import annotations

import json
import zlib
from typing import Any

from engine.core.textio import MAX_OUTPUT_BYTES
from engine.ledger.connection import Tx


def records(
    tx: Tx, session: str, after: int = 0, limit: int = -1, max_text_bytes: int = MAX_OUTPUT_BYTES
) -> list[dict[str, Any]]:
    """Kept attempts with ids above ``after`` as ``--jsonl`` records, oldest first, each
    with the errors of its item's earlier attempts (``previous_errors``, oldest first).
    A kept output that does not decompress within ``max_text_bytes``, or whose vars or
    context are not JSON, gives ``{"id": ..., "damaged": why}`` instead."""
    sql = (
        "SELECT a.id, a.block, a.item, a.nonce, a.attempt, k.vars, k.context, k.output"
        " FROM kept_outputs k JOIN attempts a ON a.id = k.attempt_id"
        " WHERE a.session = ? AND a.id > ? ORDER BY a.id"
    )
    params: list[Any] = [session, after]
    if limit >= 0:
        sql += " LIMIT ?"
        params.append(limit)
    out = []
    for row in tx.dicts(sql, params):
        earlier = tx.all(
            "SELECT id, error FROM attempts WHERE session = ? AND block = ? AND item = ?"
            " AND id < ? ORDER BY id",
            (session, row["block"], row["item"], row["id"]),
        )
        bad = _bad_row(row, earlier)
        if bad is not None:
            out.append({"id": row["id"], "damaged": bad})
            continue
        try:
            record = {
                "id": row["id"],
                "block": row["block"],
                "nonce": row["nonce"],
                "vars": json.loads(row["vars"]),
                "context": json.loads(row["context"]),
                "attempt": row["attempt"],
                "previous_errors": [e for _, e in earlier if e is not None],
                "text": text(row["output"], max_text_bytes),
            }
        except RecursionError:
            record = {"id": row["id"], "damaged": "its vars or context are nested too deeply"}
        except (ValueError, TypeError, zlib.error) as exc:
            record = {"id": row["id"], "damaged": f"its kept output cannot be read ({exc})"}
        out.append(record)
    return out


def _bad_row(row: dict[str, Any], earlier: list[tuple[Any, ...]]) -> str | None:
    """Why the attempt row of a kept output is not what this engine writes, or None."""
    for attempt_id, error in earlier:
        if error is not None and not isinstance(error, str):
            return f"the error of attempt {attempt_id} of its item is not text"
    for name, kind in (("block", str), ("nonce", (str, type(None))), ("attempt", int)):
        if not isinstance(row[name], kind):
            return f"column {name} of its attempt does not hold what this engine writes"
    return None


def text(compressed: bytes, max_text_bytes: int = MAX_OUTPUT_BYTES) -> str:
    """A kept output, decompressed no further than ``max_text_bytes`` (ValueError beyond:
    a few kilobytes of zlib data can hold gigabytes)."""
    inflate = zlib.decompressobj()
    data = inflate.decompress(bytes(compressed), max_text_bytes + 1)
    if len(data) > max_text_bytes:
        raise ValueError(f"longer than {max_text_bytes} bytes once decompressed")
    if not inflate.eof:
        raise ValueError("the zlib data is cut short")
    return data.decode("utf-8", errors="surrogatepass")


def id_range(tx: Tx, session: str) -> tuple[int, int, int]:
    """(count, first id, last id) of the session's kept attempts."""
    row = tx.one(
        "SELECT COUNT(*), MIN(k.attempt_id), MAX(k.attempt_id) FROM kept_outputs k"
        " JOIN attempts a ON a.id = k.attempt_id WHERE a.session = ?",
        (session,),
    )
    assert row is not None
    return int(row[0]), int(row[1] or 0), int(row[2] or 0)


def accepted_outputs(tx: Tx, session: str, block: str) -> list[tuple[int, bytes]]:
    """(round, compressed output) of the kept outputs the session accepted (passed or
    warned) for ``block`` with a round, oldest first."""
    rows = tx.all(
        "SELECT a.round, k.output FROM kept_outputs k JOIN attempts a ON a.id = k.attempt_id"
        " WHERE a.session = ? AND a.block = ? AND a.round IS NOT NULL"
        " AND a.status IN ('pass', 'warn') ORDER BY a.id",
        (session, block),
    )
    return [(int(r[0]), bytes(r[1])) for r in rows]


def output_of(tx: Tx, attempt_id: int) -> bytes | None:
    """The compressed kept output of one attempt, or None when it was not kept."""
    row = tx.one("SELECT output FROM kept_outputs WHERE attempt_id = ?", (attempt_id,))
    return None if row is None else bytes(row[0])
