"""Budgets and circuit breakers: calls paid for in the ledger, on both backends; what a
decision takes instead of a call a budget cannot pay for or a breaker skips; a breaker
opening, skipping, probing and closing under a controlled clock (``SOURCE_DATE_EPOCH``)."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

import engine
from conftest import run_cli
from engine.ledger.connection import open_ledger

GOOD = (
    "<<<VERDICT:V1:AC1:NONCE=4F2C9A>>>\nANSWER=YES\n"
    'REASON="All acceptance criteria are satisfied"\n<<<END_VERDICT:AC1:NONCE=4F2C9A>>>\n'
)
BAD = "this output holds no VERDICT block at all, and it is longer than fifty characters"
T0 = 1_800_000_000


def write_pack(folder: Path, spending: str, max_attempts: int = 1) -> Path:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pack.yaml").write_text(
        f"""rulepack: budgeted
version: 1.0.0
extends: [builtin:sentinel]
triggers:
  VERDICT:
    on: [PARSE_ERROR]
    max_attempts: {max_attempts}
    after_failure: {{action: NEEDS_HUMAN, default: {{answer: UNKNOWN}}}}
{spending}""",
        encoding="utf-8",
    )
    return folder


class Scripted:
    """A model that answers from a script, one output per call, and counts its calls."""

    def __init__(self, *outputs: str, during: Callable[[int], None] | None = None) -> None:
        self.outputs = list(outputs)
        self.calls = 0
        self.during = during

    def __call__(self, prompt: str) -> str:
        self.calls += 1
        if self.during is not None:
            self.during(self.calls)
        return self.outputs.pop(0)


def run(pack: Path, item: str, model: Scripted, where: dict[str, Any]) -> Any:
    return engine.run(
        pack,
        "VERDICT",
        model,
        prompt="Judge AC1.",
        nonce="4F2C9A",
        vars={"criterion": "AC1"},
        item=item,
        **where,
    )


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Callable[[int], None]:
    """Set the engine's clock to ``T0 + seconds``."""

    def at(seconds: int) -> None:
        monkeypatch.setenv("SOURCE_DATE_EPOCH", str(T0 + seconds))

    at(0)
    return at


FLEET = """budgets:
  verdict-repairs:
    counts: repairs
    limit: 3
    per: fleet
    window: 1h
    blocks: [VERDICT]
    action: DEGRADE
"""


@pytest.mark.heavy
def test_a_fleet_budget_pays_for_its_limit_then_degrades_naming_itself(
    tmp_path: Path, ledger_url: str, clock: Callable[[int], None]
) -> None:
    pack = write_pack(tmp_path / "pack", FLEET)
    where = {"session": "s1", "ledger": ledger_url}
    actions = []
    for n in range(5):
        model = Scripted(BAD, GOOD)
        result = run(pack, f"item-{n}", model, {**where, "session": f"s{n % 2}"})
        actions.append((result.decision.action, model.calls))
    # three repairs paid for (in two sessions: one count for the fleet), then none
    assert actions == [("PROCEED", 2)] * 3 + [("DEGRADE", 1)] * 2
    spent = run(pack, "item-5", Scripted(BAD), where)
    assert spent.decision.rule == "budget:verdict-repairs"
    assert spent.decision.reason == (
        "budget 'verdict-repairs' spent: 3 of 3 repairs per hour across the fleet"
    )
    assert spent.decision.default is None  # DEGRADE is not the block's after-failure action
    clock(3601)  # the window has moved past the three repairs
    assert run(pack, "item-6", Scripted(BAD, GOOD), where).decision.action == "PROCEED"
    with open_ledger(ledger_url) as ledger:
        paid = ledger.read(lambda tx: tx.all("SELECT item FROM budget_spend ORDER BY id"))
    assert len(paid) == 1  # the calls that left the window are forgotten


def test_a_budget_per_item_run_caps_the_calls_of_each_run(tmp_path: Path) -> None:
    spending = """budgets:
  two-calls:
    counts: calls
    limit: 2
    per: item
    action: {action: STOP, reason: the item spent its calls}
"""
    pack = write_pack(tmp_path / "pack", spending, max_attempts=5)
    where = {"session": str(tmp_path / "session")}
    model = Scripted(BAD, BAD, BAD)
    result = run(pack, "one", model, where)
    assert model.calls == 2  # the first call and one repair: two calls
    assert result.decision.action == "STOP"
    assert result.decision.reason == (
        "the item spent its calls (budget 'two-calls' spent: 2 of 2 calls per item run)"
    )
    again = Scripted(BAD, GOOD)  # the next run of the item has its own count
    assert run(pack, "one", again, where).decision.action == "PROCEED"


def test_a_session_budget_counts_each_session_apart(tmp_path: Path) -> None:
    spending = """budgets:
  per-session:
    counts: repairs
    limit: 1
    per: session
    action: NEEDS_HUMAN
"""
    pack = write_pack(tmp_path / "pack", spending)
    ledger = str(tmp_path / "ledger" / "ledger.db")
    (tmp_path / "ledger").mkdir()
    first = [
        run(pack, f"i{n}", Scripted(BAD, GOOD), {"session": "a", "ledger": ledger})
        for n in range(2)
    ]
    other = run(pack, "i0", Scripted(BAD, GOOD), {"session": "b", "ledger": ledger})
    assert [r.decision.action for r in first] == ["PROCEED", "NEEDS_HUMAN"]
    assert first[1].decision.default == {"answer": "UNKNOWN"}  # the block's own default
    assert other.decision.action == "PROCEED"


BREAKER = """breakers:
  verdict-repairs:
    blocks: [VERDICT]
    on: [PARSE_ERROR]
    last: 3
    min_success: 0.5
    cooldown: 60s
    action: {action: DEGRADE, default: {answer: SKIPPED}}
"""


@pytest.mark.heavy
def test_a_breaker_opens_skips_for_its_cooldown_probes_once_and_closes(
    tmp_path: Path, clock: Callable[[int], None]
) -> None:
    pack = write_pack(tmp_path / "pack", BREAKER)
    where = {"session": str(tmp_path / "session")}
    # three repairs that fail: the breaker opens after the third
    for n in range(3):
        clock(n)
        model = Scripted(BAD, BAD)
        assert run(pack, f"failing-{n}", model, where).decision.action == "NEEDS_HUMAN"
        assert model.calls == 2  # each repair was made
    clock(10)
    skipped = Scripted(BAD)
    result = run(pack, "while-open", skipped, where)
    assert skipped.calls == 1  # no repair: the breaker's action at once
    assert result.decision.action == "DEGRADE" and result.data == {"answer": "SKIPPED"}
    assert result.decision.rule == "breaker:verdict-repairs"
    assert "breaker 'verdict-repairs' is open" in result.decision.reason
    clock(59)  # still cooling down
    assert run(pack, "still-open", Scripted(BAD), where).decision.action == "DEGRADE"

    clock(63)  # the cooldown is over: the next repair is the probe
    seen: list[str] = []

    def meanwhile(call: int) -> None:
        if call == 2:  # the probe is out: another item's repair is skipped
            other = run(pack, "during-probe", Scripted(BAD), where)
            seen.append(other.decision.action)

    probe = Scripted(BAD, GOOD, during=meanwhile)
    assert run(pack, "probe", probe, where).decision.action == "PROCEED"
    assert probe.calls == 2 and seen == ["DEGRADE"]
    clock(64)  # the probe worked: closed, repairs go again
    after = Scripted(BAD, GOOD)
    assert run(pack, "after", after, where).decision.action == "PROCEED"
    assert after.calls == 2


@pytest.mark.heavy
def test_a_failed_probe_opens_the_breaker_again(
    tmp_path: Path, clock: Callable[[int], None]
) -> None:
    pack = write_pack(tmp_path / "pack", BREAKER)
    where = {"session": str(tmp_path / "session")}
    for n in range(3):
        run(pack, f"failing-{n}", Scripted(BAD, BAD), where)
    clock(61)
    assert run(pack, "probe", Scripted(BAD, BAD), where).decision.action == "NEEDS_HUMAN"
    clock(62)  # opened again at 61: skipped until 121
    assert run(pack, "skipped", Scripted(BAD), where).decision.action == "DEGRADE"
    clock(122)
    assert run(pack, "next-probe", Scripted(BAD, GOOD), where).decision.action == "PROCEED"


def test_rules_budgets_shows_spend_and_breaker_state(
    tmp_path: Path, clock: Callable[[int], None]
) -> None:
    pack = write_pack(tmp_path / "pack", FLEET + BREAKER)
    where = {"session": str(tmp_path / "session")}
    for n in range(3):
        run(pack, f"failing-{n}", Scripted(BAD, BAD), where)
    result = run_cli("budgets", "--pack", str(pack), "--session", str(tmp_path / "session"))
    assert result.exit_code == 0
    assert result.stdout.splitlines()[2:] == [
        "budget           allows                               spent  left  then",
        "verdict-repairs  3 repairs per hour across the fleet  3      0     DEGRADE",
        "",
        "breaker          state                            recent repairs  good  "
        "opens below        then",
        "verdict-repairs  open until 2027-01-15T08:01:00Z  3               0     "
        "50% of the last 3  DEGRADE",
    ]
    fresh = run_cli("budgets", "--pack", str(pack), "--session", str(tmp_path / "none"))
    assert "verdict-repairs  3 repairs per hour across the fleet  0      3" in fresh.stdout


def test_a_fleet_calls_budget_refuses_a_first_call_the_engine_would_make(
    tmp_path: Path, ledger_url: str
) -> None:
    spending = """budgets:
  three-calls:
    counts: calls
    limit: 3
    window: 1h
    action: {action: DEGRADE, default: {answer: LATER}}
"""
    pack = write_pack(tmp_path / "pack", spending)
    where = {"session": "s", "ledger": ledger_url}
    models = [Scripted(BAD, GOOD), Scripted(BAD, GOOD), Scripted(GOOD)]
    results = [run(pack, f"item-{n}", model, where) for n, model in enumerate(models)]
    # two calls, then a first call and no repair, then no call at all: three in all
    assert [m.calls for m in models] == [2, 1, 0]
    assert [r.decision.action for r in results] == ["PROCEED", "DEGRADE", "DEGRADE"]
    never = results[2]
    assert never.data == {"answer": "LATER"} and never.decision.rule == "budget:three-calls"
    assert never.verdict.error == (
        "model not called: budget 'three-calls' spent: 3 of 3 calls per hour across the fleet"
    )
    with open_ledger(ledger_url) as ledger:
        paid = ledger.read(lambda tx: tx.one("SELECT count(*) FROM budget_spend"))
    assert paid == (3,)  # a budget over a window keeps each call with its time


class Replying:
    """A model that answers from a script with usage (``engine.ModelReply``: 40 tokens in,
    10 out, of the model ``m``), or raises what the script holds; counts its calls."""

    def __init__(self, *outputs: str | Exception) -> None:
        self.outputs = list(outputs)
        self.calls = 0

    def __call__(self, prompt: str) -> engine.ModelReply:
        self.calls += 1
        answer = self.outputs.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return engine.ModelReply(answer, tokens_in=40, tokens_out=10, model="m")


PRICED = """model_calls:
  pricing:
    m: {input: 1, output: 2, per: 1000}
"""


@pytest.mark.heavy
def test_a_token_budget_refuses_the_next_call_once_its_tokens_are_spent(
    tmp_path: Path, ledger_url: str
) -> None:
    spending = """budgets:
  session-tokens:
    counts: tokens
    limit: 150
    per: session
    action: {action: DEGRADE, default: {answer: LATER}}
"""
    pack = write_pack(tmp_path / "pack", spending + PRICED)
    where = {"session": "s", "ledger": ledger_url}
    models = [Replying(BAD, GOOD), Replying(BAD, GOOD), Replying(GOOD)]
    results = [run(pack, f"item-{n}", model, where) for n, model in enumerate(models)]
    # 100 tokens; then a first call (150: the budget is spent) and no repair; then no call
    assert [m.calls for m in models] == [2, 1, 0]
    assert [r.decision.action for r in results] == ["PROCEED", "DEGRADE", "DEGRADE"]
    assert results[1].decision.reason == (
        "budget 'session-tokens' spent: 150 of 150 tokens per session"
    )
    assert results[2].verdict.error == (
        "model not called: budget 'session-tokens' spent: 150 of 150 tokens per session"
    )
    other = run(pack, "item-0", Replying(GOOD), {**where, "session": "t"})
    assert other.decision.action == "PROCEED"  # another session has its own count


@pytest.mark.heavy
def test_a_cost_budget_is_exceeded_by_at_most_the_calls_in_flight(
    tmp_path: Path, ledger_url: str, clock: Callable[[int], None]
) -> None:
    spending = """budgets:
  hourly-cost:
    counts: cost
    limit: 0.1
    window: 1h
    action: NEEDS_HUMAN
"""
    pack = write_pack(tmp_path / "pack", spending + PRICED)
    where = {"session": "s", "ledger": ledger_url}
    # each call costs 40/1000 * 1 + 10/1000 * 2 = 0.06: the repair is asked for at 0.06
    # (under 0.1) and made; the fleet has then spent 0.12, and the next item is refused
    first, second = Replying(BAD, GOOD), Replying(GOOD)
    assert run(pack, "a", first, where).decision.action == "PROCEED"
    refused = run(pack, "b", second, {**where, "session": "t"})
    assert (first.calls, second.calls) == (2, 0)
    assert refused.decision.action == "NEEDS_HUMAN"
    assert refused.decision.reason == (
        "budget 'hourly-cost' spent: 0.12 of a cost of 0.1 per hour across the fleet"
    )
    clock(3601)  # the window has moved past both calls
    assert run(pack, "c", Replying(GOOD), where).decision.action == "PROCEED"
    if not ledger_url.startswith("postgresql"):
        shown = run_cli(
            "budgets", "--pack", str(pack), "--ledger", ledger_url, "--session", "s",
            "--format", "json",
        )  # fmt: skip
        [budget] = json.loads(shown.stdout)["budgets"]
        assert (budget["counts"], budget["spent"], budget["left"]) == ("cost", 0.06, 0.04)
        assert budget["allows"] == "a cost of 0.1 per hour across the fleet"


class RateLimitError(Exception):
    """The shape of the openai and anthropic clients' 429 (the engine's defaults classify
    it as MODEL_RATE_LIMITED)."""

    status_code = 429


RETRIED = """model_calls:
  retry: {on: [MODEL_RATE_LIMITED], max_retries: 5, initial: 0.01, ceiling: 0.05}
"""


def test_a_calls_budget_pays_for_transport_retries_and_no_breaker_judges_them(
    tmp_path: Path,
) -> None:
    spending = """budgets:
  three-calls:
    counts: calls
    limit: 3
    per: item
    action: {action: STOP, reason: the item spent its calls}
breakers:
  every-repair:
    last: 1
    min_success: 1
    cooldown: 60s
    action: DEGRADE
"""
    pack = write_pack(tmp_path / "pack", spending + RETRIED)
    where = {"session": str(tmp_path / "session")}
    limited = RateLimitError("slow down")
    # the first call and two transport retries are three calls: the third retry is refused
    model = Replying(limited, limited, limited, GOOD)
    stopped = run(pack, "resent", model, where)
    assert model.calls == 3
    assert stopped.decision.action == "STOP"
    assert stopped.decision.reason == (
        "the item spent its calls (budget 'three-calls' spent: 3 of 3 calls per item run)"
    )
    # a repair whose call is rate limited, then resent, and works: the breaker judges the
    # repair once, by the output it gave (a breaker that judged the failed call would open)
    repaired = Replying(BAD, limited, GOOD)
    assert run(pack, "repaired", repaired, where).decision.action == "PROCEED"
    assert repaired.calls == 3
    after = Replying(BAD, GOOD)
    assert run(pack, "after", after, where).decision.action == "PROCEED"
    assert after.calls == 2  # the breaker is closed: the repair went
    shown = run_cli("budgets", "--pack", str(pack), "--session", where["session"])
    assert "every-repair  closed  1               1" in shown.stdout


@pytest.mark.heavy
def test_a_session_calls_budget_without_a_window_pays_first_calls_to_its_limit(
    tmp_path: Path, ledger_url: str
) -> None:
    spending = """budgets:
  session-calls:
    counts: calls
    limit: 3
    per: session
    action: {action: DEGRADE, default: {answer: LATER}}
"""
    pack = write_pack(tmp_path / "pack", spending)
    where = {"session": "s", "ledger": ledger_url}
    models = [Scripted(BAD, GOOD), Scripted(GOOD), Scripted(GOOD)]
    results = [run(pack, f"item-{n}", model, where) for n, model in enumerate(models)]
    # a first call and its repair, a first call, then no call: three calls in all
    assert [m.calls for m in models] == [2, 1, 0]
    assert [r.decision.action for r in results] == ["PROCEED", "PROCEED", "DEGRADE"]
    assert results[2].verdict.error == (
        "model not called: budget 'session-calls' spent: 3 of 3 calls per session"
    )
    other = run(pack, "item-0", Scripted(GOOD), {**where, "session": "t"})
    assert other.decision.action == "PROCEED"
    with open_ledger(ledger_url) as ledger:
        paid = ledger.read(
            lambda tx: tx.all("SELECT scope, spent FROM budget_counters ORDER BY scope")
        )
    assert [n for _, n in paid] == [3, 1]  # each session its own count


def test_a_calls_budget_gives_back_a_repair_a_breaker_skips(
    tmp_path: Path, ledger_url: str, clock: Callable[[int], None]
) -> None:
    """A calls budget without a window pays for a repair as it is read; when the breaker
    then skips that repair, the call is given back: the budget counts the calls made."""
    spending = """budgets:
  session-calls:
    counts: calls
    limit: 100
    per: session
    action: NEEDS_HUMAN
"""
    pack = write_pack(tmp_path / "pack", spending + BREAKER, max_attempts=2)
    where = {"session": "s", "ledger": ledger_url}
    made = 0
    for n in range(3):  # three failed repairs open the breaker
        clock(n)
        model = Scripted(BAD, BAD)
        run(pack, f"failing-{n}", model, where)
        made += model.calls
    clock(10)
    skipped = Scripted(BAD)
    result = run(pack, "while-open", skipped, where)
    assert result.decision.rule == "breaker:verdict-repairs" and skipped.calls == 1
    made += skipped.calls
    with open_ledger(ledger_url) as ledger:
        paid = ledger.read(lambda tx: tx.all("SELECT spent FROM budget_counters"))
    assert made == 7 and paid == [(7,)]  # the skipped repair was given back
