"""A writer process of the ledger tests and benchmark, in one of two modes.

Recording (the default): records ``count`` synthetic attempts over ``items`` items (round
robin from ``start``; every other one with two warnings, so it is written in a transaction
of several statements) and prints each as ``item number`` on its own line, flushed, as
soon as it is committed.

Evaluating (``--evaluate``): loads the shipped sentinel pack once, then ``count`` times
evaluates an output of an item (round robin from ``start``; a passing or a failing VERDICT,
chosen by a generator seeded with ``start``), and in one transaction locks the item (its
counter), reads the history of the item's current run (the attempts since its last final
decision), decides with it and records the attempt. A run ends at its final decision; the
next evaluation of that item starts a new run at attempt 1. Each committed record is
printed as ``id item attempt final action`` (``id``: the attempt's row id).

A LedgerError is printed as ``error: message`` and ends the worker with status 2.

    python ledger_worker.py [--evaluate] URL SESSION COUNT ITEMS [START]
"""

from __future__ import annotations

import hashlib
import random
import sys
import uuid
from typing import Any

from engine.ledger import LedgerError
from engine.ledger.attempts import Attempt, Attempts, ItemAttempt, insert_attempt, next_attempt
from engine.ledger.connection import Ledger, Row, Tx, open_ledger

ATTEMPT = Attempt(
    pack="bench",
    status="fail",
    action="retry",
    reason="a required field is missing",
    rule="missing-field",
    final=False,
    output_sha256="0" * 64,
    output_chars=1200,
    error="field 'answer' is missing",
    nonce="4F2C9A",
)

PACK, BLOCK, NONCE, VARS = "builtin:sentinel", "VERDICT", "4F2C9A", {"criterion": "AC1"}
PASSING = (
    "The criterion is met; here is my verdict.\n\n"
    f"<<<VERDICT:V1:AC1:NONCE={NONCE}>>>\n"
    'ANSWER=YES\nREASON="All acceptance criteria are satisfied"\n'
    f"<<<END_VERDICT:AC1:NONCE={NONCE}>>>\n"
)
FAILING = PASSING.replace("ANSWER=YES", 'ANSWER="YES"')  # quoted: a parse error
PASS_RATE = 0.35

# the current run of an item: its attempts after its last final one, oldest first
CURRENT_RUN = (
    "SELECT attempt, error FROM attempts WHERE session = ? AND block = ? AND item = ?"
    " AND id > coalesce((SELECT max(id) FROM attempts WHERE session = ? AND block = ?"
    " AND item = ? AND final = 1), 0) ORDER BY id"
)


def record(url: str, session: str, count: int, items: int, start: int = 0) -> int:
    try:
        with open_ledger(url) as ledger:
            attempts = Attempts(ledger)
            for n in range(count):
                item = f"item-{(start + n) % items}"
                warnings = ("first", "second") if n % 2 else ()
                number = attempts.record_attempt(ItemAttempt(session, "B", item, ATTEMPT, warnings))
                print(item, number, flush=True)
    except LedgerError as exc:
        print(f"error: {exc}", flush=True)
        return 2
    return 0


def evaluate(url: str, session: str, count: int, items: int, start: int = 0) -> int:
    import engine

    pack = engine.load_pack(PACK)  # once: every evaluation below uses the compiled pack
    choose = random.Random(start)
    try:
        with open_ledger(url) as ledger:
            for n in range(count):
                item = f"item-{(start + n) % items}"
                text = PASSING if choose.random() < PASS_RATE else FAILING
                row_id, number, final, action = evaluate_one(ledger, pack, session, item, text)
                print(row_id, item, number, final, action, flush=True)
    except LedgerError as exc:
        print(f"error: {exc}", flush=True)
        return 2
    return 0


def evaluate_one(ledger: Ledger, pack: Any, session: str, item: str, text: str) -> Row:
    """Evaluate ``text`` as the item's output, then decide and record it in one
    transaction: (row id, attempt number, final, action)."""
    verdict = pack.evaluate(BLOCK, text, nonce=NONCE, vars=VARS)
    digest = hashlib.sha256(text.encode()).hexdigest()
    token = uuid.uuid4().hex

    def work(tx: Tx) -> Row:
        if tx.retry:  # the first run may have committed before its connection broke
            done = tx.one(
                "SELECT id, attempt, final, action FROM attempts WHERE token = ?", (token,)
            )
            if done is not None:
                return done
        next_attempt(tx, session, BLOCK, item)  # locks the item until the end of tx
        run = tx.all(CURRENT_RUN, (session, BLOCK, item) * 2)
        decision = pack.decide(
            verdict,
            output=text,
            attempt=len(run) + 1,
            previous_errors=[error for _, error in run if error],
            nonce=NONCE,
        )
        attempt = Attempt(
            pack=pack.name,
            status=verdict.status,
            action=decision.action,
            reason=decision.reason,
            rule=decision.rule,
            final=decision.final,
            output_sha256=digest,
            output_chars=len(text),
            failure_type=verdict.failure_type,
            error=verdict.error,
            nonce=NONCE,
        )
        number = decision.attempt
        row_id = insert_attempt(tx, ItemAttempt(session, BLOCK, item, attempt), number, token)
        return row_id, number, int(decision.final), decision.action

    return ledger.write(work)


if __name__ == "__main__":
    args = sys.argv[1:]
    mode = record
    if args[:1] == ["--evaluate"]:
        mode, args = evaluate, args[1:]
    sys.exit(mode(args[0], args[1], int(args[2]), int(args[3]), *map(int, args[4:5])))
