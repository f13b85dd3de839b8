"""Where in a template a Jinja syntax error is: its line and column.

Jinja's TemplateSyntaxError carries a line only, so a finding said `file:LINE:1`. The
template is parsed again here with a token stream that remembers where each token starts,
and the token the parser stopped at gives the column (for an error of the lexer itself,
the end of the last token it read, or the offset its message names).
"""

from __future__ import annotations

import re
from collections.abc import Iterator

from jinja2 import TemplateSyntaxError
from jinja2.lexer import Token, TokenStream
from jinja2.parser import Parser

from engine.sandbox.environment import ENVIRONMENT

_NEWLINES = re.compile(r"\r\n|\r|\n")
_LEXER_OFFSET = re.compile(r" at (\d+)$")


def syntax_error_position(source: str, error: TemplateSyntaxError) -> tuple[int, int]:
    """1-based line and column of ``error`` (raised by parsing ``source``); the error's
    own line and column 1 when the place cannot be told."""
    line = error.lineno or 1
    text = "\n".join(_NEWLINES.split(source))  # as Jinja's lexer reads it
    offset = _offset(text)
    lexed = _LEXER_OFFSET.search(error.message or "")
    if lexed is not None:
        offset = int(lexed.group(1))
    if offset is None or offset > len(text) or text.count("\n", 0, offset) + 1 != line:
        return line, 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _offset(text: str) -> int | None:
    """The offset of the token the parser stopped at, or None when it parses."""
    lexer = ENVIRONMENT.lexer
    place = {"start": 0, "end": 0, "lexer": 0}
    starts: list[tuple[Token, int]] = []

    def raw() -> Iterator[tuple[int, str, str]]:
        try:
            for lineno, kind, value in lexer.tokeniter(text, None):
                # A token's text is found from where the last one ended: the lexer drops
                # the whitespace it strips (lstrip_blocks), so lengths alone would drift.
                found = text.find(value, place["end"]) if value else -1
                start = found if found >= 0 else place["end"]
                place["start"], place["end"] = start, start + len(value)
                yield lineno, kind, value
        except TemplateSyntaxError:
            place["lexer"] = 1  # the lexer stopped right after the last token it read
            raise

    def tokens() -> Iterator[Token]:
        for token in lexer.wrap(raw()):
            starts.append((token, place["start"]))
            yield token

    try:
        # a parser and a stream lex their first token as they are made: a template broken
        # there raises before anything is read, and its place is the error's line
        parser = Parser(ENVIRONMENT, text)
        parser.stream = TokenStream(tokens(), None, None)
    except TemplateSyntaxError:
        return None
    try:
        parser.parse()
    except TemplateSyntaxError:
        if place["lexer"]:
            return place["end"]
        current = parser.stream.current
        return next((start for token, start in starts if token is current), place["end"])
    except RecursionError:
        return None
    return None
