"""The budget of one render or one condition: a deadline and a memory budget.

Each bound of the sandbox limits one value (a text of at most ``MAX_VALUE_CHARS``
characters, an integer of at most ``MAX_INT_BITS`` bits); the budget limits what a render or
a condition builds in all: every text, list growth or copy the sandbox produces is charged
(its size in bytes, counted before it is built where the size is known first), and past
``MAX_BUILT_BYTES`` the run stops. A loop appending 4 MB texts to a list stops at the budget,
not at the machine's memory. Built, not held: what is dropped is not refunded, so the
budget is also a bound on the work a run does. Outside a run (no budget set) nothing is
charged; the per-value bounds still apply.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextvars import ContextVar, Token
from typing import Any, TypeVar

from jinja2.exceptions import SecurityError

MAX_RENDER_SECONDS = 5.0
MAX_VALUE_CHARS = 4 * 1024 * 1024  # one text, list or mapping built by the sandbox
MAX_BUILT_BYTES = 256 * 1024 * 1024  # all a render or a condition builds
MAX_INT_BITS = 4096
MAX_RANGE = 100_000
POINTER = 8  # bytes a list or mapping holds per item


class Budget:
    """What is left of one run's time and memory."""

    __slots__ = ("deadline", "left")

    def __init__(self, seconds: float, size: int) -> None:
        self.deadline = time.monotonic() + seconds
        self.left = size


T = TypeVar("T")
_BUDGET: ContextVar[Budget | None] = ContextVar("sandbox_budget", default=None)


def start(seconds: float = MAX_RENDER_SECONDS) -> Token[Budget | None]:
    """A fresh budget for the run about to start (undo with ``stop``)."""
    return _BUDGET.set(Budget(seconds, MAX_BUILT_BYTES))


def stop(token: Token[Budget | None]) -> None:
    _BUDGET.reset(token)


def past_deadline() -> bool:
    budget = _BUDGET.get()
    return budget is not None and time.monotonic() > budget.deadline


def charge(size: int) -> None:
    """Count ``size`` bytes against the run's memory budget; over it, a SecurityError."""
    budget = _BUDGET.get()
    if budget is not None:
        budget.left -= size
        if budget.left < 0:
            budget.left = 0  # so a caller that goes on is refused again, not past zero
            raise SecurityError(
                f"built more than {MAX_BUILT_BYTES} bytes of values (the memory budget); "
                "bound the loops that build texts or lists"
            )


def text_bytes(text: str) -> int:
    """An upper bound of the bytes a text holds (1 per character when ASCII, else 4)."""
    return len(text) if text.isascii() else 4 * len(text)


def charge_result(value: T) -> T:
    """``value`` (a result just built), charged by its size; returned unchanged."""
    item: Any = value
    cls = item.__class__
    if cls is str:
        charge(len(item) if item.isascii() else 4 * len(item))
    elif cls is list or cls is tuple or cls is dict or cls is bytes:
        charge(POINTER * len(item) if cls is not bytes else len(item))
    elif isinstance(item, str):  # Markup (escape, forceescape) and other text subclasses
        refuse_long(len(item), "a text")
        charge(len(item) if item.isascii() else 4 * len(item))
    return value


def refuse_long(size: int, what: str, unit: str = "characters") -> None:
    """A value of ``size`` characters (or items), about to be built, over MAX_VALUE_CHARS
    is refused."""
    if size > MAX_VALUE_CHARS:
        raise SecurityError(f"{what} of {size} {unit} (at most {MAX_VALUE_CHARS})")


def deadline_checked(items: Any) -> Iterator[Any]:
    """``items`` as a template's ``for`` loop walks it, the deadline checked at every item
    (one clock read): a loop of a few hundred expensive steps without output ran minutes."""
    for item in items:
        if past_deadline():
            raise SecurityError(f"render ran over {MAX_RENDER_SECONDS:g} s")
        yield item


class BoundedRange:
    """``range`` for templates: at most MAX_RANGE numbers, the deadline checked as it runs."""

    def __init__(self, *args: int) -> None:
        self.numbers = range(*args)
        if len(self.numbers) > MAX_RANGE:
            raise SecurityError(f"range of {len(self.numbers)} numbers (at most {MAX_RANGE})")

    def __repr__(self) -> str:  # as Python's range shows itself: `range(0, 5)`
        return repr(self.numbers)

    def __len__(self) -> int:
        return len(self.numbers)

    def __getitem__(self, index: int) -> int:
        return self.numbers[index]

    def __iter__(self) -> Iterator[int]:
        for number in self.numbers:
            if past_deadline():
                raise SecurityError(f"render ran over {MAX_RENDER_SECONDS:g} s")
            yield number
