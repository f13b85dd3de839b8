"""`did you mean ...?`: how an error names the known name closest to a wrong one."""

from __future__ import annotations

from collections.abc import Callable, Iterable


def did_you_mean(
    name: str, known: Iterable[str], otherwise: str = "", *, shown: Callable[[str], str] = repr
) -> str:
    """``did you mean 'X'?`` for the known name closest to ``name`` (written by ``shown``),
    else ``otherwise`` (when no known name is close)."""
    # Deferred for start-up time: only an error asks for a suggestion.
    import difflib

    close = difflib.get_close_matches(name, list(known), n=1)
    return f"did you mean {shown(close[0])}?" if close else otherwise
