"""The user's choices on final decisions (`rules choose`) and the round statuses they set.

A pack's trigger may offer a menu after its final action (`after_failure.menu`); each option
has one effect: record a status for the item's block in its round, allow more attempts
(with the user's text for the next prompt), end the item with an action, or pause the
session. Round statuses that no choice set come from the ledger's attempts: `ok` (passed),
`partial` (accepted with warnings), `failed` (a final failure), `pending` (a repair or retry
is due).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from engine.ledger.errors import LedgerError
from engine.policy.choices.model import ChoiceOption
from engine.policy.rounds.model import Rounds
from engine.session.ledger import Ledger

PAUSED = "paused"


@dataclass(frozen=True)
class Grant:
    """More attempts a choice allowed an item, and the user's latest text for its prompt."""

    attempts: int = 0
    text: str = ""


class ChoiceBook:
    """Choices and round statuses in one session's ledger."""

    def __init__(self, ledger: Ledger) -> None:
        self.ledger = ledger

    def grant(self, block: str, item: str) -> Grant:
        rows = self.ledger.db.execute(
            "SELECT id, effect, text FROM choices WHERE block = ? AND item = ? ORDER BY id",
            (block, item),
        ).fetchall()
        attempts, text = 0, ""
        for row in rows:
            effect = self.ledger.decoded(row["effect"], f"choices row {row['id']}")
            if effect.get("retry"):
                attempts += int(effect["retry"])
                text = row["text"] or text
        return Grant(attempts, text)

    def chosen(self, attempt_id: int) -> dict[str, Any] | None:
        """The choice already made on attempt ``attempt_id``, if any."""
        row = self.ledger.db.execute(
            "SELECT * FROM choices WHERE attempt_id = ?", (attempt_id,)
        ).fetchone()
        return None if row is None else dict(row)

    def record(
        self,
        attempt: Mapping[str, Any],
        option: ChoiceOption,
        label: str,
        text: str | None,
        ts: str,
    ) -> None:
        effect = option.effect.model_dump(exclude_defaults=True)
        with self.ledger.transaction() as db:
            db.execute(
                "INSERT INTO choices (attempt_id, ts, block, item, round, option, label, "
                "effect, text) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
                (
                    attempt["id"],
                    ts,
                    attempt["block"],
                    attempt["item"],
                    attempt["round"],
                    option.key,
                    label,
                    json.dumps(effect),
                    text,
                ),
            )

    def set_status(
        self, block: str, round_number: int, status: str, ts: str, rounds: Rounds | None
    ) -> dict[str, str]:
        """Record ``status`` for ``block`` in the round, and what the pack's `follow`
        rules set in consequence; return every status set."""
        changed = {block: status}
        current = self.statuses(rounds, round_number) if rounds else {}
        for rule in rounds.follow if rounds else []:
            if (
                rule.block == block
                and rule.status == status
                and current.get(rule.then_block) in rule.if_status
            ):
                changed[rule.then_block] = rule.then_status
        with self.ledger.transaction() as db:
            for name, value in changed.items():
                db.execute(
                    "INSERT OR REPLACE INTO round_status (block, round, status, ts) "
                    "VALUES (?, ?, ?, ?)",
                    (name, round_number, value, ts),
                )
        return changed

    def statuses(self, rounds: Rounds, round_number: int) -> dict[str, str | None]:
        """Each block's status in the round: set by a choice, else from its attempts."""
        out: dict[str, str | None] = {}
        for block in rounds.blocks:
            row = self.ledger.db.execute(
                "SELECT status FROM round_status WHERE block = ? AND round = ?",
                (block, round_number),
            ).fetchone()
            if row is not None:
                out[block] = str(row["status"])
                continue
            last = self.ledger.db.execute(
                "SELECT status, final FROM attempts WHERE block = ? AND round = ? "
                "ORDER BY id DESC LIMIT 1",
                (block, round_number),
            ).fetchone()
            out[block] = None if last is None else _derived(last["status"], bool(last["final"]))
        return out

    def all_statuses(self) -> list[dict[str, Any]]:
        return [
            dict(row)
            for row in self.ledger.db.execute(
                "SELECT block, round, status, ts FROM round_status ORDER BY round, block"
            )
        ]

    def all_choices(self) -> list[dict[str, Any]]:
        return [
            {**dict(row), "effect": self.ledger.decoded(row["effect"], f"choices row {row['id']}")}
            for row in self.ledger.db.execute("SELECT * FROM choices ORDER BY id")
        ]

    def paused(self) -> str | None:
        return self.ledger.setting(PAUSED)

    def pause(self, ts: str) -> None:
        self.ledger.set_setting(PAUSED, ts)

    def resume(self) -> None:
        with self.ledger.transaction() as db:
            db.execute("DELETE FROM settings WHERE key = ?", (PAUSED,))


def _derived(status: str, final: bool) -> str:
    if status == "pass":
        return "ok"
    if status == "warn":
        return "partial"
    return "failed" if final else "pending"


def ensure_not_paused(book: ChoiceBook, folder: str) -> None:
    paused = book.paused()
    if paused is not None:
        raise LedgerError(
            f"{folder}: the session was paused at {paused} by a choice; resume it with "
            f"`rules choose --session {folder} --resume`"
        )


def round_failed(statuses: Mapping[str, str | None], failed_statuses: list[str]) -> bool:
    """Whether every block ended the round in one of ``failed_statuses``."""
    return all(value is not None and value in failed_statuses for value in statuses.values())
