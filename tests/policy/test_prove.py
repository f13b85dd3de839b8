"""`rules check --prove` and the worst case `rules explain` shows: every shipped pack passes;
a pack whose worst case is over its budget, one whose failure types never reach a final
action and one whose rate limit can ask again without a bound are findings at the place
that causes them."""

from __future__ import annotations

import json

import pytest

from conftest import REPO, PackMaker, run_cli
from engine.core.resources import builtin_pack_names

OVER_BUDGET = """\
rulepack: over-budget
version: 1.0.0
extends: [builtin:sentinel]
triggers:
  VERDICT:
    on: [PARSE_ERROR]
    max_attempts: 3
    after_failure: NEEDS_HUMAN
budgets:
  two-calls:
    counts: calls
    limit: 2
    per: item
    blocks: [VERDICT]
    action: STOP
"""

ENDLESS = """\
rulepack: endless
version: 1.0.0
extends: [builtin:sentinel]
triggers:
  VERDICT:
    on: [PARSE_ERROR]
    max_attempts: 2
    after_failure: NEEDS_HUMAN
    on_not_retriable: REVISE
"""


@pytest.mark.heavy
def test_every_shipped_pack_passes_the_proof() -> None:
    result = run_cli("check", "--prove", str(REPO / "rules"))
    assert result.exit_code == 0, result.stdout
    builtins = [f"builtin:{name}" for name in builtin_pack_names()]
    result = run_cli("check", "--prove", "--format", "json", *builtins)
    assert result.exit_code == 0, result.stdout
    assert all(not pack["findings"] for pack in json.loads(result.stdout)["packs"])


def test_a_worst_case_over_a_budget_is_a_finding_at_the_budget(make_pack: PackMaker) -> None:
    folder = make_pack(OVER_BUDGET)
    assert run_cli("check", str(folder)).exit_code == 0  # without --prove: a valid pack
    result = run_cli("check", "--prove", str(folder))
    assert result.exit_code == 1
    [line] = [x for x in result.stdout.splitlines() if "[error]" in x]
    assert line.endswith(
        "pack.yaml:12:12: [error] block VERDICT: the worst case is 4 calls per item run, "
        "over budget 'two-calls' (2 per item run): the budget, not the trigger, ends such "
        "items (worst-case-over-budget)"
    )


def test_a_failure_type_without_a_final_action_is_a_finding_at_its_policy(
    make_pack: PackMaker,
) -> None:
    folder = make_pack(ENDLESS)
    result = run_cli("check", "--prove", str(folder))
    assert result.exit_code == 1
    [line] = [x for x in result.stdout.splitlines() if "[error]" in x]
    assert line.endswith(
        "pack.yaml:9:23: [error] block VERDICT: OUTPUT_TOO_LARGE, EXECUTION_FAILED, "
        "MODEL_TIMEOUT, MODEL_RATE_LIMITED, MODEL_UNAVAILABLE, MODEL_ERROR never "
        "reach a final action (on_not_retriable REVISE is not final): the loop has no bound "
        "(no-final-action)"
    )


def test_a_rate_limit_asking_again_on_passing_outputs_is_an_unbounded_loop(
    make_pack: PackMaker,
) -> None:
    folder = make_pack(
        """\
        rulepack: asks-again
        version: 1.0.0
        extends: [builtin:sentinel]
        rate_limits:
          VERDICT:
            count: {pattern: "YES"}
            limits:
              - {name: too-many, threshold: 0, action: REVISE, message: "again"}
        """
    )
    result = run_cli("check", "--prove", "--format", "json", str(folder))
    assert result.exit_code == 1
    [finding] = json.loads(result.stdout)["packs"][0]["findings"]
    assert finding["rule"] == "unbounded-loop"
    assert "rate limit 'too-many' takes REVISE" in finding["message"]


def test_a_calls_budget_across_items_warns_that_first_calls_it_did_not_make_count_only(
    make_pack: PackMaker,
) -> None:
    folder = make_pack(
        """\
        rulepack: fleet-calls
        version: 1.0.0
        extends: [builtin:sentinel]
        budgets:
          calls-per-hour:
            counts: calls
            limit: 100
            window: 1h
            blocks: [VERDICT]
            action: STOP
        """
    )
    result = run_cli("check", "--prove", str(folder))
    assert result.exit_code == 0  # a warning
    assert "(first-calls-not-refused)" in result.stdout
    assert "budget 'calls-per-hour' (100 calls per 3600 s per fleet)" in result.stdout


@pytest.mark.parametrize("output_format", ["text", "md"])
def test_explain_shows_the_worst_case_and_the_spending_policy(
    make_pack: PackMaker, output_format: str
) -> None:
    folder = make_pack(
        OVER_BUDGET
        + """\
breakers:
  verdict-repairs:
    blocks: [VERDICT]
    last: 5
    min_success: 0.4
    cooldown: 5m
    action: NEEDS_HUMAN
"""
    )
    result = run_cli("explain", "--pack", str(folder), "--format", output_format, "VERDICT")
    assert result.exit_code == 0
    assert "| VERDICT | 4     | 3       | 0                 |" in result.stdout
    assert "| two-calls | 2 calls | item | VERDICT | STOP |" in result.stdout
    assert "| verdict-repairs | below 40% good of the last 5 | 5m       |" in result.stdout


def test_the_spending_actions_must_end_the_item(make_pack: PackMaker) -> None:
    folder = make_pack(
        """\
        rulepack: not-final
        version: 1.0.0
        extends: [builtin:sentinel]
        budgets:
          few: {counts: repairs, limit: 1, action: REPAIR}
        breakers:
          flaky: {min_success: 0.5, last: 2, min_repairs: 3, cooldown: 60, action: RETRY}
        """
    )
    result = run_cli("check", str(folder))
    assert result.exit_code == 1
    rules = [x.rsplit("(", 1)[1] for x in result.stdout.splitlines() if "[error]" in x]
    assert sorted(rules) == [
        "breaker-never-opens) [fix: lower min_repairs or raise last]",
        "spending-action-not-final) [fix: take a final action instead of the call the "
        "budget cannot pay for]",
        "spending-action-not-final) [fix: take a final action instead of the repair the "
        "breaker skips]",
    ]


TRANSPORT = """\
rulepack: resent
version: 1.0.0
extends: [builtin:sentinel]
triggers:
  VERDICT:
    on: [PARSE_ERROR]
    max_attempts: 1
    after_failure: NEEDS_HUMAN
model_calls:
  retry: {on: [MODEL_RATE_LIMITED], max_retries: 2, initial: 1, ceiling: 10}
  pricing:
    cheap: {input: 1, output: 2, per: 1000}
    dear: {input: 10, output: 20, per: 1000}
budgets:
  five-calls:
    blocks: [VERDICT]
    counts: calls
    limit: 5
    per: item
    action: STOP
  few-tokens:
    blocks: [VERDICT]
    counts: tokens
    limit: 100
    per: item
    action: STOP
  little-cost:
    blocks: [VERDICT]
    counts: cost
    limit: 0.01
    per: item
    action: STOP
"""


def test_the_worst_case_counts_transport_retries_and_floors_tokens_and_cost(
    make_pack: PackMaker,
) -> None:
    folder = make_pack(TRANSPORT)
    result = run_cli("check", "--prove", str(folder))
    assert result.exit_code == 1
    errors = [x.split("] ", 1)[1] for x in result.stdout.splitlines() if "[error]" in x]
    # two calls (the first and one repair), each resent up to twice: six
    assert errors[0] == (
        "block VERDICT: the worst case is 6 calls per item run, over budget 'five-calls' "
        "(5 per item run): the budget, not the trigger, ends such items (worst-case-over-budget)"
    )
    # the repair's prompt alone takes thousands of tokens; at the cheapest input price
    assert errors[1].startswith("block VERDICT: the worst case is at least 60")
    assert "tokens per item run, over budget 'few-tokens' (100 per item run)" in errors[1]
    assert errors[2].startswith("block VERDICT: the worst case is a cost of at least 6.0")
    assert "per item run, over budget 'little-cost' (0.01 per item run)" in errors[2]
    explained = run_cli("explain", "--pack", str(folder), "--format", "md", "VERDICT")
    assert "| VERDICT | 6     | 1       | 2                 |" in explained.stdout
    assert "| little-cost | a cost of 0.01 | item | VERDICT | STOP |" in explained.stdout


def test_a_cost_budget_without_prices_never_spends(make_pack: PackMaker) -> None:
    folder = make_pack(
        OVER_BUDGET.replace("counts: calls\n    limit: 2", "counts: cost\n    limit: 0.5")
    )
    result = run_cli("check", str(folder))
    assert result.exit_code == 1
    assert "budget 'two-calls' counts cost, but model_calls.pricing prices no model" in (
        result.stdout
    )
    half = make_pack(OVER_BUDGET.replace("limit: 2", "limit: 2.5"), name="half")
    refused = run_cli("check", str(half))
    assert refused.exit_code == 1 and "a budget of calls takes a whole number" in refused.stdout
