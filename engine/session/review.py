"""The review use cases: the queue of final decisions a person resolves.

A decision whose action the pack's ``reviews.actions`` names (NEEDS_HUMAN by default)
opens a review in the transaction that records it (``opening``, called by
``engine.session.recording``), holding the item's attempts with their outputs, verdicts
and prompts, and its inputs. People list, show, claim and resolve reviews from any front
door (`rules review`, ``/v1/reviews``, the ``/review`` page) through the functions here:

- approve: the last output stands (the item ends with PROCEED);
- edit: a person's output, which must pass the block's contract, becomes the item's
  accepted output (kept in the ledger with who and when: the ``reviewed`` example tier);
- reject: the item ends with the pack's ``reviews.on_reject`` action, with a reason.

Each resolution is recorded as the item's final decision: one more attempt row of the
item's run (rule ``review:<resolution>``, reason naming who), so `rules log` shows it.
A review not resolved by its due time ends with the pack's ``reviews.fallback`` action,
once, whichever worker sees it first (``expire``: every use case here sweeps first).
"""

from __future__ import annotations

import json
import time
import zlib
from collections.abc import Mapping, Sequence
from dataclasses import asdict, dataclass, replace
from datetime import datetime, timedelta
from typing import Any

from engine.core import clock
from engine.core.errors import EngineError
from engine.core.textio import decode_output
from engine.core.verdict import Verdict
from engine.ledger import attempts as attempt_rows
from engine.ledger import kept as kept_rows
from engine.ledger import reviews as review_rows
from engine.ledger.attempts import Attempt, ItemAttempt, KeptOutput
from engine.ledger.connection import Tx
from engine.ledger.store import SessionLedger
from engine.pack.compiled import Pack
from engine.pack.inputs import OutputInput
from engine.policy.triggers.decide import Decision
from engine.session.items import item_label, sha256
from engine.session.review_hooks import notify
from engine.session.session_ref import SessionRef

STATES = ("open", "claimed", "resolved")
RESOLUTIONS = ("approved", "edited", "rejected", "expired")
DEFAULT_CLAIM_SECONDS = 900
MAX_SHOWN_CHARS = 200_000
"""The longest output or prompt a review keeps of each attempt (the rest is cut, marked)."""
MAX_NAME_CHARS = 200
MAX_REASON_CHARS = 2000
POLL_SECONDS = 0.5
"""How often a run waiting for a review looks at the ledger."""


class ReviewRefused(EngineError):
    """A review use case refused: no such review, or it is not in a state that allows it.
    ``kind`` says which (``not-found``, ``taken``, ``resolved``, ``invalid``)."""

    def __init__(self, kind: str, message: str) -> None:
        super().__init__(message)
        self.kind = kind


class OutputRefused(ReviewRefused):
    """An edited output that does not pass the block's contract: its verdict says why."""

    def __init__(self, review: int, verdict: Verdict) -> None:
        super().__init__(
            "invalid",
            f"review {review}: the edited output does not pass the contract of block "
            f"{verdict.block}: {verdict.failure_type}: {verdict.error}",
        )
        self.verdict = verdict


@dataclass(frozen=True)
class Shown:
    """One attempt as a review keeps it: what was asked, what came back, and what was
    wrong with it."""

    prompt: str | None
    output: str | bytes | None
    verdict: Verdict | None = None


@dataclass(frozen=True)
class ReviewSettings:
    """The pack's ``reviews:`` section, as recording reads it."""

    actions: frozenset[str]
    resolve_within: int
    fallback: str
    on_reject: str
    claim_for: int
    wait: float


def settings(pack: Pack) -> ReviewSettings:
    spec = pack.model.reviews
    return ReviewSettings(
        frozenset(spec.actions),
        int(spec.resolve_within),
        str(spec.fallback),
        str(spec.on_reject),
        int(spec.claim_for),
        float(spec.wait),
    )


def _opened(session: SessionRef) -> SessionLedger:
    """The session's ledger, through the caller's shared pool when it has one."""
    return SessionLedger(session.place(), opened=session.opened)


def now() -> datetime:
    return clock.now()


def _iso(value: datetime) -> str:
    return clock.iso(value)


def _cut(text: str) -> str:
    if len(text) <= MAX_SHOWN_CHARS:
        return text
    return text[:MAX_SHOWN_CHARS] + f"\n[... cut: {len(text) - MAX_SHOWN_CHARS} more characters]"


def _text(value: str | bytes | None) -> str | None:
    return None if value is None else _cut(decode_output(value))


def _failures(verdict: Verdict | None) -> list[dict[str, Any]]:
    if verdict is None:
        return []
    return [
        {"type": f.type, "message": f.message, "line": f.line, "path": f.path}
        for f in verdict.failures
    ]


# ------------------------------------------------------------------------- opening one


def _kept(tx: Tx, attempt_id: int) -> str | None:
    """An earlier attempt's output when the session keeps outputs (a caller that sends
    outputs one at a time, as a server's session route, gives no transcript)."""
    compressed = kept_rows.output_of(tx, attempt_id)
    if compressed is None:
        return None
    try:
        return _cut(kept_rows.text(compressed))
    except (ValueError, zlib.error):
        return None  # damaged: the review shows the attempt without its output


def opening(
    tx: Tx,
    pack: Pack,
    given: OutputInput,
    *,
    session: str,
    item: str,
    run: int,
    attempt_id: int,
    action: str,
    transcript: Sequence[Shown],
    current: Shown,
) -> int:
    """Open a review of the item's run inside ``tx`` (the transaction that records its
    final attempt, ``attempt_id``); its id. ``transcript``: the run's earlier attempts as
    the caller saw them (prompts and outputs), ``current`` the last one."""
    spec = settings(pack)
    history = [
        row
        for row in attempt_rows.item_history(tx, session, given.block, item)
        if row["run"] == run
    ]
    shown = [*transcript, current]
    listed = []
    for index, row in enumerate(history):
        seen = (
            shown[index - len(history) + len(shown)] if index >= len(history) - len(shown) else None
        )
        listed.append(
            {
                "attempt": row["attempt"],
                "status": row["status"],
                "failure_type": row["failure_type"],
                "error": row["error"],
                "action": row["action"],
                "reason": row["reason"],
                "failures": _failures(seen.verdict if seen else None),
                "prompt": _text(seen.prompt) if seen else None,
                "output": _text(seen.output) if seen else _kept(tx, int(row["id"])),
            }
        )
    material = {
        "nonce": given.nonce,
        "vars": dict(given.vars),
        "context": dict(given.context),
        "attempts": listed,
    }
    created = now()
    return review_rows.insert(
        tx,
        review_rows.Opening(
            session=session,
            pack=pack.name,
            revision=pack.revision,
            block=given.block,
            item=item,
            run=run,
            attempt_id=attempt_id,
            action=action,
            created=_iso(created),
            due=_iso(created + timedelta(seconds=spec.resolve_within)),
            fallback=spec.fallback,
            on_reject=spec.on_reject,
            material=json.dumps(material, default=str, sort_keys=True),
        ),
    )


# ------------------------------------------------------------------------ the documents


def _state(row: Mapping[str, Any], at: str) -> str:
    """The state people see: a claim that lapsed is open again."""
    if row["state"] == "claimed" and (row["claimed_until"] or "") < at:
        return "open"
    return str(row["state"])


def document(
    row: Mapping[str, Any], at: str, ledger: SessionLedger | None = None
) -> dict[str, Any]:
    """A review as every front door shows it (its material and output when read)."""
    state = _state(row, at)
    claimed = state == "claimed"
    out: dict[str, Any] = {
        "id": row["id"],
        "session": row["session"],
        "pack": row["pack"],
        "revision": row["revision"],
        "block": row["block"],
        "item": row["item"],
        "item_label": item_label(str(row["item"])),
        "run": row["run"],
        "action": row["action"],
        "state": state,
        "created": row["created"],
        "due": row["due"],
        "age_seconds": _seconds(row["created"], at),
        "fallback": row["fallback"],
        "on_reject": row["on_reject"],
        "claimed_by": row["claimed_by"] if claimed else None,
        "claimed_until": row["claimed_until"] if claimed else None,
        "resolution": row["resolution"],
        "resolved_by": row["resolved_by"],
        "resolved_at": row["resolved_at"],
        "reason": row["reason"],
        "final_attempt_id": row["final_attempt_id"],
    }
    if "material" in row:
        where = f"reviews row {row['id']}"
        material = ledger.decoded(row["material"], where) if ledger else json.loads(row["material"])
        out.update(material)
        output = row.get("output")
        out["output"] = (
            None if output is None else bytes(output).decode("utf-8", errors="surrogatepass")
        )
    return out


def _seconds(start: str | None, end: str | None) -> float | None:
    if not start or not end:
        return None
    return (clock.parse_time(end) - clock.parse_time(start)).total_seconds()


# ----------------------------------------------------------------------------- expiry


def _final_attempt(
    tx: Tx,
    row: Mapping[str, Any],
    *,
    action: str,
    status: str,
    rule: str,
    reason: str,
    text: str,
    nonce: str | None,
    kept: KeptOutput | None = None,
) -> int:
    """Record the item's final decision as one more attempt of its run; its row id."""
    session, block, item = row["session"], row["block"], row["item"]
    run, number = attempt_rows.next_attempt(tx, session, block, item, continuing=True)
    attempt_id = attempt_rows.insert_attempt(
        tx,
        ItemAttempt(
            session,
            block,
            item,
            Attempt(
                pack=str(row.get("pack") or ""),
                status=status,
                action=action,
                reason=reason,
                rule=rule,
                final=True,
                output_sha256=sha256(text),
                output_chars=len(text),
                round=review_rows.round_of(tx, int(row["attempt_id"])),
                nonce=nonce,
                revision=row.get("revision"),
            ),
            (),
            kept,
        ),
        number,
        None,
        run,
    )
    attempt_rows.end_run(tx, session, block, item)
    review_rows.set_final(tx, int(row["id"]), attempt_id)
    return attempt_id


def _final_of_last(
    tx: Tx,
    row: Mapping[str, Any],
    material: Mapping[str, Any],
    *,
    action: str,
    rule: str,
    reason: str,
) -> int:
    """Record the item's final decision over its last attempt's output and status (from the
    review's ``material``): an approval, a rejection or an expiry brings no new output."""
    last = (material.get("attempts") or [{}])[-1]
    return _final_attempt(
        tx,
        row,
        action=action,
        status=str(last.get("status") or "fail"),
        rule=rule,
        reason=reason,
        text=str(last.get("output") or ""),
        nonce=material.get("nonce"),
    )


def expire_in(tx: Tx, at: datetime, session: str | None) -> list[int]:
    """Expire the reviews past their due time inside ``tx``: each ends its item with its
    fallback action, recorded once (a review another worker expired first is not listed)."""
    done = []
    for row in review_rows.expire_due(tx, _iso(at), session):
        full = review_rows.get(tx, row["session"], int(row["id"]), material=True)
        assert full is not None
        _final_of_last(
            tx,
            full,
            json.loads(full["material"]),
            action=str(row["fallback"]),
            rule="review:expired",
            reason=f"review {row['id']} was not resolved by {row['due']}: "
            f"the pack's fallback {row['fallback']} was taken",
        )
        done.append(int(row["id"]))
    return done


def expire(session: SessionRef, at: datetime | None = None) -> list[int]:
    """Expire the session's overdue reviews (see ``expire_in``); their ids."""
    with _opened(session) as ledger:
        return ledger.write(lambda tx: expire_in(tx, at or now(), ledger.session))


# -------------------------------------------------------------------------- reading


def list_reviews(
    session: SessionRef, states: Sequence[str] = ("open", "claimed"), limit: int = 500
) -> list[dict[str, Any]]:
    """The session's reviews in ``states`` (a lapsed claim counts as open), oldest first;
    overdue ones are expired first."""
    at = now()
    stamp = _iso(at)
    with _opened(session) as ledger:

        def work(tx: Tx) -> list[dict[str, Any]]:
            expire_in(tx, at, ledger.session)
            wanted = set(states) | ({"claimed"} if "open" in states else set())
            rows = review_rows.listing(tx, ledger.session, sorted(wanted), limit)
            return [d for d in (document(r, stamp) for r in rows) if d["state"] in states]

        return ledger.write(work)


def show_review(session: SessionRef, review: int) -> dict[str, Any]:
    """One review with its material: the attempts, their outputs, verdicts and prompts."""
    at = now()
    with _opened(session) as ledger:

        def work(tx: Tx) -> dict[str, Any] | None:
            expire_in(tx, at, ledger.session)
            return review_rows.get(tx, ledger.session, review, material=True)

        row = ledger.write(work)
        if row is None:
            raise _not_found(session, review)
        return document(row, _iso(at), ledger)


def _not_found(session: SessionRef, review: int) -> ReviewRefused:
    place = session.place()
    return ReviewRefused("not-found", f"no review {review} in {place.label}")


def _refusal(
    row: Mapping[str, Any] | None, session: SessionRef, review: int, at: str
) -> ReviewRefused:
    """Why a claim or a resolution changed nothing, from the review as it is now."""
    if row is None:
        return _not_found(session, review)
    if row["state"] == "resolved":
        by = f" by {row['resolved_by']}" if row["resolved_by"] else ""
        return ReviewRefused(
            "resolved",
            f"review {review} was resolved already ({row['resolution']}{by} at "
            f"{row['resolved_at']}); nothing was changed",
        )
    return ReviewRefused(
        "taken",
        f"review {review} is claimed by {row['claimed_by']} until {row['claimed_until']}; "
        "nothing was changed (claim it after that, or ask them)",
    )


def _person(by: str) -> str:
    name = " ".join(str(by).split())
    if not name:
        raise ReviewRefused("invalid", "say who you are: a person's name must not be empty")
    if len(name) > MAX_NAME_CHARS:
        raise ReviewRefused("invalid", f"a person's name has at most {MAX_NAME_CHARS} characters")
    return name


# -------------------------------------------------------------------------- changing


def claim_review(
    session: SessionRef, review: int, by: str, seconds: int = DEFAULT_CLAIM_SECONDS
) -> dict[str, Any]:
    """Claim the review for ``by`` for ``seconds`` (renewed when ``by`` holds it): exactly
    one of many claiming at once gets it; the others get ``ReviewRefused`` (``taken``)."""
    who = _person(by)
    if not 1 <= seconds <= 86_400:
        raise ReviewRefused("invalid", "a claim lasts 1 to 86400 seconds")
    at = now()
    stamp = _iso(at)
    with _opened(session) as ledger:

        def work(tx: Tx) -> tuple[bool, dict[str, Any] | None]:
            expire_in(tx, at, ledger.session)
            until = _iso(at + timedelta(seconds=seconds))
            done = review_rows.claim(tx, ledger.session, review, who, until, stamp)
            return done, review_rows.get(tx, ledger.session, review)

        done, row = ledger.write(work)
    if not done or row is None:
        raise _refusal(row, session, review, stamp)
    return document(row, stamp)


def release_review(session: SessionRef, review: int, by: str) -> dict[str, Any]:
    """Give a claim back: the review is open to others again."""
    who = _person(by)
    stamp = _iso(now())
    with _opened(session) as ledger:

        def work(tx: Tx) -> tuple[bool, dict[str, Any] | None]:
            done = review_rows.release(tx, ledger.session, review, who)
            return done, review_rows.get(tx, ledger.session, review)

        done, row = ledger.write(work)
    if row is None:
        raise _not_found(session, review)
    if not done:
        raise ReviewRefused("invalid", f"review {review} is not claimed by {who}")
    return document(row, stamp)


def check_output(pack: Pack, review: Mapping[str, Any], text: str) -> Verdict:
    """The block's verdict on a person's output for ``review`` (a document with its
    material), with the inputs its attempts had."""
    given = OutputInput(
        str(review["block"]),
        output=text,
        nonce=review.get("nonce"),
        vars=review.get("vars") or {},
        context=review.get("context") or {},
    )
    return given.verdict(pack, review.get("context") or {})


@dataclass(frozen=True)
class Resolution:
    """How a person resolves a review: ``approved``, ``edited`` (with ``output``) or
    ``rejected`` (with ``reason``)."""

    resolution: str
    by: str
    output: str | None = None
    reason: str | None = None


def resolve_review(
    pack: Pack | None, session: SessionRef, review: int, resolution: Resolution
) -> dict[str, Any]:
    """Resolve the review and record the item's final decision (who and when in its
    reason); an edited output must pass the block's contract (``OutputRefused``) and is
    kept as the item's accepted output. ``pack``: the review's pack (needed to check an
    edited output; its ``reviews.webhook``, if any, is told of the resolution, and what
    failed of that is in the document's ``warnings``)."""
    who = _person(resolution.by)
    kind = resolution.resolution
    if kind not in ("approved", "edited", "rejected"):
        raise ReviewRefused("invalid", f"a review is approved, edited or rejected, not {kind!r}")
    reason = resolution.reason
    if kind == "rejected" and not (reason or "").strip():
        raise ReviewRefused("invalid", "a rejection needs a reason")
    if reason is not None and len(reason) > MAX_REASON_CHARS:
        raise ReviewRefused("invalid", f"a reason has at most {MAX_REASON_CHARS} characters")
    current = show_review(session, review)
    if pack is not None and pack.name != current["pack"]:
        raise ReviewRefused(
            "invalid", f"review {review} was opened by pack {current['pack']!r}, not {pack.name!r}"
        )
    verdict: Verdict | None = None
    if kind == "edited":
        if resolution.output is None:
            raise ReviewRefused("invalid", "an edit needs the corrected output")
        if pack is None:
            raise ReviewRefused("invalid", f"checking an edit needs pack {current['pack']}")
        verdict = check_output(pack, current, resolution.output)
        if verdict.status == "fail":
            raise OutputRefused(review, verdict)
    at = now()
    stamp = _iso(at)
    with _opened(session) as ledger:

        def work(tx: Tx) -> tuple[bool, dict[str, Any] | None]:
            expire_in(tx, at, ledger.session)
            text = resolution.output if kind == "edited" else None
            done = review_rows.resolve(
                tx,
                ledger.session,
                review,
                by=who,
                now=stamp,
                resolution=kind,
                reason=reason,
                output=None if text is None else text.encode("utf-8", errors="surrogatepass"),
            )
            row = review_rows.get(tx, ledger.session, review, material=True)
            if not done or row is None:
                return False, row
            said = f" ({reason})" if reason else ""
            if kind == "edited":
                assert text is not None and verdict is not None
                _final_attempt(
                    tx,
                    row,
                    action="PROCEED",
                    status=verdict.status,
                    rule="review:edited",
                    reason=f"edited by {who} at {stamp} (review {review}){said}",
                    text=text,
                    nonce=current.get("nonce"),
                    kept=KeptOutput(text, current.get("vars") or {}, current.get("context") or {}),
                )
            else:  # approved or rejected: the last attempt's output stands or ends
                action = "PROCEED" if kind == "approved" else str(row["on_reject"])
                _final_of_last(
                    tx,
                    row,
                    current,
                    action=action,
                    rule=f"review:{kind}",
                    reason=f"{kind} by {who} at {stamp} (review {review}){said}",
                )
            return True, review_rows.get(tx, ledger.session, review, material=True)

        done, row = ledger.write(work)
        if not done or row is None:
            raise _refusal(row, session, review, stamp)
        resolved = document(row, stamp, ledger)
    # told after the commit: a hook that fails leaves the review resolved, and says so
    resolved["warnings"] = notify(pack, resolved)
    return resolved


# ---------------------------------------------------------------------- waiting, examples


@dataclass(frozen=True)
class ReviewState:
    """A review as a run reports it: its id, state, and once resolved how and by whom."""

    id: int
    state: str
    session: str = ""
    resolution: str | None = None
    resolved_by: str | None = None
    resolved_at: str | None = None

    @classmethod
    def of(cls, found: Mapping[str, Any], session: str = "") -> ReviewState:
        return cls(
            int(found["id"]),
            str(found["state"]),
            session,
            found.get("resolution"),
            found.get("resolved_by"),
            found.get("resolved_at"),
        )

    def to_json(self) -> dict[str, Any]:
        """The review as JSON: its fields but the session."""
        return {k: v for k, v in asdict(self).items() if k != "session"}


def resumed(
    pack: Pack, found: Mapping[str, Any], verdict: Verdict, decision: Decision
) -> tuple[Verdict, Decision]:
    """The item's final verdict and decision once its review ``found`` (with its
    material) is resolved: an edit's verdict and PROCEED, the last verdict and PROCEED
    for an approval, the pack's ``on_reject`` or ``fallback`` action otherwise."""
    resolution = found["resolution"]
    if resolution == "edited":
        verdict = check_output(pack, found, str(found["output"]))
        action = "PROCEED"
    elif resolution == "approved":
        action = "PROCEED"
    else:
        action = str(found["on_reject"] if resolution == "rejected" else found["fallback"])
    spec = pack.policy.actions[action]
    by = f" by {found['resolved_by']}" if found.get("resolved_by") else ""
    return verdict, replace(
        decision,
        action=action,
        reason=f"review {found['id']} {resolution}{by} at {found['resolved_at']}",
        rule=f"review:{resolution}",
        final=True,
        exit_code=spec.exit_code,
        template=None,
        attempts_left=0,
        default=None,
    )


def wait_for(session: SessionRef, review: int, seconds: float) -> dict[str, Any]:
    """The review once resolved, or as it is after ``seconds`` (bounded by the caller)."""
    until = time.monotonic() + max(0.0, seconds)
    while True:
        found = show_review(session, review)
        if found["state"] == "resolved" or time.monotonic() >= until:
            return found
        time.sleep(min(POLL_SECONDS, max(0.0, until - time.monotonic())))


# ------------------------------------------------------------------------------ figures


def figures(rows: Sequence[Mapping[str, Any]], at: datetime | None = None) -> dict[str, Any]:
    """The queue's figures from its rows (``review_rows.figures_rows``): by pack and block,
    the open reviews (depth) and the oldest one's age; resolutions by kind; the time to
    resolve (sum and count, in seconds); the share of resolutions that were edits."""
    stamp = _iso(at or now())
    groups: dict[tuple[str, str], dict[str, Any]] = {}
    for row in rows:
        group = groups.setdefault(
            (str(row["pack"]), str(row["block"])),
            {
                "open": 0,
                "oldest_age_seconds": 0.0,
                "resolved": dict.fromkeys(RESOLUTIONS, 0),
                "resolve_seconds_sum": 0.0,
                "resolve_seconds_count": 0,
            },
        )
        if row["state"] != "resolved":
            group["open"] += 1
            age = _seconds(str(row["created"]), stamp) or 0.0
            group["oldest_age_seconds"] = max(group["oldest_age_seconds"], age)
            continue
        group["resolved"][str(row["resolution"])] = (
            group["resolved"].get(str(row["resolution"]), 0) + 1
        )
        if row["resolution"] != "expired":
            spent = _seconds(str(row["created"]), row["resolved_at"])
            if spent is not None:
                group["resolve_seconds_sum"] += spent
                group["resolve_seconds_count"] += 1
    for group in groups.values():
        people = sum(group["resolved"][k] for k in ("approved", "edited", "rejected"))
        group["edit_share"] = group["resolved"]["edited"] / people if people else 0.0
    return {
        "at": stamp,
        "by_block": [{"pack": p, "block": b, **g} for (p, b), g in sorted(groups.items())],
    }


def session_figures(session: SessionRef) -> dict[str, Any]:
    """The figures of one session's queue (``figures``)."""
    place = session.place()
    if not place.exists():
        return figures([])
    with place.open(read_only=True) as ledger:
        rows = ledger.read(lambda tx: review_rows.figures_rows(tx, ledger.session))
    return figures(rows)
