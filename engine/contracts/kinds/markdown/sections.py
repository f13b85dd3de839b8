"""Reading a markdown output: its sections (found by a heading pattern, outside fenced code),
the ids it references, the keywords of a text and soft matching of context items."""

from __future__ import annotations

import re
from bisect import bisect_right
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.core.patterns import PatternError, compile_pattern

if TYPE_CHECKING:
    from engine.contracts.kinds.markdown.model import SectionsCheck, SoftMatch


@dataclass(frozen=True)
class Section:
    """One section matched by a sections check: its id and its text (heading line on)."""

    id: str
    text: str


GROUP = re.compile(r"\{(\d+)\}")
_WORD = re.compile(r"[^\W_]+")
_FENCE = re.compile(r"^[ ]{0,3}(```|~~~)", re.MULTILINE)

MAX_SECTIONS = 10_000
"""The most sections one sections check takes from an output; past it the check fails."""


def keywords(text: str, stop_words: Iterable[str] = ()) -> set[str]:
    """The keywords of a text: its lower-case runs of letters and digits, minus stop words.
    Built word by word: a 60 MB text never becomes a list of its ten million words."""
    stop = {w.lower() for w in stop_words}
    words = {m.group(0) for m in _WORD.finditer(text.lower())}
    return words - stop


def _fenced_spans(text: str) -> list[tuple[int, int]]:
    """(start, end) of the fenced code blocks of a markdown text (an open fence runs on)."""
    spans, opened = [], -1
    for match in _FENCE.finditer(text):
        if opened < 0:
            opened = match.start()
        else:
            spans.append((opened, match.end()))
            opened = -1
    if opened >= 0:
        spans.append((opened, len(text)))
    return spans


def find_sections(text: str, check: SectionsCheck) -> list[Section]:
    """The sections of ``text`` whose heading matches the check's pattern, in order (at most
    ``MAX_SECTIONS + 1``: the check fails past ``MAX_SECTIONS``).

    A section ends at the next line starting with ``until``, or at the next heading of the
    same check: sections never overlap, so what is checked in them costs time and memory
    linear in the text, and finding their ends scans the text once."""
    fences = [] if check.in_fences else _fenced_spans(text)
    fence_starts = [start for start, _ in fences]
    heads: list[tuple[int, int, str]] = []  # start, end of the heading match, id
    for match in compile_pattern(check.heading).finditer(text):
        start = match.start()
        inside = bisect_right(fence_starts, start) - 1
        if inside >= 0 and start < fences[inside][1]:
            continue
        ident = fill_groups(check.id, [match.group(0), *match.groups()])
        heads.append((start, match.end(), ident))
        if len(heads) > MAX_SECTIONS:
            break
    until = "\n" + check.until
    found = []
    for index, (start, after, ident) in enumerate(heads):
        limit = heads[index + 1][0] if index + 1 < len(heads) else len(text)
        end = text.find(until, after, min(len(text), limit + len(until) - 1))
        found.append(Section(ident, text[start : limit if end < 0 else min(end, limit)]))
    return found


def fill_groups(template: str, groups: list[str | None]) -> str:
    """``{0}`` (the whole match) and ``{1}``, ``{2}``... (capture groups) filled."""
    if "{" not in template:
        return template

    def group(g: re.Match[str]) -> str:
        index = int(g.group(1))
        return (groups[index] or "") if index < len(groups) else g.group(0)

    return GROUP.sub(group, template)


def group_count(pattern: str) -> int | None:
    try:
        return int(getattr(compile_pattern(pattern), "groups", 0))
    except PatternError:
        return None


def section_of(text: str, heading: str, ident: str) -> str | None:
    """The text after ``heading`` + whitespace + ``ident``, up to the next ``\\n## ``."""
    start = 0
    while True:
        index = text.find(heading, start)
        if index < 0:
            return None
        after = index + len(heading)
        while after < len(text) and text[after].isspace():
            after += 1
        if text.startswith(ident, after):
            body_start = after + len(ident)
            end = text.find("\n## ", body_start)
            return text[body_start:].strip() if end < 0 else text[body_start:end].strip()
        start = index + 1


def soft_match(
    text: str, item: Any, soft: SoftMatch, words: Callable[[], set[str]] | None = None
) -> bool:
    """Whether an item is softly matched by the text (see ``SoftMatch``); ``words`` gives
    the text's keywords (computed once for all items by the caller)."""
    if not isinstance(item, Mapping):
        return False
    if soft.summary and item.get(soft.summary):
        wanted = keywords(str(item[soft.summary]), soft.stop_words)
        have = words() if words is not None else keywords(text, soft.stop_words)
        if wanted and len(wanted & have) / len(wanted) >= soft.ratio:
            return True
    return any(
        key and item.get(key) and str(item[key]) in text for key in (soft.phrase, soft.location)
    )
