"""The shadow evaluations repository on both backends: rows recorded in one transaction and
read back as they were written, a page at a time, by pair."""

from __future__ import annotations

import pytest

from engine.ledger import shadow as shadow_module
from engine.ledger.connection import open_ledger
from engine.ledger.shadow import ShadowEvaluation, ShadowLog, Side

LIVE = Side("pass", None, "PROCEED", False)
FAILED = Side("fail", "INVALID_VALUE", "REPAIR", True, "REASON exceeds 300 chars")


def evaluation(candidate: str, number: int, flipped: bool) -> ShadowEvaluation:
    return ShadowEvaluation(
        pack="sentinel",
        revision="r1",
        candidate=candidate,
        candidate_revision=f"c{number % 2}",
        block="VERDICT",
        live=LIVE,
        candidate_side=FAILED if flipped else None if number == 0 else LIVE,
        candidate_error="no block" if number == 0 else None,
        flipped=flipped or number == 0,
        excerpt="<<<VERDICT ..." if flipped else None,
        session="s1",
    )


def test_rows_are_read_back_as_written_a_page_at_a_time(
    ledger_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(shadow_module, "PAGE_ROWS", 3)
    written = [evaluation("./next", n, flipped=n % 3 == 1) for n in range(8)]
    with open_ledger(ledger_url) as ledger:
        log = ShadowLog(ledger)
        log.record(written)
        log.record([evaluation("./other", 5, flipped=False)])
        log.record([])
        read = list(log.evaluations("sentinel", "./next"))
        assert log.pairs() == [("sentinel", "./next"), ("sentinel", "./other")]
        assert log.revisions("sentinel", "./next") == {"pack": ["r1"], "candidate": ["c0", "c1"]}
    assert [row.id for row in read] == sorted(row.id for row in read if row.id is not None)
    assert [{**vars(row), "id": None} for row in read] == [vars(row) for row in written]
    assert read[0].candidate_side is None and read[0].candidate_error == "no block"
    assert read[1].candidate_side == FAILED
