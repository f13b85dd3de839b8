"""Work shared between packs that evaluate the same output (what a backtest does for every
record): a payload read once and finished by each pack gives each pack its own verdict, and
a decision remembered by its decision key is the decision made afresh."""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from typing import Any

import pytest
from sentinel_cases import CASES, build_text, call_args

import engine
from conftest import REPO, shipped_pack
from engine.contracts.kinds.sentinel.parser import SentinelParser
from engine.core.verdict import Verdict
from engine.pack.compiled import Pack

PACK = shipped_pack("sentinel")


def _copy(folder: Path, name: str, old: str, new: str) -> Pack:
    """The sentinel pack with one line of its pack.yaml changed."""
    target = folder / name
    shutil.copytree(REPO / "rules" / "sentinel", target)
    pack_file = target / "pack.yaml"
    text, replaced = re.subn(old, new, pack_file.read_text(encoding="utf-8"))
    assert replaced == 1, old
    pack_file.write_text(text, encoding="utf-8")
    return engine.load_pack(str(target))


@pytest.fixture(scope="module")
def strict(tmp_path_factory: pytest.TempPathFactory) -> Pack:
    """REASON max 300 instead of 500: a block rule, applied after the payload is read."""
    return _copy(
        tmp_path_factory.mktemp("strict"),
        "strict",
        r"max: 500, message: REASON exceeds 500 chars",
        "max: 300, message: REASON exceeds 300 chars",
    )


def _evaluate(pack: Pack, case: dict[str, Any], shared: dict[str, Any] | None) -> Any:
    args = call_args(case)
    return pack.evaluate(
        case["block"], build_text(case), args["nonce"], args["vars"], shared=shared
    )


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_a_shared_reading_gives_each_pack_its_own_verdict(
    case: dict[str, Any], strict: Pack
) -> None:
    shared: dict[str, Any] = {}
    first = _evaluate(strict, case, shared)
    second = _evaluate(PACK, case, shared)
    assert first == _evaluate(strict, case, None)
    assert second == _evaluate(PACK, case, None)


def test_a_long_reason_read_once_fails_only_the_strict_pack(
    strict: Pack, monkeypatch: pytest.MonkeyPatch
) -> None:
    reads = []
    read = SentinelParser.read
    monkeypatch.setattr(
        SentinelParser, "read", lambda self, *a: reads.append(self.name) or read(self, *a)
    )
    text = (
        "<<<VERDICT:V1:AC1:NONCE=4F2C9A>>>\nANSWER=YES\n"
        f'REASON="{"r" * 400}"\n<<<END_VERDICT:AC1:NONCE=4F2C9A>>>'
    )
    shared: dict[str, Any] = {}
    args = ("VERDICT", text, "4F2C9A", {"criterion": "AC1"})
    assert strict.evaluate(*args, shared=shared).error == "REASON exceeds 300 chars"
    assert PACK.evaluate(*args, shared=shared).status == "pass"
    assert reads == ["VERDICT"]


def test_reading_keys_differ_when_reading_does(strict: Pack, tmp_path: Path) -> None:
    def key(pack: Pack, block: str) -> str | None:
        parser = pack.contract(block).parser  # type: ignore[attr-defined]
        assert isinstance(parser, SentinelParser)
        return parser.reading_key

    assert key(strict, "VERDICT") == key(PACK, "VERDICT")
    either = _copy(
        tmp_path, "either", r"REASON: \{form: quoted, required: true\}", "REASON: {required: true}"
    )
    assert key(either, "VERDICT") != key(PACK, "VERDICT")
    assert key(either, "PLAN") == key(PACK, "PLAN")
    many = [
        name for name, spec in PACK.model.contracts.items() if getattr(spec, "count", "") == "many"
    ]
    assert many and all(key(PACK, block) is None for block in many)


def _decisions(pack: Pack, with_output: bool = True) -> list[tuple[Any, Any]]:
    """(decision key, decision without carry) for every case's verdict at attempts 1-3."""
    out = []
    for case in CASES:
        verdict = _evaluate(pack, case, None)
        text = build_text(case)
        for attempt in (1, 2, 3):
            decision = pack.decide(verdict, output=text, attempt=attempt)
            key = pack.policy.decision_key(verdict, attempt, output=text if with_output else None)
            out.append((key, {**decision.to_json(), "carry": None}))
    return out


def test_equal_decision_keys_mean_equal_decisions() -> None:
    decisions = _decisions(PACK)
    by_key: dict[Any, Any] = {}
    for key, decision in decisions:
        assert key is not None  # the sentinel pack has no rate limits
        assert by_key.setdefault(key, decision) == decision, key
    # the guards of PARSE_ERROR rows (short output, a tool's traceback) are in the keys
    assert {key[3] for key in by_key} == {-1, 0, 1} and len(by_key) > 10
    assert any(d["rule"].startswith("guard:") for d in by_key.values())
    # without the output, a failure the guards look at has no key
    unkeyed = [d for k, d in _decisions(PACK, with_output=False) if k is None]
    assert unkeyed and all(d["rule"] != "pass" for d in unkeyed)


def test_a_guard_reading_the_context_is_in_the_decision_key() -> None:
    from engine.core.results import Failure
    from engine.policy.triggers.decide import compile_policy, decide
    from engine.policy.triggers.model import Guard

    trigger = PACK.model.triggers["VERDICT"].model_copy(
        update={"skip_when": [Guard(name="strict", when="mode == 'strict'", reason="strict")]}
    )
    model = PACK.model.model_copy(update={"triggers": {**PACK.model.triggers, "VERDICT": trigger}})
    policy = compile_policy(model)
    failing = Verdict("VERDICT", "fail", [Failure("PARSE_ERROR", "x")], [], None, {})
    decisions = {}
    for mode in ("strict", "lenient", "strict"):
        context = {"mode": mode}
        key = policy.decision_key(failing, 1, output="o", context=context)
        decision = decide(policy, failing, output="o", attempt=1, context=context)
        assert decisions.setdefault(key, decision.rule) == decision.rule
    assert sorted(decisions.values()) == ["attempt:1", "guard:strict"]


def test_a_block_with_rate_limits_has_no_decision_key_when_it_passes() -> None:
    pack = engine.load_pack("gap-review")
    assert "engineer" in pack.model.rate_limits
    passing = Verdict("engineer", "pass", [], [], None, pack.severities)
    assert pack.policy.decision_key(passing, 1) is None


def test_a_judge_remembers_a_bounded_number_of_decisions() -> None:
    from engine.backtest import REMEMBERED_DECISIONS, Judge

    judge = Judge(PACK)
    record = {"block": "VERDICT", "nonce": "4F2C9A", "attempt": 1}
    verdict = Verdict("VERDICT", "pass", [], [], {"answer": "YES"}, PACK.severities)
    assert PACK.policy.decision_key(verdict, 1) is not None
    for attempt in range(1, REMEMBERED_DECISIONS + 50):
        outcome = judge.outcome(verdict, {**record, "attempt": attempt}, "text")
        assert outcome is not None and outcome.action == "PROCEED"
    assert len(judge._decisions) <= REMEMBERED_DECISIONS


def test_judges_sharing_what_they_remember_keep_status_and_policy_apart(
    tmp_path: Path,
) -> None:
    """A pass and a warn have the same decision key, and so do two policies' decisions on
    the same failure: what judges remember is keyed by status and policy key too."""
    from engine.backtest import Judge
    from engine.backtest.judge import policy_key
    from engine.core.results import Failure

    exhausted = _copy(
        tmp_path,
        "exhausted",
        r"(  VERDICT:\n(?:.*\n){1})    max_attempts: 1",
        r"\g<1>    max_attempts: 0",
    )
    remembered: dict[Any, Any] = {}
    judges = [Judge(PACK, remembered), Judge(exhausted, remembered)]
    keys = [policy_key(PACK, "VERDICT"), policy_key(exhausted, "VERDICT")]
    assert keys[0] != keys[1]
    record = {"block": "VERDICT", "nonce": "4F2C9A", "attempt": 1}
    passing = Verdict("VERDICT", "pass", [], [], {"answer": "YES"}, PACK.severities)
    warning = Verdict("VERDICT", "warn", [], ["w"], {"answer": "YES"}, PACK.severities)
    failing = Verdict(
        "VERDICT",
        "fail",
        [Failure("PARSE_ERROR", "line 1: ANSWER must be unquoted")],
        [],
        None,
        PACK.severities,
    )
    output = "x" * 60  # no guard holds (short_output needs fewer than 50 characters)
    outcomes = [
        judges[0].outcome(passing, record, output, keys[0]),
        judges[0].outcome(warning, record, output, keys[0]),
        judges[0].outcome(failing, record, output, keys[0]),
        judges[1].outcome(failing, record, output, keys[1]),
    ]
    assert [(o.status, o.action) for o in outcomes if o] == [
        ("pass", "PROCEED"),
        ("warn", "PROCEED"),
        ("fail", "REPAIR"),
        ("fail", "NEEDS_HUMAN"),
    ]


def test_a_repeated_error_is_in_the_decision_key() -> None:
    """stop_on_repeat compares the error with the last previous one: the key says whether
    it repeats, and the decision indeed differs."""
    from engine.core.results import Failure
    from engine.policy.triggers.decide import compile_policy, decide

    trigger = PACK.model.triggers["VERDICT"].model_copy(
        update={"skip_when": [], "stop_on_repeat": True, "max_attempts": 3}
    )
    model = PACK.model.model_copy(update={"triggers": {**PACK.model.triggers, "VERDICT": trigger}})
    policy = compile_policy(model)
    failing = Verdict("VERDICT", "fail", [Failure("PARSE_ERROR", "x")], [], None, {})
    assert policy.decision_key(failing, 2) == ("VERDICT", "PARSE_ERROR", 2, -1, False)
    assert policy.decision_key(failing, 2, ["x"]) == ("VERDICT", "PARSE_ERROR", 2, -1, True)
    assert policy.decision_key(failing, 2, ["x", "y"]) == ("VERDICT", "PARSE_ERROR", 2, -1, False)
    alone = decide(policy, failing, output="o", attempt=2)
    repeated = decide(policy, failing, output="o", attempt=2, previous_errors=["x"])
    assert (alone.rule, repeated.rule) == ("attempt:2", "repeat")
