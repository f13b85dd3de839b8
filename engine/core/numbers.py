"""Numbers as the engine holds them: finite, and integers within 64 bits.

A ledger column is a 64-bit SQLite INTEGER and JSON (RFC 8259) has no NaN or infinity, so
a number past either is refused where it enters (a pack, a context, an option, a record)
rather than failing later where it is stored or printed.
"""

from __future__ import annotations

import json
import math
from typing import Any

INT64_MIN = -(2**63)
INT64_MAX = 2**63 - 1
"""The integers the ledger (SQLite INTEGER) and the engine's numeric options hold."""

MAX_INT_CHARS = 24
"""Longer than any 64-bit integer however written (sign, 0x, 0o): such text is refused
before it is converted, so a number of a million digits costs nothing to refuse."""


def out_of_range(value: object) -> str | None:
    """Why a number read from input cannot be used (a NaN, an infinity, an integer beyond
    64 bits), or None for any other value. Booleans are not numbers here."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and not math.isfinite(value):
        return f"{value} is not a finite number"
    if isinstance(value, int) and not INT64_MIN <= value <= INT64_MAX:
        return f"the integer is out of range ({INT64_MIN}..{INT64_MAX})"
    return None


def first_out_of_range(value: object) -> tuple[tuple[str | int, ...], str] | None:
    """The key path of the first number in ``value`` (JSON-like data) that
    ``out_of_range`` refuses, and why; None when every number is usable. No recursion."""
    stack: list[tuple[object, tuple[str | int, ...]]] = [(value, ())]
    while stack:
        node, path = stack.pop()
        if isinstance(node, dict):
            stack.extend((child, (*path, str(key))) for key, child in reversed(node.items()))
        elif isinstance(node, list | tuple):
            stack.extend((child, (*path, i)) for i, child in reversed(list(enumerate(node))))
        else:
            why = out_of_range(node)
            if why is not None:
                return path, why
    return None


class NumberOutOfRange(ValueError):
    """A number written in a pack or a context that the engine cannot hold (says why)."""


def int_of_text(text: str) -> int:
    """A YAML 1.2 core integer (decimal, ``0x``, ``0o``) within 64 bits, else
    ``NumberOutOfRange``; a long one is refused before it is converted."""
    body = text.lstrip("+-")
    if len(text) > MAX_INT_CHARS:
        raise NumberOutOfRange(f"the integer {text[:20]}... ({len(body)} digits) is out of range")
    if body[:2] in ("0x", "0o"):
        number = int(body[2:], 16 if body[1] == "x" else 8)
        number = -number if text.startswith("-") else number
    else:
        number = int(text, 10)
    if out_of_range(number) is not None:
        raise NumberOutOfRange(f"the integer {text} is out of range ({INT64_MIN}..{INT64_MAX})")
    return number


def float_of_text(text: str) -> float:
    """A YAML 1.2 core float that is finite, else ``NumberOutOfRange`` (``.inf``, ``.nan``,
    ``1e999``)."""
    if "inf" in text.lower() or "nan" in text.lower():
        raise NumberOutOfRange(f"{text} is not a finite number (infinities and NaN are refused)")
    number = float(text)
    if out_of_range(number) is not None:
        raise NumberOutOfRange(f"{text[:40]} is beyond the range of a number (about 1.8e308)")
    return number


def _int(text: str) -> int:
    if len(text) > MAX_INT_CHARS:
        raise ValueError(f"an integer of {len(text)} digits is out of range")
    number = int(text)
    if not INT64_MIN <= number <= INT64_MAX:
        raise ValueError(f"the integer {text} is out of range ({INT64_MIN}..{INT64_MAX})")
    return number


def _float(text: str) -> float:
    number = float(text)
    if not math.isfinite(number):
        raise ValueError(f"{text[:40]} is beyond the range of a number")
    return number


def _constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number (NaN and infinities are refused)")


_DECODER = json.JSONDecoder(parse_int=_int, parse_float=_float, parse_constant=_constant)


def strict_loads(text: str | bytes) -> Any:
    """JSON with finite numbers and integers within 64 bits only: ``ValueError`` saying
    which number is refused (``json.JSONDecodeError`` for JSON that does not parse)."""
    if isinstance(text, bytes):
        text = text.decode("utf-8", errors="replace")
    return _DECODER.decode(text)
