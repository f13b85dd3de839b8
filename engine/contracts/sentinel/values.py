"""The value grammar of sentinel payloads: field values and key=value item tokens."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass


class ValueError_(Exception):
    """A value breaks the grammar; ``code`` names the message, ``values`` fill it."""

    def __init__(self, code: str, **values: object) -> None:
        super().__init__(code)
        self.code = code
        self.values = values


@dataclass(frozen=True)
class FieldValue:
    text: str
    quoted: bool


def parse_value(raw: str, quote: str, escapes: Mapping[str, str]) -> FieldValue:
    """Strip, then decode a quoted value (escapes) or take an unquoted one as it is."""
    value = raw.strip()
    if not value.startswith(quote):
        return FieldValue(value, False)
    if len(value) < 2 or not value.endswith(quote):
        raise ValueError_("unmatched_quote")
    inner = value[1:-1]
    out: list[str] = []
    index = 0
    while index < len(inner):
        char = inner[index]
        if char == quote:
            raise ValueError_("unescaped_quote")
        if char == "\\":
            if index + 1 == len(inner):
                raise ValueError_("unterminated_escape")
            follower = inner[index + 1]
            if follower not in escapes:
                raise ValueError_("invalid_escape", char=follower)
            out.append(escapes[follower])
            index += 2
            continue
        out.append(char)
        index += 1
    return FieldValue("".join(out), True)


def tokenize(text: str, quote: str) -> list[str]:
    """Split on runs of SPACE/TAB outside quoted runs; a backslash in a run escapes one char."""
    tokens: list[str] = []
    current: list[str] = []
    in_quote = False
    index = 0
    length = len(text)
    while index < length:
        char = text[index]
        if in_quote:
            if char == "\\":
                if index + 1 >= length:
                    raise ValueError_("unterminated_token")
                current.append(text[index:index + 2])
                index += 2
                continue
            current.append(char)
            if char == quote:
                in_quote = False
        elif char in " \t":
            if current:
                tokens.append("".join(current))
                current = []
        else:
            if char == quote:
                in_quote = True
            current.append(char)
        index += 1
    if in_quote:
        raise ValueError_("unterminated_token")
    if current:
        tokens.append("".join(current))
    return tokens
