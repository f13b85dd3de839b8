"""What a chunk of records found under the packs (a Tally), and the merging of tallies in
input order."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Protocol

from engine.backtest.judge import (
    REMEMBERED_DECISIONS,
    BlockPlan,
    Judge,
    MemoKey,
    Outcome,
    block_plan,
    judge_record,
)
from engine.backtest.records import InvalidRecord, read_record
from engine.core.textio import clean_strings, clean_text

if TYPE_CHECKING:
    from engine.pack.compiled import Pack


EXAMPLES_PER_FLIP = 3

EXAMPLE_TEXT_CHARS = 200


@dataclass
class PackTally:
    """Verdicts, actions and failure types under one pack."""

    status: Counter[str] = field(default_factory=Counter)
    actions: Counter[str] = field(default_factory=Counter)
    failure_types: Counter[str] = field(default_factory=Counter)
    further_attempts: int = 0
    """Decisions that ask for another attempt (a repair or a retry)."""
    errors: int = 0
    """Records this pack could not evaluate (unknown block, context that does not fit)."""

    def merge(self, other: PackTally) -> None:
        self.status.update(other.status)
        self.actions.update(other.actions)
        self.failure_types.update(other.failure_types)
        self.further_attempts += other.further_attempts
        self.errors += other.errors

    def to_json(self) -> dict[str, Any]:
        return {
            "status": dict(sorted(self.status.items())),
            "actions": dict(sorted(self.actions.items())),
            "failure_types": dict(sorted(self.failure_types.items())),
            "further_attempts": self.further_attempts,
            "errors": self.errors,
        }


@dataclass
class Tally:
    """What a chunk (or a whole run, after merging) found."""

    packs: list[PackTally]
    records: int = 0
    lines: int = 0
    invalid: int = 0
    flipped: int = 0
    flips: Counter[str] = field(default_factory=Counter)
    by_block: dict[str, Counter[str]] = field(default_factory=dict)
    by_failure_type: dict[str, Counter[str]] = field(default_factory=dict)
    examples: dict[str, list[dict[str, Any]]] = field(default_factory=dict)
    first_invalid: list[dict[str, Any]] = field(default_factory=list)

    def merge(self, other: Tally, path: str, line_offset: int) -> None:
        """Add ``other`` (the next chunk in input order, whose lines start after
        ``line_offset`` lines of ``path``)."""
        for mine, theirs in zip(self.packs, other.packs, strict=True):
            mine.merge(theirs)
        self.records += other.records
        self.lines += other.lines
        self.invalid += other.invalid
        self.flipped += other.flipped
        self.flips.update(other.flips)
        for key, counts in other.by_block.items():
            self.by_block.setdefault(key, Counter()).update(counts)
        for key, counts in other.by_failure_type.items():
            self.by_failure_type.setdefault(key, Counter()).update(counts)
        for kind, examples in other.examples.items():
            kept = self.examples.setdefault(kind, [])
            for example in examples[: EXAMPLES_PER_FLIP - len(kept)]:
                kept.append(_placed(example, path, line_offset))
        for example in other.first_invalid[: EXAMPLES_PER_FLIP - len(self.first_invalid)]:
            self.first_invalid.append(_placed(example, path, line_offset))


def _placed(example: dict[str, Any], path: str, line_offset: int) -> dict[str, Any]:
    placed = dict(example)
    placed["where"] = clean_text(f"{path}:{line_offset + placed.pop('line')}")
    return placed


def empty_tally(pack_count: int) -> Tally:
    return Tally([PackTally() for _ in range(pack_count)])


class Errored(Protocol):
    """What a flip's example shows of a side's verdict: its error (a Verdict is one)."""

    @property
    def error(self) -> str | None: ...


def count_outcome(tally: PackTally, outcome: Outcome | None, times: int = 1) -> None:
    """Add ``times`` records with ``outcome`` (None: not evaluated) to a pack's tally."""
    if outcome is None:
        tally.errors += times
        return
    status, failure_type, action, further, _rule = outcome
    tally.status[status] += times
    tally.actions[action] += times
    if failure_type:
        tally.failure_types[failure_type] += times
    if further:
        tally.further_attempts += times


def _side(outcome: Outcome | None, verdict: Errored | None) -> dict[str, Any]:
    if outcome is None:
        return {
            "status": "error",
            "action": None,
            "failure_type": None,
            "error": None,
            "rule": None,
        }
    return {
        "status": outcome.status,
        "action": outcome.action,
        "failure_type": outcome.failure_type,
        "error": verdict and verdict.error,
        "rule": outcome.rule or None,
    }


def _bump(counts: dict[str, Counter[str]], key: str, name: str) -> None:
    """One more ``name`` in the counter of ``key`` (made on first use: a flip is counted
    per record, and an empty Counter costs more than the count)."""
    counter = counts.get(key)
    if counter is None:
        counter = counts[key] = Counter()
    counter[name] += 1


def tally_lines(
    packs: Sequence[Pack],
    lines: Iterable[bytes | InvalidRecord],
    plans: dict[str, BlockPlan] | None = None,
) -> Tally:
    """The tally of JSONL ``lines`` under ``packs`` (the pack first, then the baseline).
    ``plans``: the block plans of these packs, kept between calls by the caller. A line
    given as an InvalidRecord could not be read (too long, damaged)."""
    tally = empty_tally(len(packs))
    remembered: dict[MemoKey, Outcome] = {}
    judges = [Judge(pack, remembered) for pack in packs]
    plans = {} if plans is None else plans
    # the outcomes of a record under every pack, counted once per record and added to
    # each pack's tally at the end
    combinations: Counter[tuple[Outcome | None, ...]] = Counter()
    for number, line in enumerate(lines, start=1):
        tally.lines = number
        try:
            if isinstance(line, InvalidRecord):  # could not be read: too long, damaged
                raise line
            if not line.strip():
                continue
            record, text = read_record(line)
        except InvalidRecord as exc:
            tally.invalid += 1
            if len(tally.first_invalid) < EXAMPLES_PER_FLIP:
                tally.first_invalid.append({"line": number, "error": str(exc)})
            continue
        tally.records += 1
        block = record["block"]
        plan = plans.get(block)
        if plan is None:
            if len(plans) >= REMEMBERED_DECISIONS:  # records naming many unknown blocks
                plans.clear()
            plan = plans[block] = block_plan(packs, block)
        outcomes, verdicts = judge_record(judges, plan, record, text)
        combinations[tuple(outcomes)] += 1
        if len(outcomes) >= 2:
            compare_outcomes(tally, record, text, number, outcomes, verdicts)
    for combination, times in combinations.items():
        for pack_tally, outcome in zip(tally.packs, combination, strict=True):
            count_outcome(pack_tally, outcome, times)
    return tally


def compare_outcomes(
    tally: Tally,
    record: Mapping[str, Any],
    text: str | bytes,
    line: int,
    outcomes: Sequence[Outcome | None],
    verdicts: Sequence[Errored | None],
) -> bool:
    """Count the flips of one record between the pack (``outcomes[0]``) and the baseline
    (``outcomes[1]``): a verdict status that changes (pass->fail) and an action that changes
    (REPAIR->PROCEED), each with its block, failure type and first examples. None stands
    for a pack that could not evaluate the record ("error"). Whether it flipped."""
    new, old = outcomes[0], outcomes[1]
    if new is old or new == old:  # a judge hands out one object for equal outcomes
        return False
    new_status = new.status if new else "error"
    old_status = old.status if old else "error"
    new_action = new.action if new else "error"
    old_action = old.action if old else "error"
    if new_status == old_status and new_action == old_action:
        return False
    tally.flipped += 1
    failure = (new and new.failure_type) or (old and old.failure_type) or "none"
    for before, after in ((old_status, new_status), (old_action, new_action)):
        if before == after:
            continue
        kind = f"{before}->{after}"
        tally.flips[kind] += 1
        _bump(tally.by_block, clean_text(record["block"]), kind)
        _bump(tally.by_failure_type, kind, failure)
        examples = tally.examples.setdefault(kind, [])
        if len(examples) < EXAMPLES_PER_FLIP:
            shown = text if isinstance(text, str) else text.decode("utf-8", errors="replace")
            example = {
                "line": line,
                "id": record.get("id"),
                "block": record["block"],
                "text": shown[:EXAMPLE_TEXT_CHARS],
                "baseline": _side(old, verdicts[1]),
                "pack": _side(new, verdicts[0]),
            }
            examples.append(clean_strings(example))  # a record may hold lone surrogates
    return True
