"""Backtests: every logged record evaluated and decided under a pack and a baseline pack.

The records are the ``--jsonl`` records of engine.batch (``id``, ``block``, ``nonce``,
``vars``, ``text`` or ``text_base64``) with three optional keys: ``context`` (an object),
``attempt`` (the attempt number the output was, default 1) and ``previous_errors`` (the
item's earlier errors, oldest first).

The work is cut into chunks (byte ranges of the input files, cut at line starts) and
``run_chunk`` turns one chunk into a ``Tally``: pure, picklable, the same function for
every executor. Tallies are small and merge in input order, so the report does not depend
on how many workers ran, and memory stays constant whatever the input size.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any, NamedTuple

from engine.batch import text_of_record
from engine.errors import EngineError
from engine.pack import prepared_output
from engine.textio import MAX_OUTPUT_BYTES, clean_strings, clean_text

if TYPE_CHECKING:
    from engine.contracts.kind import EvaluationInput
    from engine.pack import Pack
    from engine.verdict import Verdict

CHUNK_BYTES = 1 << 20
SESSION_CHUNK = 20_000
PARQUET_CHUNK = 4096
"""Rows of a Parquet file per chunk, at least; a row group (one may hold the whole file)
is cut into PARQUET_SPLITS chunks at most, as each decodes its group from the start."""
PARQUET_SPLITS = 16
PARQUET_BATCH = 1024
"""Rows a Parquet chunk makes Python objects of at a time."""
EXAMPLES_PER_FLIP = 3
EXAMPLE_TEXT_CHARS = 200
REMEMBERED_DECISIONS = 4096
"""Decisions a judge remembers, and block plans a chunk keeps, at most (memory stays
constant whatever the records hold)."""


class BacktestError(EngineError):
    """A backtest cannot run: a pack does not load, an input cannot be read."""


@dataclass(frozen=True)
class Chunk:
    """Lines starting in ``[start, end)`` of the JSONL file ``path``; for a session folder
    the kept attempts with ids in ``(start, end]``; for a Parquet file the rows
    ``[start, end)``. ``index`` orders chunks."""

    index: int
    path: str
    start: int
    end: int
    source: str = "jsonl"
    """jsonl, session or parquet"""
    first: bool = True
    """The first chunk of its input (line numbers start again)."""


@dataclass(frozen=True)
class Task:
    """One unit of work for an executor: the packs (references) and a chunk."""

    packs: tuple[str, ...]
    chunk: Chunk
    max_line_bytes: int = MAX_OUTPUT_BYTES
    """A longer record line is an invalid record, skipped without being kept."""


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


# --- the per-record work -------------------------------------------------------------------

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


class InvalidRecord(ValueError):
    """A line that is not a record (reported, counted, skipped)."""


def read_record(line: bytes) -> tuple[dict[str, Any], str | bytes]:
    """A record of a JSONL line, its keys checked, and its text; InvalidRecord otherwise."""
    try:
        record = json.loads(line)
    except (ValueError, RecursionError) as exc:
        raise InvalidRecord(f"not valid JSON ({exc})") from None
    if not isinstance(record, dict):
        raise InvalidRecord("expected a JSON object")
    if not isinstance(record.get("block"), str):
        raise InvalidRecord("'block' is missing")
    nonce = record.get("nonce")
    if nonce is not None and not isinstance(nonce, str):
        raise InvalidRecord("'nonce' must be a string")
    variables = record.get("vars") or {}
    if not isinstance(variables, dict) or not all(
        isinstance(k, str) and isinstance(v, str) for k, v in variables.items()
    ):
        raise InvalidRecord("'vars' must be an object of strings")
    context = record.get("context") or {}
    if not isinstance(context, dict):
        raise InvalidRecord("'context' must be an object")
    attempt = record.get("attempt", 1)
    if not isinstance(attempt, int) or isinstance(attempt, bool) or attempt < 1:
        raise InvalidRecord("'attempt' must be a whole number from 1")
    previous = record.get("previous_errors") or []
    if not isinstance(previous, list) or not all(isinstance(e, str) for e in previous):
        raise InvalidRecord("'previous_errors' must be a list of strings")
    try:
        return record, text_of_record(record)
    except ValueError as exc:
        raise InvalidRecord(str(exc)) from None


def evaluation_key(pack: Pack, block: str) -> str | None:
    """What a verdict of ``block`` depends on under ``pack`` (its contract, the sentinel
    grammar, failure types, severities and context keys): two packs with the same key give
    the same verdict for every record, so it is computed once. None: no such block."""
    model = pack.model
    contract = model.contracts.get(block)
    if contract is None:
        return None
    parts = [
        contract.model_dump(mode="json"),
        model.sentinel.model_dump(mode="json"),
        {k: v.model_dump(mode="json") for k, v in model.failure_types.items()},
        model.severities,
        {k: v.model_dump(mode="json") for k, v in model.context.items()},
        _file_hashes(contract.model_dump(mode="json"), pack.folder_of(("contracts", block))),
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


def _count(tally: PackTally, outcome: Counted | None, times: int) -> None:
    if outcome is None:
        tally.errors += times
        return
    status, failure_type, action, further = outcome
    tally.status[status] += times
    tally.actions[action] += times
    if failure_type:
        tally.failure_types[failure_type] += times
    if further:
        tally.further_attempts += times


def _side(outcome: Outcome | None) -> dict[str, Any]:
    if outcome is None:
        return {"status": "error", "action": None, "failure_type": None, "error": None}
    return {
        "status": outcome.status,
        "action": outcome.action,
        "failure_type": outcome.failure_type,
        "error": outcome.error,
    }


def _bump(counts: dict[str, Counter[str]], key: str, name: str) -> None:
    """One more ``name`` in the counter of ``key`` (made on first use: a flip is counted
    per record, and an empty Counter costs more than the count)."""
    counter = counts.get(key)
    if counter is None:
        counter = counts[key] = Counter()
    counter[name] += 1


def _flip(
    tally: Tally,
    kind: str,
    record: Mapping[str, Any],
    text: str | bytes,
    line: int,
    new: Outcome | None,
    old: Outcome | None,
) -> None:
    tally.flips[kind] += 1
    _bump(tally.by_block, clean_text(record["block"]), kind)
    failure = (new and new.failure_type) or (old and old.failure_type) or "none"
    _bump(tally.by_failure_type, kind, failure)
    examples = tally.examples.setdefault(kind, [])
    if len(examples) < EXAMPLES_PER_FLIP:
        shown = text if isinstance(text, str) else text.decode("utf-8", errors="replace")
        example = {
            "line": line,
            "id": record.get("id"),
            "block": record["block"],
            "text": shown[:EXAMPLE_TEXT_CHARS],
            "baseline": _side(old),
            "pack": _side(new),
        }
        examples.append(clean_strings(example))  # a record may hold lone surrogates


@dataclass(frozen=True)
class BlockPlan:
    """Per block, what each pack's verdict and decision depend on (evaluation and policy
    keys; None: the pack has no such block), so alike packs share the work."""

    evaluation: tuple[str | None, ...]
    policy: tuple[str | None, ...]


def _block_plan(packs: Sequence[Pack], block: str) -> BlockPlan:
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


def tally_lines(
    packs: Sequence[Pack],
    lines: Iterable[bytes | InvalidRecord],
    plans: dict[str, BlockPlan] | None = None,
) -> Tally:
    """The tally of JSONL ``lines`` under ``packs`` (the pack first, then the baseline).
    ``plans``: the block plans of these packs, kept between calls by the caller. A line
    given as an InvalidRecord could not be read (too long, damaged)."""
    tally = empty_tally(len(packs))
    judges = [Judge(pack) for pack in packs]
    plans = {} if plans is None else plans
    # the outcomes of a record under every pack (messages left out), counted once per
    # record and added to each pack's tally at the end
    combinations: Counter[tuple[Counted | None, ...]] = Counter()
    for number, line in enumerate(lines, start=1):
        tally.lines = number
        if isinstance(line, InvalidRecord):
            tally.invalid += 1
            if len(tally.first_invalid) < EXAMPLES_PER_FLIP:
                tally.first_invalid.append({"line": number, "error": str(line)})
            continue
        if not line.strip():
            continue
        try:
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
            plan = plans[block] = _block_plan(packs, block)
        outcomes = judge_record(judges, plan, record, text)
        combinations[tuple(map(counted, outcomes))] += 1
        if len(outcomes) < 2:
            continue
        new, old = outcomes[0], outcomes[1]
        if new == old:
            continue
        new_status = new.status if new else "error"
        old_status = old.status if old else "error"
        new_action = new.action if new else "error"
        old_action = old.action if old else "error"
        if new_status == old_status and new_action == old_action:
            continue
        tally.flipped += 1
        if new_status != old_status:
            _flip(tally, f"{old_status}->{new_status}", record, text, number, new, old)
        if new_action != old_action:
            _flip(tally, f"{old_action}->{new_action}", record, text, number, new, old)
    for combination, times in combinations.items():
        for pack_tally, outcome in zip(tally.packs, combination, strict=True):
            _count(pack_tally, outcome, times)
    return tally


SKIP_BYTES = 1 << 16
"""What a chunk reads at a time of a line that began before it, to find its end."""


def read_chunk(
    chunk: Chunk, max_line_bytes: int = MAX_OUTPUT_BYTES
) -> Iterator[bytes | InvalidRecord]:
    """The lines that start in the chunk's byte range (a session's kept attempts, a
    Parquet file's rows: one JSON line each, made as they are read); an InvalidRecord for
    a line longer than ``max_line_bytes`` (not kept) or a damaged kept output. A JSONL
    chunk reads its own bytes, at most one line beyond them up to ``max_line_bytes``, and
    no more than its own size of a line that began before it."""
    encode = json.JSONEncoder(ensure_ascii=False).encode
    if chunk.source == "session":
        from engine.state.export import export_records

        for record in export_records(chunk.path, chunk.start, chunk.end, max_line_bytes):
            if "damaged" in record:
                yield InvalidRecord(record["damaged"])
            else:
                yield _capped(encode(record).encode("utf-8", "surrogatepass"), max_line_bytes)
    elif chunk.source == "parquet":
        for row in _parquet_rows(chunk):
            line = encode(_parquet_record(row)).encode("utf-8", "surrogatepass")
            yield _capped(line, max_line_bytes)
    else:
        yield from _jsonl_lines(chunk, max_line_bytes)


def _capped(line: bytes | InvalidRecord, max_line_bytes: int) -> bytes | InvalidRecord:
    if isinstance(line, bytes) and len(line) > max_line_bytes:
        return InvalidRecord(f"longer than {max_line_bytes} bytes; not read (--max-output-bytes)")
    return line


def _jsonl_lines(chunk: Chunk, max_line_bytes: int) -> list[bytes | InvalidRecord]:
    with open(chunk.path, "rb") as handle:
        if chunk.start > 0:
            # the line that began before the chunk belongs to an earlier one: skip to its
            # end, or give up at the chunk's end (no line starts in this chunk)
            handle.seek(chunk.start - 1)
            while True:
                piece = handle.readline(SKIP_BYTES)
                if not piece or piece.endswith(b"\n"):
                    break
                if handle.tell() >= chunk.end:
                    return []
        begin = handle.tell()
        if begin >= chunk.end:
            return []
        parts = handle.read(chunk.end - begin).split(b"\n")
        last = parts.pop()  # after the last newline: a line that goes on past the chunk
        if last and len(last) <= max_line_bytes:
            last += handle.readline(max_line_bytes + 1 - len(last))
            parts.append(last[:-1] if last.endswith(b"\n") else last)
        elif last:
            parts.append(last)  # too long: not read further, reported as such
    return [_capped(part, max_line_bytes) for part in parts]


_PLANS: dict[tuple[str, ...], dict[str, BlockPlan]] = {}


def run_chunk(task: Task) -> Tally:
    """The tally of one chunk: the function every executor runs (pure, picklable). The
    packs and their block plans are made once per process (workers keep them)."""
    packs = [loaded_pack(ref) for ref in task.packs]
    plans = _PLANS.setdefault(task.packs, {})
    return tally_lines(packs, read_chunk(task.chunk, task.max_line_bytes), plans)


# --- planning and executors ----------------------------------------------------------------


def plan_chunks(
    paths: Sequence[str], chunk_bytes: int = CHUNK_BYTES, chunk_rows: int = PARQUET_CHUNK
) -> list[Chunk]:
    """Cut the files into byte ranges of about ``chunk_bytes`` (session folders: into
    ranges of ``SESSION_CHUNK`` attempt ids; Parquet files: of ``chunk_rows`` rows)."""
    chunks: list[Chunk] = []
    for path in paths:
        if os.path.isdir(path):
            chunks += _session_chunks(path, len(chunks))
            continue
        if path.endswith(".parquet"):
            chunks += _parquet_chunks(path, len(chunks), chunk_rows)
            continue
        try:
            size = os.path.getsize(path)
        except OSError as exc:
            raise BacktestError(f"{path}: cannot read ({exc.strerror or exc})") from None
        start = 0
        while True:
            end = min(size, start + chunk_bytes)
            chunks.append(Chunk(len(chunks), path, start, end, first=start == 0))
            if end >= size:
                break
            start = end
    return chunks


def _parquet(path: str) -> Any:
    """The Parquet file at ``path`` (pyarrow, optional: Any-typed on purpose)."""
    import importlib

    try:
        parquet = importlib.import_module("pyarrow.parquet")
    except ImportError:
        raise BacktestError(f"{path}: Parquet input needs pyarrow (pip install pyarrow)") from None
    try:
        return parquet.ParquetFile(path)
    except (OSError, ValueError) as exc:
        raise BacktestError(f"{path}: not a readable Parquet file ({exc})") from None


def _parquet_record(row: dict[str, Any]) -> dict[str, Any]:
    """A Parquet row as a record: null columns left out, map columns (lists of key/value
    pairs) and JSON text in ``vars``/``context`` made objects."""
    record = {key: value for key, value in row.items() if value is not None}
    for key in ("vars", "context"):
        value = record.get(key)
        if isinstance(value, list):
            record[key] = dict(value)
        elif isinstance(value, str):
            with contextlib.suppress(ValueError):  # else reported as a bad record
                record[key] = json.loads(value)
    return record


def _parquet_chunks(path: str, first_index: int, rows: int) -> list[Chunk]:
    metadata = _parquet(path).metadata
    ranges: list[tuple[int, int]] = []
    offset = 0
    for group in range(metadata.num_row_groups):
        size = int(metadata.row_group(group).num_rows)
        step = max(rows, -(-size // PARQUET_SPLITS))
        end = offset + size
        ranges += [(start, min(start + step, end)) for start in range(offset, end, step)]
        offset = end
    return [
        Chunk(first_index + n, path, start, end, "parquet", start == 0)
        for n, (start, end) in enumerate(ranges)
    ]


def _parquet_rows(chunk: Chunk) -> Iterator[dict[str, Any]]:
    """The rows ``[start, end)`` of a Parquet file, a batch at a time (the row groups
    that hold them are decoded from their start; rows before ``start`` are not made
    Python objects)."""
    file = _parquet(chunk.path)
    groups: list[int] = []
    row = offset = 0
    for group in range(file.num_row_groups):
        size = int(file.metadata.row_group(group).num_rows)
        if offset < chunk.end and offset + size > chunk.start:
            row = offset if not groups else row
            groups.append(group)
        offset += size
    try:
        for batch in file.iter_batches(batch_size=PARQUET_BATCH, row_groups=groups):
            begin, stop = max(chunk.start - row, 0), min(chunk.end - row, batch.num_rows)
            if begin < stop:
                yield from batch.slice(begin, stop - begin).to_pylist()
            row += batch.num_rows
            if row >= chunk.end:
                return
    except (OSError, ValueError) as exc:  # pyarrow's errors of a damaged file
        raise BacktestError(f"{chunk.path}: not a readable Parquet file ({exc})") from None


def _session_chunks(path: str, first_index: int) -> list[Chunk]:
    from engine.state.export import kept_id_range

    count, first, last = kept_id_range(path)
    if count == 0:
        raise BacktestError(
            f"{path}: the session kept no outputs (run it with --keep-outputs, or give the pack "
            "`session: {keep_outputs: true}`)"
        )
    return [
        Chunk(
            first_index + n,
            path,
            after,
            min(after + SESSION_CHUNK, last),
            source="session",
            first=n == 0,
        )
        for n, after in enumerate(range(first - 1, last, SESSION_CHUNK))
    ]


Executor = Callable[[Sequence[Task]], Iterator[Tally]]
"""Runs tasks and yields their tallies in task order."""


def run_inline(tasks: Sequence[Task]) -> Iterator[Tally]:
    for task in tasks:
        yield run_chunk(task)


def local_executor(workers: int) -> Executor:
    """Tasks on ``workers`` local processes (in this process for one)."""
    if workers <= 1:
        return run_inline

    def run(tasks: Sequence[Task]) -> Iterator[Tally]:
        import multiprocessing
        from concurrent.futures import ProcessPoolExecutor
        from concurrent.futures.process import BrokenProcessPool

        context = multiprocessing.get_context("spawn" if os.name == "nt" else "fork")
        # not multiprocessing.Pool: it replaces a worker that dies (killed, out of memory)
        # and waits forever for the chunk that worker had
        pool = ProcessPoolExecutor(min(workers, len(tasks)) or 1, mp_context=context)
        try:
            yield from pool.map(run_chunk, tasks)
        except BrokenProcessPool:
            raise BacktestError(
                "a worker process ended before its chunk was done (killed, or out of memory?)"
            ) from None
        finally:
            pool.shutdown(wait=True, cancel_futures=True)

    return run


DASK_STALLED_SECONDS = 900.0
"""A Dask backtest fails when no chunk finishes for this long (a chunk takes seconds)."""
DASK_NO_WORKERS_SECONDS = 60.0
"""... or when the cluster has had no worker for this long (a worker that cannot import
this engine leaves the cluster at its first task; Dask would wait for another forever)."""


def dask_executor(
    scheduler: str | None = None,
    workers: int = 2,
    *,
    no_workers_seconds: float = DASK_NO_WORKERS_SECONDS,
) -> Executor:
    """Tasks on a Dask cluster: the one at ``scheduler`` (its workers must import this
    engine and read the record files at the same paths), or a local cluster of
    ``workers`` processes. BacktestError when Dask is not installed, the scheduler
    cannot be reached, a chunk fails on the cluster or the cluster stops working
    (``DASK_STALLED_SECONDS``, ``no_workers_seconds``)."""
    import importlib

    try:
        # Any-typed on purpose: Dask is optional and ships no type information.
        distributed: Any = importlib.import_module("distributed")
    except ImportError:
        raise BacktestError(
            "the dask executor needs Dask: pip install 'rules-engine[dask]'"
        ) from None

    def run(tasks: Sequence[Task]) -> Iterator[Tally]:
        cluster = None
        if scheduler is None:
            cluster = distributed.LocalCluster(
                n_workers=workers, threads_per_worker=1, processes=True, dashboard_address=None
            )
        try:
            try:
                client = distributed.Client(cluster or scheduler)
            except OSError as exc:
                where = "local cluster" if scheduler is None else f"scheduler {scheduler}"
                raise BacktestError(
                    f"dask {where}: {exc} (is a scheduler running there? Start one with "
                    "`dask scheduler`, or leave out --scheduler for a local cluster)"
                ) from None
            with client:
                futures = client.map(run_chunk, tasks, pure=False)
                for future in futures:
                    yield _result(distributed, client, future, no_workers_seconds)
                    future.release()
        finally:
            if cluster is not None:
                cluster.close()

    return run


def _result(distributed: Any, client: Any, future: Any, no_workers_seconds: float) -> Tally:
    """A Dask future's tally, waited for in steps of a second; what failed on the cluster
    (a lost worker, a worker that cannot read a record file) as a BacktestError, and so is
    a cluster that stops working."""
    waited = without_workers = 0.0
    while True:
        try:
            tally: Tally = future.result(timeout=1)
            return tally
        except distributed.TimeoutError:
            waited += 1
            without_workers = 0 if client.scheduler_info()["workers"] else without_workers + 1
        except EngineError:
            raise
        except Exception as exc:  # raised by a worker or by Dask: any type
            raise BacktestError(
                f"dask: a chunk failed on the cluster ({type(exc).__name__}: {exc}); its "
                "workers must import this engine and read the record files at the same paths"
            ) from None
        if without_workers >= no_workers_seconds:
            raise BacktestError(
                f"dask: the cluster has had no worker for {without_workers:.0f} s (a worker "
                "that cannot import this engine leaves at its first task: see the workers' "
                "logs); start workers with `dask worker ADDRESS` where this engine is installed"
            )
        if waited >= DASK_STALLED_SECONDS:
            raise BacktestError(f"dask: no chunk finished in {waited:.0f} s; the cluster is stuck")


@dataclass
class Report:
    """A finished backtest: the pack references and the merged tally."""

    pack: str
    baseline: str | None
    tally: Tally
    max_flips: int | None = None

    @property
    def exceeded(self) -> bool:
        return self.max_flips is not None and self.tally.flipped > self.max_flips

    def to_json(self) -> dict[str, Any]:
        tally = self.tally
        summary = {"pack": {"ref": self.pack, **tally.packs[0].to_json()}}
        if self.baseline is not None:
            summary["baseline"] = {"ref": self.baseline, **tally.packs[1].to_json()}
        return {
            "total": tally.records,
            "invalid": tally.invalid,
            "invalid_examples": tally.first_invalid,
            "summary": summary,
            "flipped": tally.flipped,
            "max_flips": self.max_flips,
            "flips": dict(sorted(tally.flips.items())),
            "flips_by_block": {
                block: dict(sorted(counts.items()))
                for block, counts in sorted(tally.by_block.items())
            },
            "flips_by_failure_type": {
                kind: dict(sorted(counts.items()))
                for kind, counts in sorted(tally.by_failure_type.items())
            },
            "examples": {kind: tally.examples[kind] for kind in sorted(tally.examples)},
        }


def backtest(
    pack: str,
    records: Sequence[str],
    *,
    baseline: str | None = None,
    executor: Executor = run_inline,
    max_flips: int | None = None,
    chunk_bytes: int = CHUNK_BYTES,
    progress: Callable[[int, int], None] | None = None,
    max_line_bytes: int | None = None,
    chunk_rows: int = PARQUET_CHUNK,
) -> Report:
    """Backtest ``pack`` (against ``baseline``) on the JSONL files ``records``.

    The packs are loaded here first, so a pack that does not load is a BacktestError
    before any worker starts. ``progress`` receives the chunks done and the chunk count
    after each chunk. A record line longer than ``max_line_bytes`` (default: the largest
    of the packs' ``limits.max_output_bytes``, else 64 MiB) is an invalid record, not read.
    """
    # Workers get absolute paths (a cluster's workers run in folders of their own); the
    # report shows the paths as given. A name that is no path stays a builtin pack's name.
    refs = tuple(
        os.path.abspath(ref) if os.path.exists(ref) else ref
        for ref in ((pack,) if baseline is None else (pack, baseline))
    )
    try:
        limits = [loaded_pack(ref).model.limits.max_output_bytes for ref in refs]
    except EngineError as exc:
        raise BacktestError(str(exc)) from None
    cap = max_line_bytes or max(limit or MAX_OUTPUT_BYTES for limit in limits)
    chunks = plan_chunks(records, chunk_bytes, chunk_rows)
    tasks = [Task(refs, replace(chunk, path=os.path.abspath(chunk.path)), cap) for chunk in chunks]
    total = empty_tally(len(refs))
    offset = 0
    for done, (chunk, tally) in enumerate(zip(chunks, executor(tasks), strict=True), start=1):
        if chunk.first:
            offset = 0
        total.merge(tally, chunk.path, offset)
        offset += tally.lines
        if progress is not None:
            progress(done, len(tasks))
    return Report(pack, baseline, total, max_flips)
