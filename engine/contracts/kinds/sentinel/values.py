"""The value grammar of sentinel payloads: field values and key=value item tokens.

Both functions have a fast path for the common case and fall back to a careful scan only
when the text needs it: a quoted value without a backslash is a slice (no decoding loop),
and an item line is split by ``str.find`` on quotes rather than character by character.
"""

from __future__ import annotations

from collections.abc import Mapping


class ValueError_(Exception):
    """A value breaks the grammar; ``code`` names the message, ``values`` fill it."""

    def __init__(self, code: str, **values: object) -> None:
        super().__init__(code)
        self.code = code
        self.values = values


def parse_value(raw: str, quote: str, escapes: Mapping[str, str]) -> tuple[str, bool]:
    """``(text, quoted)``: strip, then decode a quoted value (escapes) or take an unquoted one
    as it is. The first offending character from the left decides the error."""
    value = raw.strip()
    if not value.startswith(quote):
        return value, False
    if len(value) < 2 or not value.endswith(quote):
        raise ValueError_("unmatched_quote")
    inner = value[1:-1]
    if "\\" not in inner:  # fast path: nothing to decode
        if quote in inner:
            raise ValueError_("unescaped_quote")
        return inner, True
    return _decode(inner, quote, escapes), True


def _decode(inner: str, quote: str, escapes: Mapping[str, str]) -> str:
    out: list[str] = []
    start = 0
    end = len(inner)
    while True:
        backslash = inner.find("\\", start)
        chunk = inner[start:] if backslash < 0 else inner[start:backslash]
        if quote in chunk:
            raise ValueError_("unescaped_quote")
        out.append(chunk)
        if backslash < 0:
            return "".join(out)
        if backslash + 1 == end:
            raise ValueError_("unterminated_escape")
        follower = inner[backslash + 1]
        if follower not in escapes:
            raise ValueError_("invalid_escape", char=follower)
        out.append(escapes[follower])
        start = backslash + 2


def tokenize(text: str, quote: str) -> list[str]:
    """Split on runs of SPACE/TAB outside quoted runs; a backslash in a run escapes one char.

    Tokens keep their quotes and escapes verbatim. Fast paths: without a quote, one
    ``str.split``; without a backslash, quoted runs are the odd pieces of
    ``text.split(quote)``. Only a line with both takes the escape-aware scan.
    """
    if quote not in text:  # fast path: no quoted run at all
        if "\t" in text:
            text = text.replace("\t", " ")
        return [token for token in text.split(" ") if token]
    if "\\" in text:
        return _tokenize_escaped(text, quote)
    pieces = text.split(quote)
    if not len(pieces) % 2:  # an odd number of quotes: the last run never closes
        raise ValueError_("unterminated_token")
    tokens: list[str] = []
    current = ""  # the token being built (continues across a quoted run)
    inside = False
    for piece in pieces:
        if inside:
            current += quote + piece + quote
        elif " " not in piece and "\t" not in piece:
            current += piece
        else:
            words = piece.replace("\t", " ").split(" ")
            current += words[0]
            if current:
                tokens.append(current)
            tokens.extend([word for word in words[1:-1] if word])
            current = words[-1]
        inside = not inside
    if current:
        tokens.append(current)
    return tokens


def _tokenize_escaped(text: str, quote: str) -> list[str]:
    """``tokenize`` for a line holding quotes and backslashes: ``str.find`` from quote to
    quote, skipping escaped characters inside quoted runs."""
    tokens: list[str] = []
    current = ""  # the token being built (continues across a quoted run)
    position = 0
    length = len(text)
    find = text.find
    while True:
        opening = find(quote, position)
        chunk = text[position:] if opening < 0 else text[position:opening]
        if "\t" in chunk:
            chunk = chunk.replace("\t", " ")
        pieces = chunk.split(" ")
        if len(pieces) == 1:
            current += chunk
        else:
            current += pieces[0]
            if current:
                tokens.append(current)
            tokens.extend(piece for piece in pieces[1:-1] if piece)
            current = pieces[-1]
        if opening < 0:
            break
        # inside a quoted run: find its closing quote, skipping backslash escapes
        index = opening + 1
        while True:
            closing = find(quote, index)
            backslash = find("\\", index, closing if closing >= 0 else length)
            if backslash < 0:
                break
            if backslash + 1 >= length:
                raise ValueError_("unterminated_token")
            index = backslash + 2
        if closing < 0:
            raise ValueError_("unterminated_token")
        current += text[opening : closing + 1]
        position = closing + 1
    if current:
        tokens.append(current)
    return tokens
