"""Numeric option types: integers the ledger can hold, floats that are finite.

click's ``IntRange`` takes any integer Python can parse (a ledger column is a 64-bit SQLite
INTEGER: a larger one was an internal error when recorded) and ``FloatRange`` takes ``nan``
and ``inf`` (a ``--timeout nan`` deadline never fires). These types refuse both as usage
errors naming the option, and keep the bounds of the types they replace.
"""

from __future__ import annotations

import math
from typing import Any

import click

from engine.core.numbers import INT64_MAX, INT64_MIN, MAX_INT_CHARS


class BoundedInt(click.IntRange):
    """An integer within the given bounds and within 64 bits (signed)."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        if isinstance(value, str) and len(value.strip()) > MAX_INT_CHARS:
            self.fail(
                f"{value.strip()[:24]}... is out of range (integers here fit in 64 bits)",
                param,
                ctx,
            )
        number = click.INT.convert(value, param, ctx)
        if not INT64_MIN <= number <= INT64_MAX:
            self.fail(f"{number} is out of range (integers here fit in 64 bits)", param, ctx)
        return super().convert(number, param, ctx)


class FiniteFloat(click.FloatRange):
    """A finite float (no NaN, no infinity) within the given bounds."""

    def convert(self, value: Any, param: click.Parameter | None, ctx: click.Context | None) -> Any:
        number = click.FLOAT.convert(value, param, ctx)
        if not math.isfinite(number):
            self.fail(f"{value!r} is not a finite number", param, ctx)
        return super().convert(number, param, ctx)
