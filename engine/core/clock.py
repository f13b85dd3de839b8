"""The engine's clock: an explicit time, else ``SOURCE_DATE_EPOCH``, else the real clock.

Everything the engine prints as a time goes through here, so ``--now`` (or
``SOURCE_DATE_EPOCH``, the reproducible-builds convention) makes output reproducible.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from datetime import datetime, timedelta, timezone

from engine.core.errors import EngineError


class ClockError(EngineError):
    """A time given on the command line or in SOURCE_DATE_EPOCH cannot be read."""


def parse_time(text: str) -> datetime:
    """An ISO 8601 time (``Z`` or an offset; no offset means UTC) as an aware UTC datetime."""
    raw = text.strip()
    try:
        value = datetime.fromisoformat(raw[:-1] + "+00:00" if raw.endswith(("Z", "z")) else raw)
    except ValueError:
        raise ClockError(f"not an ISO 8601 time: {text!r} (e.g. 2026-01-04T06:30:00Z)") from None
    if value.tzinfo is None:
        value = value.replace(tzinfo=timezone.utc)
    return value.astimezone(timezone.utc)


def now(
    explicit: str | datetime | None = None, environ: Mapping[str, str] | None = None
) -> datetime:
    """The current time in UTC: ``explicit`` when given, else SOURCE_DATE_EPOCH (seconds since
    1970), else the system clock."""
    if isinstance(explicit, datetime):
        return explicit.astimezone(timezone.utc)
    if explicit is not None:
        return parse_time(explicit)
    epoch = (os.environ if environ is None else environ).get("SOURCE_DATE_EPOCH")
    if epoch:
        try:
            return datetime.fromtimestamp(int(epoch.strip()), timezone.utc)
        except (ValueError, OverflowError, OSError):
            raise ClockError(
                f"SOURCE_DATE_EPOCH must be whole seconds since 1970, got {epoch!r}"
            ) from None
    return datetime.now(timezone.utc)


def iso(value: datetime) -> str:
    """ISO 8601 UTC with seconds, e.g. 2026-01-04T06:30:00Z."""
    return value.astimezone(timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def compact(value: datetime) -> str:
    """The basic ISO 8601 form without zone, e.g. 20260104T063000."""
    return value.astimezone(timezone.utc).strftime("%Y%m%dT%H%M%S")


def add_minutes(timestamp: str, minutes: float) -> str:
    """``timestamp`` (ISO 8601) plus ``minutes``, as ISO 8601 UTC (a template filter)."""
    return iso(parse_time(str(timestamp)) + timedelta(minutes=float(minutes)))
