"""The review queue as text (`rules review`) and as the server's pages (``/review``).

The pages are Jinja2 templates (``templates/review*.html.j2``) with autoescape: every
model text (outputs, prompts, errors, names) shows as text, never as markup. They carry
no script and load nothing from the network; each control has a label, the headings go
down one level at a time, and the page has its landmarks (header, nav, main).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from engine.report.html import render_page


def _age(seconds: float | None) -> str:
    if seconds is None:
        return "-"
    whole = int(seconds)
    if whole < 120:
        return f"{whole} s"
    if whole < 7200:
        return f"{whole // 60} min"
    if whole < 172_800:
        return f"{whole // 3600} h"
    return f"{whole // 86_400} d"


def queue_text(reviews: Sequence[Mapping[str, Any]]) -> str:
    """One line per review: id, state, age, due, pack and block, item."""
    if not reviews:
        return "No reviews.\n"
    lines = []
    for r in reviews:
        held = f" by {r['claimed_by']} until {r['claimed_until']}" if r["claimed_by"] else ""
        done = f" {r['resolution']}" + (f" by {r['resolved_by']}" if r["resolved_by"] else "")
        state = r["state"] + (held if r["state"] == "claimed" else "")
        state += done if r["state"] == "resolved" else ""
        lines.append(
            f"review {r['id']}: {state}, {_age(r['age_seconds'])} old, due {r['due']}; "
            f"{r['pack']} {r['block']} item {r['item_label']} ({r['action']})"
        )
    return "\n".join(lines) + "\n"


def changed_text(review: Mapping[str, Any]) -> str:
    """What a claim or resolution did, in one line."""
    if review["state"] == "claimed":
        held = f"{review['claimed_by']} until {review['claimed_until']}"
        return f"review {review['id']}: claimed by {held}\n"
    if review["state"] == "resolved":
        by = f" by {review['resolved_by']}" if review["resolved_by"] else ""
        return f"review {review['id']}: {review['resolution']}{by} at {review['resolved_at']}\n"
    return f"review {review['id']}: {review['state']}\n"


def review_text(review: Mapping[str, Any]) -> str:
    """One review with its attempts, their failures, outputs and prompts."""
    lines = [queue_text([review]).rstrip("\n")]
    if review.get("reason"):
        lines.append(f"reason: {review['reason']}")
    for attempt in review.get("attempts") or []:
        lines.append("")
        lines.append(
            f"attempt {attempt['attempt']}: {attempt['status']} -> {attempt['action']}"
            + (f" ({attempt['failure_type']}: {attempt['error']})" if attempt["error"] else "")
        )
        for label in ("output", "prompt"):
            text = attempt.get(label)
            if text is not None:
                lines.append(f"--- {label} ---")
                lines.append(str(text).rstrip("\n"))
    if review.get("output") is not None:
        lines += ["", "--- edited output ---", str(review["output"]).rstrip("\n")]
    return "\n".join(lines) + "\n"


# ---------------------------------------------------------------------------------- pages


def _marked(text: str | None, failures: Sequence[Mapping[str, Any]]) -> list[tuple[int, str, bool]]:
    """An output's lines, numbered, each with whether a failure points at it."""
    if text is None:
        return []
    flagged = {int(f["line"]) for f in failures if isinstance(f.get("line"), int)}
    lines = text.split("\n")
    if len(lines) > 1 and lines[-1] == "":
        lines.pop()  # the line break that ends the last line
    return [(n, line, n in flagged) for n, line in enumerate(lines, start=1)]


def queue_page(reviews: Sequence[Mapping[str, Any]], figures: Mapping[str, Any], title: str) -> str:
    """The open reviews, oldest first, with the queue's figures."""
    return render_page(
        "review_queue.html.j2",
        title=title,
        reviews=[{**r, "age": _age(r["age_seconds"])} for r in reviews],
        figures=figures,
    )


def review_page(
    review: Mapping[str, Any],
    *,
    draft: str | None = None,
    check: Mapping[str, Any] | None = None,
    message: str | None = None,
    person: str = "",
) -> str:
    """One review: its attempts side by side with their failures highlighted, and the
    forms that claim and resolve it. ``draft``: the text in the editor (the last output
    at first); ``check``: the contract's verdict on it, when it was checked."""
    attempts = [
        {**a, "lines": _marked(a.get("output"), a.get("failures") or [])}
        for a in review.get("attempts") or []
    ]
    last = next((a.get("output") for a in reversed(attempts) if a.get("output") is not None), "")
    return render_page(
        "review.html.j2",
        title=f"Review {review['id']}",
        review=review,
        attempts=attempts,
        draft=last if draft is None else draft,
        check=check,
        message=message,
        person=person,
    )
