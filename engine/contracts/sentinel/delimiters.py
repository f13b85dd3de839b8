"""Opener and closer lines: a template with ``{param}`` and ``{nonce}`` placeholders.

A delimiter line is found without splitting the text into lines: ``str.find`` scans the
whole text once for the template's literal prefix, and only at a candidate that starts a
line is the line cut out and matched in full (trailing whitespace stripped). A 10 MB output
with one block costs two ``str.find`` passes, not ten million line objects.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from engine.patterns import CompiledPattern, compile_pattern

_PUNCTUATION = frozenset("\\^$.|?*+()[]{}-/#&~!@%=:;,'\"<>`")


def _escape(text: str) -> str:
    """Escape ASCII punctuation (valid in RE2 and stdlib); everything else stands for itself."""
    return "".join("\\" + c if c in _PUNCTUATION else c for c in text)


@dataclass(frozen=True)
class DelimiterLine:
    """A template bound to param values: the literal prefix of its lines and the full pattern
    a line (right-stripped) must match; group 1 is the nonce."""

    prefix: str
    pattern: CompiledPattern

    def find(self, text: str) -> list[tuple[int, int, str]]:
        """``(line start, line end, nonce)`` of every line of ``text`` that is this delimiter;
        the end is the index of the line's LF (or the text's length)."""
        found: list[tuple[int, int, str]] = []
        search = self.pattern.search
        find = text.find
        prefix = self.prefix
        if not prefix:  # every line is a candidate
            start = 0
            while True:
                end = find("\n", start)
                line_end = len(text) if end < 0 else end
                match = search(text[start:line_end].rstrip())
                if match is not None:
                    found.append((start, line_end, match.group(1)))
                if end < 0:
                    return found
                start = end + 1
        start = find(prefix)
        while start >= 0:
            if start == 0 or text[start - 1] == "\n":
                end = find("\n", start)
                line_end = len(text) if end < 0 else end
                match = search(text[start:line_end].rstrip())
                if match is not None:
                    found.append((start, line_end, match.group(1)))
                if end < 0:
                    break
                start = find(prefix, end + 1)
            else:
                start = find(prefix, start + 1)
        return found


class DelimiterTemplate:
    """An opener or closer template of a contract, bound to params on demand (cached)."""

    __slots__ = ("_bound", "names", "nonce_token", "parts")

    def __init__(self, template: str, nonce_token: str) -> None:
        self.nonce_token = nonce_token
        self.parts: list[tuple[str, str | None]] = []  # (literal, placeholder after it)
        rest = template
        while rest:
            start = rest.find("{")
            end = rest.find("}", start)
            if start < 0 or end < 0:
                self.parts.append((rest, None))
                break
            self.parts.append((rest[:start], rest[start + 1:end]))
            rest = rest[end + 1:]
        self.names = tuple(sorted({name for _, name in self.parts
                                   if name is not None and name != "nonce"}))
        self._bound: dict[tuple[str, ...], DelimiterLine] = {}

    def bind(self, params: Mapping[str, str]) -> DelimiterLine:
        """The delimiter for these param values (a missing param stands for '')."""
        key = tuple(params.get(name, "") for name in self.names)
        bound = self._bound.get(key)
        if bound is None:
            if len(self._bound) >= 4096:
                self._bound.clear()
            bound = self._bound[key] = self._build(dict(zip(self.names, key, strict=True)))
        return bound

    def _build(self, values: Mapping[str, str]) -> DelimiterLine:
        pattern: list[str] = []
        prefix: str | None = None
        for literal, name in self.parts:
            if name is None:
                pattern.append(_escape(literal))
                prefix = literal if prefix is None else prefix
                break
            if prefix is None:
                prefix = literal
            pattern.append(_escape(literal))
            if name == "nonce":
                pattern.append("(" + self.nonce_token + ")")
            else:
                pattern.append(_escape(values.get(name, "")))
        return DelimiterLine(prefix or "", compile_pattern("^" + "".join(pattern) + "$"))
