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
from typing import TYPE_CHECKING, Any

from engine.core.errors import LedgerError
from engine.ledger import choices as choice_rows
from engine.ledger import rounds as round_rows
from engine.ledger.connection import Tx
from engine.ledger.store import SessionLedger

if TYPE_CHECKING:  # annotations only: a run or eval records without the pack's models
    from engine.policy.choices.model import ChoiceOption
    from engine.policy.rounds.model import Rounds

PAUSED = "paused"


@dataclass(frozen=True)
class Grant:
    """More attempts a choice allowed an item, and the user's latest text for its prompt."""

    attempts: int = 0
    text: str = ""


class ChoiceBook:
    """Choices and round statuses in one session's ledger."""

    def __init__(self, ledger: SessionLedger) -> None:
        self.ledger = ledger
        self.session = ledger.session

    def grant(self, block: str, item: str) -> Grant:
        rows = self.ledger.read(lambda tx: choice_rows.of_item(tx, self.session, block, item))
        attempts, text = 0, ""
        for row_id, effect_text, row_text in rows:
            effect = self.ledger.decoded(effect_text, f"choices row {row_id}")
            if effect.get("retry"):
                attempts += int(effect["retry"])
                text = row_text or text
        return Grant(attempts, text)

    def resumes(self, block: str, item: str) -> bool:
        """Whether the item's latest attempt carries a choice that grants more attempts
        (`rules choose`): the item's next output then goes on in that attempt's run, whose
        cap the choice raised, instead of starting a new run."""
        history = self.ledger.history(block, item)
        chosen = self.chosen(int(history[-1]["id"])) if history else None
        if chosen is None:
            return False
        effect = self.ledger.decoded(chosen["effect"], f"choices row {chosen['id']}")
        return bool(effect.get("retry"))

    def chosen(self, attempt_id: int) -> dict[str, Any] | None:
        """The choice already made on attempt ``attempt_id``, if any."""
        return self.ledger.read(lambda tx: choice_rows.on_attempt(tx, attempt_id))

    def record(
        self,
        attempt: Mapping[str, Any],
        option: ChoiceOption,
        label: str,
        text: str | None,
        ts: str,
    ) -> None:
        effect = json.dumps(option.effect.model_dump(exclude_defaults=True))
        self.ledger.write(
            lambda tx: choice_rows.insert(tx, dict(attempt), option.key, label, effect, text, ts)
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

        def work(tx: Tx) -> None:
            for name, value in changed.items():
                round_rows.set_status(tx, self.session, name, round_number, value, ts)

        self.ledger.write(work)
        return changed

    def statuses(self, rounds: Rounds, round_number: int) -> dict[str, str | None]:
        """Each block's status in the round: set by a choice, else from its attempts."""
        return self.ledger.read(lambda tx: self.statuses_in(tx, rounds, round_number))

    def statuses_in(self, tx: Tx, rounds: Rounds, round_number: int) -> dict[str, str | None]:
        """``statuses``, read inside the transaction ``tx``."""
        out: dict[str, str | None] = {}
        for block in rounds.blocks:
            chosen = round_rows.status(tx, self.session, block, round_number)
            if chosen is not None:
                out[block] = chosen
                continue
            last = round_rows.last_attempt(tx, self.session, block, round_number)
            out[block] = None if last is None else _derived(*last)
        return out

    def all_statuses(self) -> list[dict[str, Any]]:
        return self.ledger.read(lambda tx: round_rows.all_statuses(tx, self.session))

    def all_choices(self) -> list[dict[str, Any]]:
        return [
            {**row, "effect": self.ledger.decoded(row["effect"], f"choices row {row['id']}")}
            for row in self.ledger.read(lambda tx: choice_rows.all_of(tx, self.session))
        ]

    def paused(self) -> str | None:
        return self.ledger.setting(PAUSED)

    def pause(self, ts: str) -> None:
        self.ledger.set_setting(PAUSED, ts)

    def resume(self) -> None:
        self.ledger.delete_setting(PAUSED)


def _derived(status: str, final: bool) -> str:
    if status == "pass":
        return "ok"
    if status == "warn":
        return "partial"
    return "failed" if final else "pending"


class SessionPaused(LedgerError):
    """A choice paused the session (at ``paused_at``): it records no attempt until
    `rules choose --resume`."""

    def __init__(self, folder: str, paused_at: str) -> None:
        super().__init__(
            f"{folder}: the session was paused at {paused_at} by a choice; resume it with "
            f"`rules choose --session {folder} --resume`"
        )
        self.paused_at = paused_at


def ensure_not_paused(book: ChoiceBook, folder: str) -> None:
    paused = book.paused()
    if paused is not None:
        raise SessionPaused(folder, paused)


def round_failed(statuses: Mapping[str, str | None], failed_statuses: list[str]) -> bool:
    """Whether every block ended the round in one of ``failed_statuses``."""
    return all(value is not None and value in failed_statuses for value in statuses.values())
