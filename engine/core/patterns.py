"""Patterns from packs, matched in time linear in the input, always.

Packs write patterns in RE2 syntax. A shared pack must never make the engine backtrack for
minutes on a hostile output, so every pattern runs on one of two engines:

* **stdlib ``re``** when a static check *proves* the pattern cannot backtrack
  super-linearly and its meaning is the same in both engines (``engine.core.pattern_plan``
  decides). A pattern it cannot prove safe is not rejected, it simply runs on RE2.
  Stdlib ``re`` costs a tenth of the RE2 wrapper per call on short lines, which is what the
  sentinel grammars do all day.
* **RE2** otherwise. ``re2`` is imported only when a pattern needs it (start-up time matters).

Constructs RE2 cannot compile (look-arounds, back-references) raise ``PatternError``.
"""

from __future__ import annotations

import re
from functools import lru_cache
from typing import Any, Protocol

from engine.core.pattern_plan import plan_pattern


class PatternError(ValueError):
    """A pattern RE2 cannot compile; the message names the construct."""


class CompiledPattern(Protocol):
    def search(self, text: str) -> Any: ...

    def fullmatch(self, text: str) -> Any: ...

    def finditer(self, text: str) -> Any: ...


_RE2_OPTIONS: Any = None


def _compile_re2(pattern: str) -> CompiledPattern:
    global _RE2_OPTIONS
    import re2  # lazily: most packs never need it at parse time

    if _RE2_OPTIONS is None:
        _RE2_OPTIONS = re2.Options()
        _RE2_OPTIONS.log_errors = False
    try:
        compiled: CompiledPattern = re2.compile(pattern, options=_RE2_OPTIONS)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise PatternError(str(detail)) from None
    except (TypeError, ValueError) as exc:
        raise PatternError(str(exc)) from None
    return compiled


@lru_cache(maxsize=4096)
def compile_pattern(pattern: str) -> CompiledPattern:
    """Compile ``pattern`` on stdlib ``re`` when proven linear, else on RE2; raise
    ``PatternError`` saying why if RE2 cannot compile it either."""
    plan = plan_pattern(pattern)
    if plan.source is not None:
        return re.compile(plan.source)
    return _compile_re2(pattern)


def extract_ids(text: str, pattern: str) -> list[str]:
    """The distinct matches of ``pattern`` in ``text``, sorted (the ids an output
    references)."""
    return sorted({m.group(0) for m in compile_pattern(pattern).finditer(text)})


def search(pattern: str, text: str) -> bool:
    return compile_pattern(pattern).search(text) is not None
