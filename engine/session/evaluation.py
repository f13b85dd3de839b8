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
    from engine.policy.triggers.decide import Decision


@dataclass(frozen=True)
class Evaluated:
    """One output evaluated and decided (recorded when a session was given)."""

    pack: Pack
    verdict: Verdict
    decision: Decision
    output: bytes
    variables: dict[str, str]
    context: dict[str, Any]
    attempt_id: int | None = None  # its row in the session's ledger
    user_context: str = ""
    """The user's text a choice added for the item's next prompt (`rules choose --text`)."""


def evaluate_output(
    pack: Pack,
    block: str,
    output: bytes | None,
    *,
    variables: dict[str, str],
    context: dict[str, Any],
    nonce: str | None = None,
    model: str | None = None,
    source: str = "-",
    external_error: str | None = None,
    failure_type: str = "PARSE_ERROR",
    attempt: int = 1,
    previous_errors: tuple[str, ...] = (),
    session_dir: str | Path | None = None,
    ledger: str | None = None,
    keep_outputs: bool = False,
    reuse_latest: bool = False,
    item: str | None = None,
) -> Evaluated:
    """Evaluate ``output`` (None: the file was missing) for ``block`` and decide the next
    action. With ``session_dir`` (a folder; with ``ledger``, a URL, the session there)
    the session's ledger counts the attempt and records it
    (``attempt`` and ``previous_errors`` are then the ledger's), as an attempt of the item
    ``item`` names or else of the item the pack's ``session.item`` makes; ``external_error`` is a
    failure found outside the pack (the output was too large, the model failed)."""
    if session_dir is not None:
        # Deferred for start-up time: evaluating without a session opens no ledger.
        from engine.session.session import Session

        with Session(pack, session_dir, ledger=ledger, keep_outputs=keep_outputs) as session:
            outcome = session.evaluate(
                block,
                output,
                nonce=nonce,
                vars=variables,
                context=context,
                model=model,
                path=source,
                error=external_error,
                failure_type=failure_type,
                reuse_latest=reuse_latest,
                item=item,
            )
        return Evaluated(
            pack,
            outcome.verdict,
            outcome.decision,
            output or b"",
            variables,
            context,
            outcome.attempt_id,
            outcome.user_context,
        )
    with evaluation_span(pack, block, item=item, model=model) as span:
        if external_error is not None:
            verdict = pack.verdict_for_error(block, external_error, failure_type)
        else:
            verdict = pack.evaluate(
                block, output, nonce=nonce, vars=variables, context=context, path=source
            )
        decision = pack.decide(
            verdict,
            output=output or b"",
            attempt=attempt,
            previous_errors=previous_errors,
            nonce=nonce,
            model=model,
            context=context,
        )
        record_decision(span, verdict, decision)
    return Evaluated(pack, verdict, decision, output or b"", variables, context)
