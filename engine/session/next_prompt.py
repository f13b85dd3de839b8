"""The prompt a decision calls for after an output, and what example tier 2 may use of a
session's earlier rounds for it: the rounds its ledger accepted, or the outputs it kept of
them. A command that renders one prompt asks this first, and opens a ledger only when the
pack's tier 2 reads one."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.prompts.examples.select import ReviewedExample
from engine.session.session_ref import SessionRef

if TYPE_CHECKING:
    from engine.core.verdict import Verdict
    from engine.ledger.store import Place
    from engine.pack.compiled import Pack
    from engine.pack.inputs import OutputInput
    from engine.policy.triggers.decide import Decision
    from engine.prompts.render import RenderedPrompt


def render_after(
    pack: Pack,
    verdict: Verdict,
    decision: Decision,
    given: OutputInput,
    user_context: str = "",
    place: Place | None = None,
) -> RenderedPrompt:
    """The prompt ``decision`` calls for after ``given``, with the example rounds of tier 2
    (``ledger_accepted_rounds``: ``place`` is the session's, whose ledger keeps outputs) and
    the user's text a choice added for the item."""
    return pack.render_prompt(
        verdict,
        decision,
        output=given.output if given.output is not None else b"",
        nonce=given.nonce,
        vars=given.vars,
        context=given.context,
        accepted_rounds=ledger_accepted_rounds(pack, verdict.block, given.context, place),
        user_context=user_context,
        reviewed=reviewed_examples(pack, verdict.block, place),
    )


def reviewed_examples(pack: Pack, block: str, place: Place | None) -> list[ReviewedExample]:
    """The outputs people wrote for ``block`` in the session at ``place`` (edited reviews,
    newest first), when the pack's selection uses the ``reviewed`` tier (else no ledger
    is opened for them)."""
    selection = pack.model.examples.selection
    if place is None or not place.exists():
        return []
    if not any(step.tier == "reviewed" for steps in selection.values() for step in steps):
        return []
    with place.open(read_only=True) as ledger:
        return [ReviewedExample(*row) for row in ledger.reviewed_outputs(block)]


def ledger_accepted_rounds(
    pack: Pack, block: str, context: Mapping[str, Any] | None, place: Place | None = None
) -> frozenset[int] | dict[int, str] | None:
    """What example tier 2 may use of earlier rounds of ``block``. With a session folder
    (the context key the pack names in ``session.folder``): the rounds its ledger accepted,
    when the pack's tier 2 asks for validated rounds (None: every round counts, or no
    ledger there). Without one, for a session in a ledger (``place``): the outputs its
    ledger kept of the accepted rounds, by round (the latest accepted one of each)."""
    spec = pack.model.examples.session
    key = pack.model.session.folder
    folder = (context or {}).get(key) if key else None
    if spec is None:
        return None
    if folder:
        return accepted_rounds(Path(str(folder)), block) if spec.validated_in_ledger else None
    if place is None or not place.exists():
        return None
    with place.open(read_only=True) as ledger:
        return ledger.accepted_outputs(block)


def accepted_rounds(session_dir: Path, block: str) -> frozenset[int] | None:
    """Rounds whose output for ``block`` the ledger in ``session_dir`` accepted (passed or
    warned); None when the folder has no ledger."""
    place = SessionRef(session_dir).place()
    if not place.exists():
        return None
    with place.open(read_only=True) as ledger:
        return ledger.accepted_rounds(block)
