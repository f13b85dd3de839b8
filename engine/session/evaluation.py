"""One output evaluated and decided, recorded in a session's ledger when one is given:
what `rules eval` and `rules render` print from."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.session.tracing import evaluation_span, record_decision

if TYPE_CHECKING:
    from pathlib import Path

    from engine.core.verdict import Verdict
    from engine.pack.compiled import Pack
    from engine.pack.inputs import OutputInput
    from engine.policy.triggers.decide import Decision


@dataclass(frozen=True)
class Evaluated:
    """One output evaluated and decided (recorded when a session was given)."""

    pack: Pack
    verdict: Verdict
    decision: Decision
    output: str | bytes
    variables: dict[str, str]
    context: dict[str, Any]
    attempt_id: int | None = None  # its row in the session's ledger
    user_context: str = ""
    """The user's text a choice added for the item's next prompt (`rules choose --text`)."""


def evaluate_output(
    pack: Pack,
    given: OutputInput,
    *,
    attempt: int = 1,
    previous_errors: tuple[str, ...] = (),
    session_dir: str | Path | None = None,
    ledger: str | None = None,
    keep_outputs: bool = False,
    reuse_latest: bool = False,
) -> Evaluated:
    """Evaluate ``given`` (its output None: the file was missing) and decide the next
    action. With ``session_dir`` (a folder; with ``ledger``, a URL, the session there)
    the session's ledger counts the attempt and records it
    (``attempt`` and ``previous_errors`` are then the ledger's), as an attempt of the item
    ``given.item`` names or else of the item the pack's ``session.item`` makes."""
    output = given.output or b""
    variables, context = dict(given.vars), dict(given.context)
    if session_dir is not None:
        # Deferred for start-up time: evaluating without a session opens no ledger.
        from engine.session.session import Session

        with Session(pack, session_dir, ledger=ledger, keep_outputs=keep_outputs) as session:
            outcome = session.evaluate(given, reuse_latest=reuse_latest)
        return Evaluated(
            pack,
            outcome.verdict,
            outcome.decision,
            output,
            variables,
            context,
            outcome.attempt_id,
            outcome.user_context,
        )
    with evaluation_span(pack, given.block, item=given.item, model=given.model) as span:
        verdict = given.verdict(pack, context)
        decision = given.decide(
            pack, verdict, context, attempt=attempt, previous_errors=previous_errors
        )
        record_decision(span, verdict, decision)
    return Evaluated(pack, verdict, decision, output, variables, context)
