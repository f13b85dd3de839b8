"""The prompt an attempt's decision led to, noted on the attempt: its hash, what changed in
it, the example used, and what rendering it warned about."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from engine.ledger.attempts import now
from engine.ledger.connection import Tx

PROMPT_COLUMNS = (
    "prompt_sha256",
    "modification",
    "example_tier",
    "example_source",
    "example_chars",
    "example_tokens",
    "example_original_chars",
    "example_truncated",
)


def note_prompt(tx: Tx, attempt_id: int, prompt: Mapping[str, Any]) -> None:
    """Record on an attempt the prompt its decision led to (keys of ``PROMPT_COLUMNS``)
    and the prompt's ``warnings``."""
    columns = [c for c in PROMPT_COLUMNS if c in prompt]
    if columns:
        assignments = ", ".join(f"{c} = ?" for c in columns)
        values = [int(v) if isinstance(v, bool) else v for v in (prompt[c] for c in columns)]
        tx.execute(f"UPDATE attempts SET {assignments} WHERE id = ?", [*values, attempt_id])
    for message in prompt.get("warnings") or ():
        tx.execute(
            "INSERT INTO warnings (attempt_id, ts, message) VALUES (?, ?, ?)",
            (attempt_id, now(), message),
        )
