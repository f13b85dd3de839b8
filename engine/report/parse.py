"""The formats of a parse result, in a module of their own: `rules parse` is the command
that must start fastest, so it imports none of the other formats' tables and cases."""

from __future__ import annotations

import json as _json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from engine.core.results import ParseResult


def text(result: ParseResult) -> str:
    """The parsed data as one JSON line (nothing when the parse failed: the command says
    why on stderr)."""
    return _json.dumps(result.data, ensure_ascii=False, allow_nan=False) + "\n" if result.ok else ""


def json(result: ParseResult) -> str:
    """The whole parse result on one line (`rules parse --format json`)."""
    return _json.dumps(result.to_json(), ensure_ascii=False, allow_nan=False) + "\n"
