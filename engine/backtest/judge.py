"""One record under each pack: its verdict and decision (an Outcome), with the work the
packs agree on done once (evaluation keys, policy keys, remembered decisions)."""

from __future__ import annotations

import contextlib
import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from engine.contracts.registry import pack_inputs
from engine.core.errors import EngineError
from engine.pack.compiled import prepared_output
from engine.pack.loaded import load_pack

if TYPE_CHECKING:
    from engine.contracts.kind import EvaluationInput
    from engine.core.verdict import Verdict
    from engine.pack.compiled import Pack


REMEMBERED_DECISIONS = 4096
"""Decisions a judge remembers, and block plans a chunk keeps, at most (memory stays
constant whatever the records hold)."""

_LOADED: dict[str, Pack] = {}


def loaded_pack(ref: str, locked: bool | None = None) -> Pack:
    """The pack ``ref``, loaded once per process (workers keep theirs between chunks);
    ``locked`` as for ``load_pack``."""
    pack = _LOADED.get(ref)
    if pack is None:
        pack = _LOADED[ref] = load_pack(ref, locked)
    return pack


class Outcome(NamedTuple):
    """What a tally counts of one record under one pack (a named tuple: a judge makes one
    per decision it remembers and hands out the same object for equal decisions)."""

    status: str
    failure_type: str | None
    action: str
    further: bool
    """The decision asks for another attempt (a repair or a retry)."""
    rule: str = ""
    """The trigger rule (or limit) that decided: a flip's example names it on each side, so
    a person reading it sees which rule of the candidate changed the outcome. Empty where it is not
    known (a shadow evaluation recorded before the rule was kept)."""


def evaluation_key(pack: Pack, block: str) -> str | None:
    """What a verdict of ``block`` depends on under ``pack`` (its contract, what else of the
    pack its kind reads, failure types, severities and context keys): two packs with the
    same key give the same verdict for every record, so it is computed once. None: no such
    block."""
    model = pack.model
    contract = model.contracts.get(block)
    if contract is None:
        return None
    spec = contract.model_dump(mode="json")
    parts = [
        spec,
        pack_inputs(contract, model),
        {k: v.model_dump(mode="json") for k, v in model.failure_types.items()},
        model.severities,
        {k: v.model_dump(mode="json") for k, v in model.context.items()},
        _file_hashes(spec, pack.folder_of(("contracts", block))),
    ]
    return json.dumps(parts, sort_keys=True, default=str)


def _file_hashes(value: Any, folder: Path) -> list[str]:
    """The sha256 of every file of ``folder`` a string in ``value`` names (a contract's
    schema or text file), so two packs' contracts compare by content, not location."""
    if isinstance(value, dict):
        return [h for v in value.values() for h in _file_hashes(v, folder)]
    if isinstance(value, list):
        return [h for v in value for h in _file_hashes(v, folder)]
    if isinstance(value, str) and 0 < len(value) < 300 and "\n" not in value:
        path = folder / value
        with contextlib.suppress(OSError, ValueError):
            if path.is_file():
                return [value + ":" + hashlib.sha256(path.read_bytes()).hexdigest()]
    return []


def policy_key(pack: Pack, block: str) -> str:
    """What deciding on a verdict of ``block`` depends on under ``pack`` (its trigger row,
    actions, rate limits, retriable failure types and session keys): two packs with the
    same key decide alike on equal verdicts."""
    model = pack.model
    parts = [
        (model.triggers[block].model_dump(mode="json") if block in model.triggers else None),
        {k: v.model_dump(mode="json") for k, v in model.actions.items()},
        (model.rate_limits[block].model_dump(mode="json") if block in model.rate_limits else None),
        sorted(pack.policy.not_retriable),
        model.session.model_dump(mode="json"),
    ]
    return json.dumps(parts, sort_keys=True, default=str)


DecisionKey = tuple[str, str, int, int, bool]

MemoKey = tuple[str | None, str, DecisionKey]
"""What a judge remembers an outcome by: policy key, verdict status, decision key."""


class Judge:
    """Evaluates and decides records under one pack, remembering outcomes by decision key
    (``CompiledPolicy.decision_key``: block, failure type, attempt, the guard that holds, a
    repeated error) with the verdict's status and the pack's policy key. Judges of packs
    with the same policy for a block decide alike on equal keys, so they share what they
    remember (``remembered``)."""

    def __init__(self, pack: Pack, remembered: dict[MemoKey, Outcome] | None = None) -> None:
        self.pack = pack
        self._decisions: dict[MemoKey, Outcome] = {} if remembered is None else remembered

    def verdict(self, output: EvaluationInput, record: Mapping[str, Any]) -> Verdict | None:
        """The verdict on ``record`` (its ``output`` prepared once for every pack); None
        when the pack cannot evaluate it (no such block, a context that does not fit)."""
        try:
            return self.pack.evaluate_prepared(
                record["block"], output, record.get("context") or None
            )
        except EngineError:
            return None

    def outcome(
        self,
        verdict: Verdict | None,
        record: Mapping[str, Any],
        text: str,
        policy_key: str | None = None,
    ) -> Outcome | None:
        """The decision on ``verdict`` of the output ``text`` (decoded) as an Outcome; None
        when there is no verdict or the pack cannot decide (a context that does not fit).
        ``policy_key``: the pack's for the block (``policy_key``), which tells apart the
        policies of judges that share what they remember."""
        if verdict is None:
            return None
        attempt = record.get("attempt", 1)
        previous_errors = record.get("previous_errors") or ()
        context = record.get("context") or None
        try:
            key = self.pack.policy.decision_key(
                verdict, attempt, previous_errors, output=text, context=context
            )
            memo = None if key is None else (policy_key, verdict.status, key)
            known = None if memo is None else self._decisions.get(memo)
            if known is None:
                decision = self.pack.decide(
                    verdict,
                    output=text,
                    attempt=attempt,
                    previous_errors=previous_errors,
                    nonce=record.get("nonce"),
                    context=context,
                )
                known = Outcome(
                    verdict.status,
                    verdict.failure_type,
                    decision.action,
                    not decision.final,
                    decision.rule,
                )
                if memo is not None:
                    if len(self._decisions) >= REMEMBERED_DECISIONS:  # many attempt numbers
                        self._decisions.clear()
                    self._decisions[memo] = known
        except EngineError:  # a guard that fails, a context that does not fit
            return None
        return known


@dataclass(frozen=True)
class BlockPlan:
    """Per block, what each pack's verdict and decision depend on (evaluation and policy
    keys; None: the pack has no such block), so alike packs share the work."""

    evaluation: tuple[str | None, ...]
    policy: tuple[str | None, ...]


def block_plan(packs: Sequence[Pack], block: str) -> BlockPlan:
    evaluation = tuple(evaluation_key(pack, block) for pack in packs)
    return BlockPlan(
        evaluation,
        tuple(
            None if key is None else policy_key(pack, block)
            for pack, key in zip(packs, evaluation, strict=True)
        ),
    )


class Judged(NamedTuple):
    """A record under each pack: the outcomes, and the verdicts they came from (a flip's
    example shows their errors)."""

    outcomes: list[Outcome | None]
    verdicts: list[Verdict | None]


def judge_record(
    judges: Sequence[Judge], plan: BlockPlan, record: Mapping[str, Any], text: str | bytes
) -> Judged:
    """``record`` under each judge's pack. A verdict is computed once per evaluation key
    (and the payload read once per reading key: ``Pack.evaluate``'s ``shared``); a
    decision once per policy key, status and decision key (judges share what they
    remember)."""
    output = prepared_output(text, record.get("nonce"), record.get("vars") or None, shared={})
    decoded = output.text or ""
    by_key: dict[str, Verdict | None] = {}
    judged = Judged([], [])
    for judge, key, policy in zip(judges, plan.evaluation, plan.policy, strict=True):
        verdict = None
        if key is not None:
            verdict = by_key[key] if key in by_key else judge.verdict(output, record)
            by_key[key] = verdict
        judged.verdicts.append(verdict)
        judged.outcomes.append(judge.outcome(verdict, record, decoded, policy))
    return judged
