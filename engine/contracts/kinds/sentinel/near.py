"""Near misses of a delimiter line: what to tell a model whose opener or closer was off by a
character, so a repair fixes that line instead of writing the block again from nothing.

Only run when a delimiter was not found (a failing parse), and over a bounded number of
candidate lines: those that hold the block's name. A passing parse never comes here.
"""

from __future__ import annotations

import difflib
from typing import NamedTuple

MIN_RATIO = 0.75
"""How alike a line and the expected delimiter must be to be named as a near miss."""

MAX_CANDIDATES = 50
"""Lines looked at, at most: an output that names the block on every line costs no more."""

_CONTEXT = 3  # characters of agreement shown on each side of a difference


class NearMiss(NamedTuple):
    """A line that nearly is the expected delimiter: its number, its text, what differs."""

    line: int
    found: str
    difference: str


def near_miss(text: str, expected: str, keyword: str, skip: frozenset[int]) -> NearMiss | None:
    """The line of ``text`` most like ``expected`` among those holding ``keyword`` (lines
    starting at an offset in ``skip`` are other delimiters, left out), when alike enough."""
    if not keyword or "\n" in expected:
        return None
    best: tuple[float, int, str] | None = None
    seen = 0
    position = text.find(keyword)
    while position >= 0 and seen < MAX_CANDIDATES:
        start = text.rfind("\n", 0, position) + 1
        end = text.find("\n", position)
        end = len(text) if end < 0 else end
        seen += 1
        if start not in skip:
            # a line that runs on past the delimiter (a model that writes the whole block on
            # one line) is compared by its start, as long as the delimiter and a little more
            line = text[start : min(end, start + len(expected) + _CONTEXT)].rstrip()
            if line:
                ratio = difflib.SequenceMatcher(None, line, expected, autojunk=False).ratio()
                if ratio >= MIN_RATIO and (best is None or ratio > best[0]):
                    best = ratio, start, line
        position = text.find(keyword, end)
    if best is None:
        return None
    _, start, line = best
    number = text.count("\n", 0, start) + 1
    return NearMiss(number, line, difference(line, expected))


def difference(found: str, expected: str) -> str:
    """The first place ``found`` departs from ``expected``, with a few characters of
    agreement around it so the model sees where: "`0>>` where it should be `0>>>`"."""
    matcher = difflib.SequenceMatcher(None, found, expected, autojunk=False)
    changes = [op for op in matcher.get_opcodes() if op[0] != "equal"]
    if found.strip() == expected:
        return "it starts with spaces: a delimiter line starts at the line's first character"
    if not changes:
        return "it differs only in spaces around it"
    _, i1, i2, j1, j2 = changes[0]
    left = min(_CONTEXT, i1, j1)
    right = min(_CONTEXT, len(found) - i2, len(expected) - j2)
    shown = found[i1 - left : i2 + right]
    wanted = expected[j1 - left : j2 + right]
    more = len(changes) - 1
    tail = f" (and {more} more difference{'s' if more > 1 else ''})" if more else ""
    return f"`{shown}` where it should be `{wanted}`{tail}"
