"""A writer process of the ledger tests and benchmark: records ``count`` attempts over
``items`` items (round robin from ``start``; every other one with two warnings, so
it is written in a transaction of several statements) and prints each as ``item number`` on its
own line, flushed, as soon as it is committed; a LedgerError is printed as
``error: message`` and ends it with status 2.

    python ledger_worker.py URL SESSION COUNT ITEMS [START]
"""

from __future__ import annotations

import sys

from engine.ledger import LedgerError
from engine.ledger.attempts import Attempt, Attempts
from engine.ledger.connection import open_ledger

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


def main(url: str, session: str, count: int, items: int, start: int = 0) -> int:
    try:
        with open_ledger(url) as ledger:
            attempts = Attempts(ledger)
            for n in range(count):
                item = f"item-{(start + n) % items}"
                warnings = ("first", "second") if n % 2 else ()
                number = attempts.record_attempt(session, "B", item, ATTEMPT, warnings)
                print(item, number, flush=True)
    except LedgerError as exc:
        print(f"error: {exc}", flush=True)
        return 2
    return 0


if __name__ == "__main__":
    args = sys.argv[1:]
    sys.exit(main(args[0], args[1], int(args[2]), int(args[3]), *map(int, args[4:5])))
