"""The time a piece of work must end by, handed down to what it calls without passing it
through every signature (a server request's time limit, down to the ledger write it makes).

The deadline is a context variable: it follows the work into the threads it is handed to
(``anyio.to_thread`` and ``asyncio.to_thread`` copy the context) and no further. Work
without a deadline (every command) sees None and keeps its own bounds.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from contextvars import ContextVar

_DEADLINE: ContextVar[float | None] = ContextVar("rules_deadline", default=None)


def remaining() -> float | None:
    """Seconds left before the current deadline (0 or less: passed), or None without one."""
    deadline = _DEADLINE.get()
    return None if deadline is None else deadline - time.monotonic()


@contextmanager
def within(seconds: float) -> Iterator[float]:
    """Within the block, the deadline is ``seconds`` from now (or the enclosing one, when
    that is sooner); yields the monotonic time it falls at."""
    outer = _DEADLINE.get()
    deadline = time.monotonic() + seconds
    if outer is not None:
        deadline = min(deadline, outer)
    token = _DEADLINE.set(deadline)
    try:
        yield deadline
    finally:
        _DEADLINE.reset(token)
