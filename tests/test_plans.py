"""Several PLAN blocks in one output (the sentinel pack's PLANS contract, `count: many`);
the cases are data: tests/cases/plans_cases.yaml."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest
from sentinel_cases import NONCE, build_text, delimiters, load

import engine
from conftest import REPO, run_cli, shipped_pack

CASES: list[dict[str, Any]] = load("plans_cases.yaml")
PACK = shipped_pack("sentinel")


def output_of(case: dict[str, Any]) -> str:
    if "text" in case:
        return str(case["text"])
    parts = []
    for index, spec in enumerate(case["blocks"]):
        spec = {} if spec == "valid" else dict(spec)
        text = build_text({"block": "PLAN", **spec})
        if "nonce" in spec:
            opener, closer = delimiters("PLAN")
            text = text.replace(opener, delimiters("PLAN", nonce=spec["nonce"])[0])
            text = text.replace(closer, delimiters("PLAN", nonce=spec["nonce"])[1])
        if index:
            parts.append(spec.get("between", "\n"))
        parts.append(text + "\n")
    return "".join(parts)


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_plans_cases(case: dict[str, Any]) -> None:
    result = PACK.parse("PLANS", output_of(case), nonce=NONCE)
    if "error" in case:
        assert not result.ok
        assert result.failure is not None
        assert (result.failure.type, result.failure.message) == (case["type"], case["error"])
        return
    assert result.ok, result.error
    assert isinstance(result.data, list)
    assert [plan["task_id"] for plan in result.data] == case["task_ids"]
    assert result.warnings == case.get("warnings", [])


def test_each_plan_is_what_plan_alone_gives() -> None:
    case = CASES[0]
    several = PACK.parse("PLANS", output_of(case), nonce=NONCE)
    assert several.ok and isinstance(several.data, list)
    for spec, data in zip(case["blocks"], several.data, strict=True):
        alone = PACK.parse("PLAN", build_text({"block": "PLAN", **spec}), nonce=NONCE)
        assert alone.ok and alone.data == data


def test_plan_keeps_its_single_block_behaviour(tmp_path: Path) -> None:
    out = tmp_path / "two.txt"
    out.write_text(output_of(CASES[0]), encoding="utf-8")
    single = run_cli("parse", "--pack", "sentinel", "--block", "PLAN", "--nonce", NONCE, str(out))
    assert single.exit_code == 1
    assert single.stderr == "error: expected exactly 1 <<<PLAN: block, found 2\n"
    evaluated = run_cli("eval", "--pack", "sentinel", "--block", "PLAN", "--nonce", NONCE, str(out))
    assert evaluated.exit_code == 1  # the multi-plan guard: CYCLE_FAIL, no repair
    assert "guard:multi_plan" in evaluated.stdout


def test_cli_parse_eval_render_of_plans(tmp_path: Path) -> None:
    good = tmp_path / "two.txt"
    good.write_text(output_of(CASES[0]), encoding="utf-8")
    args = ["--pack", "sentinel", "--block", "PLANS", "--nonce", NONCE]
    parsed = run_cli("parse", *args, str(good))
    assert parsed.exit_code == 0, parsed.output
    assert [plan["task_id"] for plan in json.loads(parsed.stdout)] == ["one", "two"]
    bad = tmp_path / "bad.txt"
    bad.write_text(output_of(CASES[3]), encoding="utf-8")
    first = run_cli("eval", "--format", "json", *args, str(bad))
    assert first.exit_code == 3
    decision = json.loads(first.stdout)["decision"]
    assert decision["action"] == "REPAIR"
    rendered = run_cli("render", *args, str(bad))
    assert rendered.exit_code == 0
    assert "Produce the corrected PLAN blocks (one per task, same NONCE)" in rendered.stdout
    assert "PLANS: several PLAN blocks, version 1" in rendered.stdout  # its contract text
    assert "block 2: line 21: invalid action 'remove'" in rendered.stdout
    second = run_cli("eval", "--format", "json", *args, "--attempt", "2", str(bad))
    assert second.exit_code == 1
    assert json.loads(second.stdout)["decision"]["action"] == "CYCLE_FAIL"


def test_shared_grammar_is_checked(tmp_path: Path) -> None:
    copy = tmp_path / "sentinel"
    shutil.copytree(REPO / "rules" / "sentinel", copy)
    text = (copy / "pack.yaml").read_text(encoding="utf-8")
    (copy / "pack.yaml").write_text(
        text.replace("    grammar: PLAN\n", "    grammar: PLANZ\n"), encoding="utf-8"
    )
    result = run_cli("check", str(copy))
    assert result.exit_code == 1
    assert "`grammar: PLANZ` names no sentinel contract with a grammar of its own" in result.output
    assert "(unknown-grammar)" in result.output
    (copy / "pack.yaml").write_text(
        text.replace("    grammar: PLAN\n", "    grammar: PLAN\n    opener: x{nonce}\n"),
        encoding="utf-8",
    )
    result = run_cli("check", str(copy))
    assert result.exit_code == 1
    assert "takes its grammar from that contract; remove opener" in result.output


def test_a_copy_with_text_between_and_fewer_blocks(tmp_path: Path) -> None:
    copy = tmp_path / "sentinel"
    shutil.copytree(REPO / "rules" / "sentinel", copy)
    text = (copy / "pack.yaml").read_text(encoding="utf-8")
    text = text.replace(
        "    between: blank\n    max_blocks: 20\n", "    between: text\n    max_blocks: 2\n"
    )
    (copy / "pack.yaml").write_text(text, encoding="utf-8")
    pack = engine.load_pack(copy)
    between = next(c for c in CASES if c["name"].startswith("text between"))
    assert pack.parse("PLANS", output_of(between), nonce=NONCE).ok
    three = {"blocks": ["valid", "valid", "valid"]}
    result = pack.parse("PLANS", output_of(three), nonce=NONCE)
    assert result.error == "expected 1 to 2 <<<PLAN: blocks, found 3"
