"""Example tiers for retry prompts: selection by failure type, scoring, budgets, truncation.

Tier 1 (canonical) are files of the pack or a section of a document the context names;
tier 2 (session) are earlier rounds' outputs in the session folder (or, for a session
without a folder, the outputs its ledger accepted), most recent first, scored by rules
from the pack; tier 3 (template) are structural templates of the pack; the reviewed tier are outputs
people wrote for the block when they edited a review (``ReviewedExample``, newest first),
ranked where the selection table puts it (above the session tier, for seed 000's history).
The pack's ``selection`` table says, per failure type, which tiers to try in which order.

Which rounds tier 2 may use is passed in (``EarlierRounds``): the caller that owns the
session's ledger says which rounds it accepted, or (a session without a folder) gives the
accepted rounds' outputs as a mapping round -> text; nothing here reads the ledger.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.core.patterns import extract_ids
from engine.core.placeholders import fill

if TYPE_CHECKING:
    from engine.format.vocabulary import SessionKeys
    from engine.prompts.examples.model import Examples, ScoreRule, SelectionStep, SessionExamples

_ROUND_FIELD = re.compile(r"\{(n|block)(?::0(\d)d)?\}")
MAX_EXAMPLE_BYTES = 2 * 1024 * 1024


@dataclass(frozen=True)
class Example:
    """The example chosen for a prompt, where it came from, and whether it was cut."""

    text: str
    source: str
    tier: str
    round: int | None = None
    header: str = ""
    footer: str = ""
    warnings: tuple[str, ...] = ()  # sources that could not be read on the way here

    def fitted(self, budget_chars: int, priority: list[str], notice: str) -> tuple[str, bool]:
        """Header + body + footer within ``budget_chars``; only the body is ever cut."""
        room = max(budget_chars - len(self.header) - len(self.footer), 0)
        body, cut = truncate_example(self.text, room, priority, notice)
        return self.header + body + self.footer, cut


@dataclass(frozen=True)
class EarlierRounds:
    """Where example tier 2 looks: the session folder, the current round, and the rounds
    whose output the session's ledger accepted (None: no ledger, every round counts).
    Without a folder, ``outputs`` are the accepted rounds' outputs, by round."""

    folder: Path | None
    current: int
    accepted: frozenset[int] | None = None
    outputs: Mapping[int, str] | None = None


def earlier_rounds(
    keys: SessionKeys, context: Mapping[str, Any], accepted: Collection[int] | None = None
) -> EarlierRounds | None:
    """The session folder and round from the context keys the pack names; None when the
    pack names none or the context lacks them. ``accepted`` may be a mapping of the
    accepted rounds to their outputs (a session in a ledger, without a folder): tier 2
    then reads those when the context names no session folder."""
    folder = context.get(keys.folder) if keys.folder else None
    current = context.get(keys.round) if keys.round else None
    if not isinstance(current, int):
        return None
    rounds = frozenset(accepted) if accepted is not None else None
    if folder:
        return EarlierRounds(Path(str(folder)), current, rounds)
    if isinstance(accepted, Mapping):
        return EarlierRounds(None, current, rounds, dict(accepted))
    return None


@dataclass(frozen=True)
class ReviewedExample:
    """An output a person wrote for the block (an edited review), with its provenance:
    the review's id, who and when. The caller that owns the ledger reads them."""

    text: str
    review: int
    by: str
    at: str


@dataclass(frozen=True)
class Candidate:
    round: int
    score: int
    text: str


def round_path(pattern: str, n: int, block: str) -> str:
    """Fill ``{n}``, ``{n:03d}`` and ``{block}`` (nothing else is interpreted)."""

    def replace(match: re.Match[str]) -> str:
        if match.group(1) == "block":
            return block
        width = int(match.group(2) or 0)
        return str(n).zfill(width)

    return _ROUND_FIELD.sub(replace, pattern)


def _read(path: Path) -> str | None:
    try:
        if not path.is_file() or path.stat().st_size > MAX_EXAMPLE_BYTES:
            return None
        return path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return None


class PackFiles:
    """Example files of a pack, read once (by pack-relative path); a file that is missing,
    unreadable or over the size limit reads as None, as when it is read at render.

    ``paths`` maps each path to the folder it is relative to (the folder of the pack file
    that names it), or lists paths relative to ``root``.
    """

    def __init__(self, root: Path, paths: Iterable[str] | Mapping[str, Path]) -> None:
        self.root = root
        folders = paths if isinstance(paths, Mapping) else dict.fromkeys(paths, root)
        self._texts = {path: _read(folder / path) for path, folder in folders.items()}

    def text(self, path: str) -> str | None:
        if path in self._texts:
            return self._texts[path]
        return _read(self.root / path)


def example_files(examples: Examples) -> dict[str, tuple[str | int, ...]]:
    """The pack files the example tiers may use (canonical files and structural templates),
    each with the key path that names it."""
    files: dict[str, tuple[str | int, ...]] = {}
    for block, entries in examples.canonical.items():
        for index, entry in enumerate(entries):
            if entry.file is not None:
                files.setdefault(entry.file, ("examples", "canonical", block, index, "file"))
    for block, path in examples.templates.items():
        files.setdefault(path, ("examples", "templates", block))
    return files


def section_by_heading(document: str, heading: str) -> str | None:
    """The section under the line ``heading``, up to the next heading of the same or a
    higher level outside code fences. When the section holds a fenced block, its content
    is the example (specs show examples in fences)."""
    lines = document.splitlines()
    level = len(heading) - len(heading.lstrip("#"))
    for start, line in enumerate(lines):
        if line.strip() != heading.strip():
            continue
        body: list[str] = []
        in_fence = False
        for current in lines[start + 1 :]:
            stripped = current.lstrip()
            if stripped.startswith("```"):
                in_fence = not in_fence
                body.append(current)
                continue
            hashes = len(stripped) - len(stripped.lstrip("#"))
            if not in_fence and 0 < hashes <= level and stripped[hashes : hashes + 1] == " ":
                break
            body.append(current)
        text = "\n".join(body)
        inner = _first_fence(text)
        return (inner if inner is not None else text.strip()) + "\n"
    return None


def _first_fence(text: str) -> str | None:
    lines = text.splitlines()
    for start, line in enumerate(lines):
        if line.lstrip().startswith("```"):
            for end in range(start + 1, len(lines)):
                if lines[end].lstrip().startswith("```"):
                    return "\n".join(lines[start + 1 : end])
            return None
    return None


def score(
    rules: list[ScoreRule],
    text: str,
    failure_type: str,
    ids: Mapping[str, str],
    context: Mapping[str, Any],
) -> int:
    total = 0
    for rule in rules:
        if rule.failure and failure_type not in rule.failure:
            continue
        if rule.contains is not None:
            total += rule.points if rule.contains in text else 0
        elif rule.per_id is not None:
            count = len(extract_ids(text, ids[rule.per_id])) if rule.per_id in ids else 0
            points = count * rule.points
            total += min(points, rule.max) if rule.max is not None else points
        elif rule.length_min is not None or rule.length_max is not None:
            low = rule.length_min if rule.length_min is not None else 0
            high = rule.length_max if rule.length_max is not None else len(text)
            total += rule.points if low <= len(text) <= high else 0
        elif rule.references_any_of is not None:
            wanted = {str(x) for x in context.get(rule.references_any_of) or []}
            pattern = ids.get(rule.ids or "")
            found = set(extract_ids(text, pattern)) if pattern else set()
            total += rule.points if found & wanted else 0
    return total


@dataclass(frozen=True)
class _Wanted:
    """What an example is wanted for: the block and failure type, the context and id kinds
    (for scoring), the session's earlier rounds. Sources that cannot be read on the way add
    to ``warnings``."""

    block: str
    failure_type: str
    context: Mapping[str, Any]
    ids: Mapping[str, str]
    rounds: EarlierRounds | None
    reviewed: Sequence[ReviewedExample] = ()
    warnings: list[str] = field(default_factory=list)

    def score(self, rules: list[ScoreRule], text: str) -> int:
        return score(rules, text, self.failure_type, self.ids, self.context)


def session_candidates(
    spec: SessionExamples, rounds: EarlierRounds, wanted: _Wanted
) -> list[Candidate]:
    """Earlier rounds' outputs that may serve as examples, best first (ties: most recent)."""
    root, block, context = rounds.folder, wanted.block, wanted.context
    excluded = {int(r) for r in context.get(spec.exclude_rounds_from or "", None) or []}
    allowed = context.get(spec.require_rounds_from or "", None)
    accepted = rounds.accepted if spec.validated_in_ledger else None
    candidates = []
    for n in range(rounds.current - 1, 0, -1):
        if n in excluded or (allowed is not None and n not in {int(r) for r in allowed}):
            continue
        if accepted is not None and n not in accepted:
            continue
        if root is None:  # a session without a folder: its ledger's accepted outputs
            text = (rounds.outputs or {}).get(n)
            if text is not None:
                candidates.append(Candidate(n, wanted.score(spec.scoring, text), text))
            continue
        if any((root / round_path(p, n, block)).exists() for p in spec.exclude_if_exists):
            continue
        if not all((root / round_path(p, n, block)).exists() for p in spec.require_exists):
            continue
        text = _read(root / round_path(spec.path, n, block))
        if text is None:
            continue
        candidates.append(Candidate(n, wanted.score(spec.scoring, text), text))
    candidates.sort(key=lambda c: (c.score, c.round), reverse=True)
    return candidates


def _id_list(examples: Examples, context: Mapping[str, Any]) -> str:
    listed = context.get(examples.id_list_context or "") or []
    return examples.id_list_header + "\n" + "".join(f"- {i}\n" for i in listed)


def _canonical(examples: Examples, files: PackFiles, wanted: _Wanted) -> str | None:
    """The first canonical example of the block that can be read; a document named by the
    context that cannot be read adds a warning and the next entry (or tier) is tried."""
    for entry in examples.canonical.get(wanted.block, []):
        if entry.file is not None:
            text = files.text(entry.file)
        else:
            document = wanted.context.get(entry.from_context or "")
            if not document:
                continue
            source = _read(Path(str(document)))
            if source is None:
                wanted.warnings.append(
                    f"context key {entry.from_context!r}: cannot read {document}; "
                    "the next example source was used"
                )
                continue
            text = section_by_heading(source, entry.heading or "")
        if text:
            return text
    return None


def _step(
    step: SelectionStep, examples: Examples, files: PackFiles, wanted: _Wanted
) -> Example | None:
    if step.tier == "none":
        return Example("", step.source, "none")
    if step.tier == "canonical":
        text = _canonical(examples, files, wanted)
        found = Example(text, step.source, "canonical") if text else None
    elif step.tier == "template":
        path = examples.templates.get(wanted.block)
        text = files.text(path) if path else None
        found = Example(text, step.source, "template") if text else None
    elif step.tier == "reviewed":
        if not wanted.reviewed:
            return None
        newest = wanted.reviewed[0]
        header = fill(
            examples.reviewed.provenance,
            {"review": newest.review, "by": newest.by, "at": newest.at},
        )
        found = Example(newest.text, step.source, "reviewed", header=header)
    else:
        spec = examples.session
        if spec is None or wanted.rounds is None:
            return None
        candidates = session_candidates(spec, wanted.rounds, wanted)
        if not candidates:
            return None
        best = candidates[0]
        pattern = wanted.ids.get(spec.provenance_ids or "")
        referenced = extract_ids(best.text, pattern) if pattern else []
        header = fill(
            spec.provenance,
            {"round": best.round, "ids": ", ".join(referenced) or spec.provenance_no_ids},
        )
        found = Example(best.text, step.source, "session", best.round, header=header)
    if found is None or step.id_list == "no":
        return found
    listing = _id_list(examples, wanted.context)
    if step.id_list == "prepend":
        return Example(
            found.text,
            found.source,
            found.tier,
            found.round,
            header=f"{listing}\n{found.header}",
            footer=found.footer,
        )
    return Example(
        found.text,
        found.source,
        found.tier,
        found.round,
        header=found.header,
        footer=f"{found.footer}\n\n{listing}",
    )


def select_example(
    examples: Examples,
    pack: Path | PackFiles,
    block: str,
    failure_type: str,
    context: Mapping[str, Any],
    ids: Mapping[str, str],
    rounds: EarlierRounds | None = None,
    reviewed: Sequence[ReviewedExample] = (),
) -> Example:
    """The first tier of the failure type's selection order that has an example.

    ``pack`` is the pack's example files read at load, or the pack folder to read them from;
    without ``rounds`` tier 2 (earlier rounds of the session) has nothing to offer, without
    ``reviewed`` the reviewed tier neither.
    """
    files = pack if isinstance(pack, PackFiles) else PackFiles(pack, ())
    steps = examples.selection.get(failure_type) or examples.selection.get("default") or []
    wanted = _Wanted(block, failure_type, context, ids, rounds, tuple(reviewed))
    for step in steps:
        found = _step(step, examples, files, wanted)
        if found is not None:
            warnings = tuple(wanted.warnings)
            # the usual case, nothing unreadable on the way: the example as found (a
            # frozen dataclass's replace: 4% of what rendering a repair prompt costs)
            return found if found.warnings == warnings else replace(found, warnings=warnings)
    return Example("", "No example available", "none", warnings=tuple(wanted.warnings))


# ------------------------------------------------------------------ budgets and truncation


def _sections(text: str) -> list[tuple[str, str]]:
    """(heading line, whole section text) for each markdown heading, in document order."""
    out: list[tuple[str, str]] = []
    current: list[str] = []
    heading = ""
    for line in text.splitlines():
        if line.startswith("#"):
            if current:
                out.append((heading, "\n".join(current).strip()))
            heading, current = line, [line]
        else:
            current.append(line)
    if current:
        out.append((heading, "\n".join(current).strip()))
    return out


def _abbreviate(section: str, room: int) -> str | None:
    """The heading and first paragraph of a section, cut to ``room`` characters."""
    marker = " [...]"
    lines = section.split("\n", 1)
    heading = lines[0]
    body = lines[1].strip() if len(lines) > 1 else ""
    first = body.split("\n\n", 1)[0]
    text = f"{heading}\n\n{first}" if first else heading
    if len(text) <= room:
        return text
    if room <= len(heading) + len(marker) + 2:
        return None
    return text[: room - len(marker)] + marker


def truncate_example(
    text: str, budget_chars: int, priority: list[str], notice: str
) -> tuple[str, bool]:
    """Fit ``text`` into ``budget_chars``: as is, else by sections in priority order (the one
    that overflows abbreviated), else a hard cut with ``notice``. Never over the budget."""
    if len(text) <= budget_chars:
        return text, False
    sections = _sections(text)
    kept: list[str] = []
    used = 0
    for name in priority:
        match = next((body for head, body in sections if head.startswith(name)), None)
        if match is None:
            continue
        joiner = 2 if kept else 0
        if used + joiner + len(match) <= budget_chars:
            kept.append(match)
            used += joiner + len(match)
            continue
        short = _abbreviate(match, budget_chars - used - joiner)
        if short:
            kept.append(short)
        break
    if kept:
        return "\n\n".join(kept), True
    return text[: max(budget_chars - len(notice), 0)] + notice[:budget_chars], True
