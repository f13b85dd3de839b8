"""Patterns from packs, compiled on RE2: matching time is linear in the input, always.

A shared pack cannot make the engine backtrack for minutes on a hostile output: constructs
that need backtracking (look-arounds, back-references) are refused when the pack is checked.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any, Protocol

import re2

_OPTIONS = re2.Options()
_OPTIONS.log_errors = False


class PatternError(ValueError):
    """A pattern RE2 cannot compile; the message names the construct."""


class CompiledPattern(Protocol):
    def search(self, text: str) -> Any: ...

    def fullmatch(self, text: str) -> Any: ...

    def finditer(self, text: str) -> Any: ...


@lru_cache(maxsize=4096)
def compile_pattern(pattern: str) -> CompiledPattern:
    """Compile ``pattern`` with RE2 or raise ``PatternError`` saying why."""
    try:
        compiled: CompiledPattern = re2.compile(pattern, options=_OPTIONS)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise PatternError(str(detail)) from None
    except (TypeError, ValueError) as exc:
        raise PatternError(str(exc)) from None
    return compiled


def search(pattern: str, text: str) -> bool:
    return compile_pattern(pattern).search(text) is not None
