"""The choose use case: a user's choice on an item's final decision (`rules choose`),
recorded and applied, and resuming a session a choice paused.

An item is named ``BLOCK@ROUND`` (or ``BLOCK``: its latest attempt); its latest attempt must
be a final failure whose trigger offers a menu (`after_failure.menu`). The option is the
menu's number (from 1) or its key.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from engine.core.errors import EngineError
from engine.core.numbers import INT64_MAX
from engine.core.placeholders import fill
from engine.ledger import attempts
from engine.ledger.store import SessionLedger
from engine.pack.compiled import Pack
from engine.session.choice_book import ChoiceBook, round_failed
from engine.session.next_prompt import ledger_accepted_rounds
from engine.session.recording import Session
from engine.session.session_ref import SessionRef


class ChoiceError(EngineError):
    """A choice that cannot be made: no such item, nothing pending, no such option."""


@dataclass
class ChoiceResult:
    """What a choice did."""

    item: str
    option: str
    label: str
    effect: str
    statuses: dict[str, str] = field(default_factory=dict)
    prompt: str | None = None
    escalation: tuple[str, str, int] | None = None
    """(action, message, exit code) when the round's blocks all failed."""
    end: tuple[str, int] | None = None
    """(action, exit code) when the choice ended the item."""


def parse_item(item: str) -> tuple[str, int | None]:
    block, at, round_text = item.partition("@")
    if not block or (at and not (round_text.isascii() and round_text.isdigit())):
        raise ChoiceError(f"{item!r}: an item is BLOCK@ROUND (e.g. author@3) or BLOCK")
    if at and (len(round_text) > 19 or int(round_text) > INT64_MAX):
        # a ledger round is a 64-bit SQLite INTEGER; a larger one can name no attempt
        raise ChoiceError(f"{item[:60]!r}: the round is out of range (at most {INT64_MAX})")
    return block, int(round_text) if at else None


def _latest(session: Session, block: str, round_number: int | None) -> dict[str, Any]:
    ledger = session.ledger
    row = ledger.read(lambda tx: attempts.latest(tx, ledger.session, block, round_number))
    if row is None:
        where = f" in round {round_number}" if round_number is not None else ""
        raise ChoiceError(f"no attempt of {block!r}{where} in {session.place.label}")
    return row


@dataclass(frozen=True)
class ChoiceRequest:
    """The user's choice: ``option`` (the menu's number, from 1, or its key) on ``item``
    (BLOCK@ROUND, or BLOCK: its latest attempt) at the time ``ts``, with the user's
    ``text`` for an option that adds it and the context of the prompt a retry prints."""

    item: str
    option: str
    ts: str
    text: str | None = None
    context: Mapping[str, Any] = field(default_factory=dict)


def choose(pack: Pack, session: SessionRef, request: ChoiceRequest) -> ChoiceResult:
    """Record the choice ``request`` makes in ``session`` and apply its effect."""
    with Session(pack, session) as opened:
        return apply_choice(opened, request)


def resume(session: SessionRef) -> None:
    """Resume a session a choice paused."""
    with SessionLedger(session.place()) as ledger:
        ChoiceBook(ledger).resume()


def recorded_pack(session: SessionRef, item: str) -> str:
    """The pack recorded with the latest attempt of ``item``'s block."""
    place = session.place()
    with SessionLedger(place, read_only=True) as ledger:
        pack = ledger.latest_attempt_pack(item.partition("@")[0])
    if pack is None:
        raise ChoiceError(f"no attempt of {item!r} in {place.label}")
    return pack


def apply_choice(session: Session, request: ChoiceRequest) -> ChoiceResult:
    """Record the choice ``request`` makes in the open ``session``; apply its effect."""
    item, option_ref, text, ts = request.item, request.option, request.text, request.ts
    pack = session.pack
    block, round_number = parse_item(item)
    attempt = _latest(session, block, round_number)
    trigger = pack.model.triggers.get(block)
    menu_name = trigger.after_failure.menu if trigger else None
    if (
        trigger is None
        or menu_name is None
        or attempt["status"] != "fail"
        or not attempt["final"]
        or attempt["action"] != trigger.after_failure.action
        or attempt["rule"] == "not-retriable"  # an error for the user: no menu is offered
    ):
        raise ChoiceError(
            f"no choice is pending for {item}: its last decision is {attempt['action']} "
            f"({attempt['rule']})"
        )
    book = ChoiceBook(session.ledger)
    earlier = book.chosen(attempt["id"])
    if earlier is not None:
        raise ChoiceError(
            f"{item}: option {earlier['option']!r} was already chosen at {earlier['ts']}"
        )
    options = pack.model.menus[menu_name].options
    numbered = option_ref.isascii() and option_ref.isdigit() and len(option_ref) <= 19
    if numbered and 1 <= int(option_ref) <= len(options):
        option = options[int(option_ref) - 1]
    else:
        found = [o for o in options if o.key == option_ref]
        if not found:
            offered = ", ".join(f"{i}/{o.key}" for i, o in enumerate(options, start=1))
            raise ChoiceError(f"option {option_ref!r} is not offered for {item} ({offered})")
        option = found[0]
    effect = option.effect
    if effect.retry is not None and not text:
        raise ChoiceError(f"option {option.key!r} adds the user's text: give --text")
    label = fill(option.label, {"block": block, "round": attempt["round"]})
    book.record(attempt, option, label, text, ts)
    result = ChoiceResult(item, option.key, label, "")
    rounds = pack.model.rounds
    if effect.status is not None:
        result.effect = f"status {effect.status}"
        if attempt["round"] is None:
            raise ChoiceError(f"{item}: a round status needs the attempt's round")
        result.statuses = book.set_status(block, attempt["round"], effect.status, ts, rounds)
        if rounds and rounds.all_failed and block in rounds.blocks:
            statuses = book.statuses(rounds, attempt["round"])
            if round_failed(statuses, rounds.all_failed.statuses):
                action = rounds.all_failed.action
                message = fill(rounds.all_failed.message, {"round": attempt["round"]})
                result.escalation = (action, message, pack.policy.actions[action].exit_code)
    elif effect.retry is not None:
        result.effect = f"{effect.retry} more attempt{'s' if effect.retry != 1 else ''}"
        result.prompt = _retry_prompt(session, attempt, request.context, text or "")
    elif effect.end is not None:
        result.effect = f"end with {effect.end}"
        if attempt["round"] is not None:
            result.statuses = book.set_status(block, attempt["round"], effect.end, ts, None)
        result.end = (effect.end, pack.policy.actions[effect.end].exit_code)
    else:
        result.effect = "pause the session"
        book.pause(ts)
    return result


def _retry_prompt(
    session: Session, attempt: Mapping[str, Any], context: Mapping[str, Any] | None, text: str
) -> str:
    """The prompt of the attempt the choice allowed, with the user's text."""
    pack = session.pack
    block = attempt["block"]
    grant = ChoiceBook(session.ledger).grant(block, attempt["item"])
    verdict = pack.verdict_for_error(block, attempt["error"] or "", attempt["failure_type"] or "")
    values = dict(context or {})
    round_key = pack.model.session.round
    if round_key and attempt["round"] is not None:
        values.setdefault(round_key, attempt["round"])
    decision = pack.decide(
        verdict,
        output="",
        attempt=attempt["attempt"],
        context=values,
        extra_attempts=grant.attempts,
    )
    if decision.template is None:
        raise ChoiceError(
            f"the allowed attempt's decision is {decision.action} ({decision.reason}): no "
            "prompt to print"
        )
    return pack.render_prompt(
        verdict,
        decision,
        output="",
        context=values,
        accepted_rounds=ledger_accepted_rounds(pack, block, values, session.place),
        user_context=text,
    ).text
