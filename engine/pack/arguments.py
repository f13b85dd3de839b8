"""What a caller passes to ``Pack``'s methods, checked at the door: a mistake is a
``UsageError`` that says what to pass, never a pydantic ``ValidationError`` or an
``AttributeError`` from deep inside the engine."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from engine.core.errors import UsageError
from engine.core.verdict import Verdict
from engine.policy.triggers.decide import Decision


def _text(value: Any) -> str | None:
    return None if isinstance(value, str) else "text (str)"


def _optional_text(value: Any) -> str | None:
    return None if value is None or isinstance(value, str) else "text (str) or None"


def _output(value: Any) -> str | None:
    return None if isinstance(value, (str, bytes)) else "the output text (str or bytes)"


def _optional_output(value: Any) -> str | None:
    return None if value is None else _output(value)


def _vars(value: Any) -> str | None:
    if value is None or (
        isinstance(value, Mapping)
        and all(isinstance(k, str) and isinstance(v, str) for k, v in value.items())
    ):
        return None
    return "a dict of text to text, e.g. {'criterion': 'AC1'}, or None"


def _context(value: Any) -> str | None:
    if value is None or (isinstance(value, Mapping) and all(isinstance(k, str) for k in value)):
        return None
    return "a dict with text keys, or None"


def _count(minimum: int) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if isinstance(value, int) and not isinstance(value, bool) and value >= minimum:
            return None
        return f"a whole number from {minimum} up"

    return check


def _errors(value: Any) -> str | None:
    if (
        isinstance(value, Sequence)
        and not isinstance(value, (str, bytes))
        and all(isinstance(x, str) for x in value)
    ):
        return None
    return "a list of the earlier attempts' error messages (text)"


def _verdict(value: Any) -> str | None:
    return None if isinstance(value, Verdict) else "a Verdict (from Pack.evaluate)"


def _decision(value: Any) -> str | None:
    return None if isinstance(value, Decision) else "a Decision (from Pack.decide)"


_CHECKS: dict[str, Callable[[Any], str | None]] = {
    "block": _text,
    "nonce": _optional_text,
    "model": _optional_text,
    "path": _optional_text,
    "output": _output,
    "text": _optional_output,
    "vars": _vars,
    "context": _context,
    "attempt": _count(1),
    "extra_attempts": _count(0),
    "previous_errors": _errors,
    "verdict": _verdict,
    "decision": _decision,
}


def check(method: str, **values: Any) -> None:
    """Each of ``values`` (named as ``method``'s parameters) is of a kind it takes."""
    for name, value in values.items():
        wanted = _CHECKS[name](value)
        if wanted is not None:
            shown = repr(value) if len(repr(value)) <= 60 else type(value).__name__
            raise UsageError(f"{method}: {name}= takes {wanted}, not {shown}")
