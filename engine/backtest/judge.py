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

from engine.errors import EngineError
from engine.pack import prepared_output

if TYPE_CHECKING:
    from engine.contracts.kind import EvaluationInput
    from engine.pack import Pack
    from engine.verdict import Verdict


REMEMBERED_DECISIONS = 4096
"""Decisions a judge remembers, and block plans a chunk keeps, at most (memory stays
constant whatever the records hold)."""

_LOADED: dict[str, Pack] = {}


def loaded_pack(ref: str) -> Pack:
    """The pack ``ref``, loaded once per process (workers keep theirs between chunks)."""
    pack = _LOADED.get(ref)
    if pack is None:
        from engine.pack import load_pack

        pack = _LOADED[ref] = load_pack(ref)
    return pack


class Outcome(NamedTuple):
    """One record under one pack (a named tuple: one is built per record and pack)."""

    status: str
    failure_type: str | None
    action: str
    further: bool
    """The decision asks for another attempt (a repair or a retry)."""
    error: str | None
    """The first failure's message (shown in flip examples, not counted)."""


Counted = tuple[str, str | None, str, bool]
"""What a tally counts of an outcome: status, failure type, action, further."""


def counted(outcome: Outcome | None) -> Counted | None:
    """What a tally counts of an outcome (all but the message)."""
    return None if outcome is None else outcome[:4]


def evaluation_key(pack: Pack, block: str) -> str | None:
    """What a verdict of ``block`` depends on under ``pack`` (its contract, the sentinel
    grammar, failure types, severities and context keys): two packs with the same key give
    the same verdict for every record, so it is computed once. None: no such block."""
    model = pack.model
    contract = model.contracts.get(block)
    if contract is None:
        return None
    spec = contract.model_dump(mode="json")
    parts = [
        spec,
        model.sentinel.model_dump(mode="json"),
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


class Judge:
    """Evaluates and decides records under one pack, remembering decisions by their
    decision key (``CompiledPolicy.decision_key``: block, failure type, attempt, the guard
    that holds, a repeated error)."""

    def __init__(self, pack: Pack) -> None:
        self.pack = pack
        self._decisions: dict[DecisionKey, tuple[str, bool]] = {}

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
        self, verdict: Verdict | None, record: Mapping[str, Any], text: str
    ) -> Outcome | None:
        """The decision on ``verdict`` of the output ``text`` (decoded) as an Outcome; None
        when there is no verdict or the pack cannot decide (a context that does not fit)."""
        if verdict is None:
            return None
        attempt = record.get("attempt", 1)
        previous_errors = record.get("previous_errors") or ()
        context = record.get("context") or None
        policy = self.pack.policy
        try:
            key = policy.decision_key(
                verdict, attempt, previous_errors, output=text, context=context
            )
            known = self._decisions.get(key) if key is not None else None
            if known is None:
                decision = self.pack.decide(
                    verdict,
                    output=text,
                    attempt=attempt,
                    previous_errors=previous_errors,
                    nonce=record.get("nonce"),
                    context=context,
                )
                known = (decision.action, not decision.final)
                if key is not None:
                    if len(self._decisions) >= REMEMBERED_DECISIONS:  # many attempt numbers
                        self._decisions.clear()
                    self._decisions[key] = known
        except EngineError:  # a guard that fails, a context that does not fit
            return None
        failure = verdict.failures[0] if verdict.failures else None
        if failure is None:
            return Outcome(verdict.status, None, known[0], known[1], None)
        return Outcome(verdict.status, failure.type, known[0], known[1], failure.message)


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


def judge_record(
    judges: Sequence[Judge], plan: BlockPlan, record: Mapping[str, Any], text: str | bytes
) -> list[Outcome | None]:
    """The outcome of ``record`` under each judge's pack. A verdict is computed once per
    evaluation key (and the payload read once per reading key: ``Pack.evaluate``'s
    ``shared``); a decision once per policy key and equal verdict."""
    output = prepared_output(text, record.get("nonce"), record.get("vars") or None, shared={})
    verdicts: dict[str, Verdict | None] = {}
    decided: list[tuple[str, Verdict, Outcome | None]] = []
    outcomes: list[Outcome | None] = []
    for index, judge in enumerate(judges):
        key = plan.evaluation[index]
        if key is None:
            outcomes.append(None)
            continue
        if key in verdicts:
            verdict = verdicts[key]
        else:
            verdict = verdicts[key] = judge.verdict(output, record)
        policy = plan.policy[index]
        outcome: Outcome | None = None
        found = False
        if verdict is not None and policy is not None:
            for other_policy, other_verdict, other_outcome in decided:
                if other_policy == policy and (
                    other_verdict is verdict or other_verdict == verdict
                ):
                    outcome, found = other_outcome, True
                    break
        if not found:
            outcome = judge.outcome(verdict, record, output.text or "")
            if verdict is not None and policy is not None:
                decided.append((policy, verdict, outcome))
        outcomes.append(outcome)
    return outcomes
