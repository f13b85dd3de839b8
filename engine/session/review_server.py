"""The review queue of a server's sessions (``rules serve``): the reviews of every session
it records, in its ledger (``--ledger URL``: one query across sessions) or in the session
folders under its ``--sessions-dir`` (one SQLite ledger each), named by session name as
its routes name them; and the queue's figures for ``/metrics``."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

from engine.core import clock
from engine.ledger import reviews as review_rows
from engine.ledger.connection import Tx
from engine.ledger.store import LEDGER_FILE, Place, SessionLedger
from engine.ledger.url import parse_url
from engine.pack.compiled import Pack
from engine.session.recording import named_session, shared_ledger
from engine.session.review import (
    Resolution,
    ReviewRefused,
    check_output,
    claim_review,
    document,
    expire_in,
    figures,
    list_reviews,
    now,
    release_review,
    resolve_review,
    show_review,
)
from engine.session.session_ref import SessionRef, session_name_problem

MAX_LISTED = 500


def session_folders(sessions_dir: str) -> list[Path]:
    """The session folders under ``sessions_dir`` that hold a ledger, by name."""
    root = Path(sessions_dir)
    if not root.is_dir():
        return []
    return sorted(
        p
        for p in root.iterdir()
        if session_name_problem(p.name) is None and (p / LEDGER_FILE).is_file()
    )


def whole_ledger(ledger: str) -> SessionLedger:
    """The server's ledger, for a query across its sessions."""
    url = parse_url(ledger)
    return SessionLedger(Place(url, "", None), opened=shared_ledger(ledger, url))


def served_reviews(
    ledger: str | None, sessions_dir: str, states: Sequence[str] = ("open", "claimed")
) -> list[dict[str, Any]]:
    """The reviews in ``states`` of every session the server records, oldest first (those
    past their due time take their fallback first)."""
    if ledger is None:
        found = []
        for folder in session_folders(sessions_dir):
            for review in list_reviews(SessionRef(folder), states):
                found.append({**review, "session": folder.name})
        found.sort(key=lambda r: (r["created"], r["session"], r["id"]))
        return found[:MAX_LISTED]
    at = now()
    stamp = clock.iso(at)
    with whole_ledger(ledger) as opened:

        def work(tx: Tx) -> list[dict[str, Any]]:
            expire_in(tx, at, None)
            wanted = sorted(set(states) | ({"claimed"} if "open" in states else set()))
            return review_rows.listing(tx, None, wanted, MAX_LISTED)

        rows = opened.write(work)
    return [d for d in (document(r, stamp) for r in rows) if d["state"] in states]


def served_figures(ledger: str | None, sessions_dir: str) -> dict[str, Any]:
    """The queue's figures across the server's sessions (``review.figures``)."""
    rows: list[dict[str, Any]] = []
    if ledger is None:
        for folder in session_folders(sessions_dir):
            with Place(parse_url(folder / LEDGER_FILE), "", folder).open(read_only=True) as one:
                rows += one.read(lambda tx: review_rows.figures_rows(tx, ""))
    else:
        with whole_ledger(ledger) as opened:
            rows = opened.read(lambda tx: review_rows.figures_rows(tx, None))
    return figures(rows)


class ServedReviews:
    """One session's reviews as a server names them (``name``: its session name)."""

    def __init__(self, name: str, *, ledger: str | None, sessions_dir: str) -> None:
        if problem := session_name_problem(name):
            raise ReviewRefused("not-found", f"session {name[:60]!r}: {problem}")
        self.name = name
        self.ref = named_session(name, ledger=ledger, sessions_dir=sessions_dir)
        if ledger is None and not self.ref.exists():
            raise ReviewRefused("not-found", f"no session {name!r} on this server")

    def _named(self, review: dict[str, Any]) -> dict[str, Any]:
        return {**review, "session": self.name}

    def show(self, review: int) -> dict[str, Any]:
        return self._named(show_review(self.ref, review))

    def claim(self, review: int, by: str, seconds: int) -> dict[str, Any]:
        return self._named(claim_review(self.ref, review, by, seconds))

    def release(self, review: int, by: str) -> dict[str, Any]:
        return self._named(release_review(self.ref, review, by))

    def resolve(self, pack: Pack | None, review: int, resolution: Resolution) -> dict[str, Any]:
        return self._named(resolve_review(pack, self.ref, review, resolution))

    def check(self, pack: Pack, review: int, text: str) -> dict[str, Any]:
        """The block's verdict on ``text`` for the review (the editor's check)."""
        found = show_review(self.ref, review)
        return check_output(pack, found, text).to_json()
