"""A recorded conflict's status: open (the presentation shows it), flagged (an unaddressed
item a user may convert into a conflict or waive), resolved, waived.

A module of its own because the reports and the commands that list conflicts need only
these names, not the runtime that compiles a pack's conflict rules (which loads Jinja2:
0.25 s of `rules check` before this split, python -X importtime)."""

from __future__ import annotations

OPEN = "open"
FLAGGED = "flagged"
RESOLVED = "resolved"
WAIVED = "waived"
