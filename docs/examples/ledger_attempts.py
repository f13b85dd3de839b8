"""Record three attempts of session "nightly" in the SQLite ledger named on the command
line, through the ledger package (docs/ledger.md, "Copying sessions")."""

import sys

from engine.ledger.attempts import Attempt, Attempts, ItemAttempt
from engine.ledger.connection import open_ledger

failed = Attempt(
    pack="sentinel",
    status="fail",
    action="REPAIR",
    reason="the output broke its contract",
    rule="repair",
    final=False,
    output_sha256="0" * 64,
    output_chars=120,
    error="line 1: ANSWER must be unquoted",
)
passed = Attempt(**{**failed.__dict__, "status": "pass", "action": "PROCEED", "final": True})
with open_ledger(sys.argv[1]) as ledger:
    attempts = Attempts(ledger)
    numbers = [
        attempts.record_attempt(ItemAttempt("nightly", "VERDICT", "AC1", failed)),
        attempts.record_attempt(ItemAttempt("nightly", "VERDICT", "AC1", passed)),
        attempts.record_attempt(ItemAttempt("nightly", "VERDICT", "AC2", passed)),
    ]
print("recorded attempts", numbers, "in", sys.argv[1])
