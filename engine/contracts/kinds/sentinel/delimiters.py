"""Opener and closer lines: a template with ``{param}`` and ``{nonce}`` placeholders.

A delimiter line is found without splitting the text into lines: ``str.find`` scans the
whole text once for the template's literal prefix, and only at a candidate that starts a
line is the line cut out and matched in full (trailing whitespace stripped). A 10 MB output
with one block costs two ``str.find`` passes, not ten million line objects.
"""

from __future__ import annotations

from collections.abc import Mapping

from engine.core.patterns import compile_pattern

_PUNCTUATION = frozenset("\\^$.|?*+()[]{}-/#&~!@%=:;,'\"<>`")


def _escape(text: str) -> str:
    """Escape ASCII punctuation (valid in RE2 and stdlib); everything else stands for itself."""
    return "".join("\\" + c if c in _PUNCTUATION else c for c in text)


_HEX = "0123456789ABCDEF"
_DEFAULT_NONCE_TOKEN = "[0-9A-F]{6}"  # the engine's default (SentinelGrammar.nonce_token)


class DelimiterLine:
    """A template bound to param values: the literal prefix of its lines, and how to read
    the nonce of a candidate line (right-stripped), or None when the line is not this
    delimiter.

    With the engine's default nonce token and one ``{nonce}``, a line is read with string
    tests (literal head, six upper-case hex digits, literal tail); otherwise the full
    pattern (group 1 = the nonce) is searched.
    """

    __slots__ = ("nonce_of", "pieces", "prefix", "source")

    def __init__(
        self,
        prefix: str,
        source: str,
        literal: tuple[str, str] | None,
        pieces: tuple[tuple[str, ...], tuple[int, ...]] = ((), ()),
    ) -> None:
        self.prefix = prefix
        self.source = source  # the full pattern of the line (RE2 syntax)
        self.pieces = pieces  # the line's literal text, and where in it the nonce goes
        if literal is None:
            search = compile_pattern(source).search

            def nonce_of(line: str) -> str | None:
                match = search(line)
                return None if match is None else str(match.group(1))
        else:
            head, tail = literal
            start, size = len(head), len(head) + 6 + len(tail)

            def nonce_of(line: str) -> str | None:
                if len(line) != size or not line.startswith(head) or not line.endswith(tail):
                    return None
                nonce = line[start : start + 6]
                return None if nonce.strip(_HEX) else nonce

        self.nonce_of = nonce_of

    def line(self, nonce: str) -> str:
        """The delimiter line itself for ``nonce``: what a near miss is compared with."""
        texts, nonce_at = self.pieces
        parts = list(texts)
        for index in reversed(nonce_at):
            parts.insert(index, nonce)
        return "".join(parts)

    def find(self, text: str) -> list[tuple[int, int, str]]:
        """``(line start, line end, nonce)`` of every line of ``text`` that is this delimiter;
        the end is the index of the line's LF (or the text's length)."""
        prefix = self.prefix
        start = text.find(prefix)
        if start < 0:
            return []
        found: list[tuple[int, int, str]] = []
        nonce_of = self.nonce_of
        find = text.find
        # an empty prefix is found at every line's start: every line is a candidate
        while start >= 0:
            if start == 0 or text[start - 1] == "\n":
                end = find("\n", start)
                line_end = len(text) if end < 0 else end
                nonce = nonce_of(text[start:line_end].rstrip())
                if nonce is not None:
                    found.append((start, line_end, nonce))
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
            self.parts.append((rest[:start], rest[start + 1 : end]))
            rest = rest[end + 1 :]
        self.names = tuple(
            sorted({name for _, name in self.parts if name is not None and name != "nonce"})
        )
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
        pieces: list[str] = []  # the literal text of the line, in order
        nonce_at: list[int] = []  # where in pieces the nonce goes
        prefix: str | None = None
        for literal, name in self.parts:
            if name is None:
                pattern.append(_escape(literal))
                pieces.append(literal)
                prefix = literal if prefix is None else prefix
                break
            if prefix is None:
                prefix = literal
            pattern.append(_escape(literal))
            pieces.append(literal)
            if name == "nonce":
                pattern.append("(" + self.nonce_token + ")")
                nonce_at.append(len(pieces))
            else:
                pattern.append(_escape(values.get(name, "")))
                pieces.append(values.get(name, ""))
        head_tail: tuple[str, str] | None = None
        if self.nonce_token == _DEFAULT_NONCE_TOKEN and len(nonce_at) == 1:
            head_tail = "".join(pieces[: nonce_at[0]]), "".join(pieces[nonce_at[0] :])
        return DelimiterLine(
            prefix or "",
            "^" + "".join(pattern) + "$",
            head_tail,
            (tuple(pieces), tuple(nonce_at)),
        )
