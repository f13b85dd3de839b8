"""Attempts on both backends: numbers allocated atomically across processes, an item's
history with its warnings and kept output."""

from __future__ import annotations

import subprocess
import sys
import zlib
from collections import Counter
from pathlib import Path

import pytest

from engine.ledger.attempts import Attempt, Attempts, ItemAttempt, KeptOutput, next_attempt
from engine.ledger.connection import Tx, open_ledger

WORKER = Path(__file__).with_name("ledger_worker.py")

ATTEMPT = Attempt(
    pack="p",
    status="fail",
    action="retry",
    reason="a field is missing",
    rule="missing",
    final=False,
    output_sha256="0" * 64,
    output_chars=5,
    error="field 'x' is missing",
)


def run_writers(url: str, processes: int, count: int, items: int) -> list[tuple[str, int]]:
    """``processes`` writer processes at once, each recording ``count`` attempts over
    ``items`` items; every (item, number) they were given."""
    writers = [
        subprocess.Popen(
            [sys.executable, str(WORKER), url, "s", str(count), str(items), str(n)],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(processes)
    ]
    given = []
    for writer in writers:
        out, err = writer.communicate(timeout=300)
        assert writer.returncode == 0, out + err
        for line in out.splitlines():
            item, number = line.split()
            given.append((item, int(number)))
    return given


@pytest.mark.heavy
def test_writers_in_several_processes_get_distinct_consecutive_numbers(ledger_url: str) -> None:
    given = run_writers(ledger_url, processes=4, count=50, items=3)
    assert len(given) == 200
    per_item = Counter(item for item, _ in given)
    for item, k in per_item.items():
        assert sorted(n for i, n in given if i == item) == list(range(1, k + 1))
    with open_ledger(ledger_url) as ledger:
        recorded = Attempts(ledger).numbers("s")
    assert {item: sorted(numbers) for (_, item), numbers in recorded.items()} == {
        item: list(range(1, k + 1)) for item, k in per_item.items()
    }
    for numbers in recorded.values():  # committed in the order they were numbered
        assert numbers == sorted(numbers)


def test_history_holds_the_attempts_their_warnings_and_kept_outputs(ledger_url: str) -> None:
    with open_ledger(ledger_url) as ledger:
        attempts = Attempts(ledger)
        kept = KeptOutput(text="héllo\n", vars={"k": "v"}, context={"round": 2})
        assert attempts.record_attempt(ItemAttempt("s", "B", "i", ATTEMPT, ["w1", "w2"], kept)) == 1
        final = Attempt(**{**ATTEMPT.__dict__, "final": True, "action": "accept", "round": 2})
        assert attempts.record_attempt(ItemAttempt("s", "B", "i", final)) == 2
        history = attempts.history("s", "B", "i")
        assert [(r["attempt"], r["final"], r["round"], r["warnings"]) for r in history] == [
            (1, False, None, ["w1", "w2"]),
            (2, True, 2, []),
        ]
        assert history[0]["error"] == "field 'x' is missing"
        assert attempts.history("s", "B", "other") == []
        stored = ledger.read(
            lambda tx: tx.one(
                "SELECT vars, context, output FROM kept_outputs WHERE attempt_id = ?",
                (history[0]["id"],),
            )
        )
    assert stored is not None
    assert (stored[0], stored[1]) == ('{"k": "v"}', '{"round": 2}')
    assert zlib.decompress(bytes(stored[2])).decode() == "héllo\n"


def test_a_failed_transaction_gives_its_number_back(ledger_url: str) -> None:
    with open_ledger(ledger_url) as ledger:
        attempts = Attempts(ledger)
        assert attempts.record_attempt(ItemAttempt("s", "B", "i", ATTEMPT)) == 1

        class Stop(Exception):
            pass

        def fails(tx: Tx) -> None:
            assert next_attempt(tx, "s", "B", "i") == (1, 2)
            raise Stop

        with pytest.raises(Stop):
            ledger.write(fails)
        assert attempts.record_attempt(ItemAttempt("s", "B", "i", ATTEMPT)) == 2
