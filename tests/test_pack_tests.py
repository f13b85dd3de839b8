"""`rules test`: a pack's own cases from its `tests:` list, case files and fixture folders,
golden prompts with --update, and clear errors for cases that cannot be read."""

from __future__ import annotations

import json
import shutil
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from conftest import REPO, run_cli

BAD = (REPO / "rules" / "sentinel" / "tests" / "outputs" / "VERDICT.junk.txt").read_text()
GOOD = (REPO / "examples" / "sentinel" / "verdict.txt").read_text()


def sentinel_copy(tmp_path: Path) -> Path:
    copy = tmp_path / "sentinel"
    shutil.copytree(REPO / "rules" / "sentinel", copy)
    shutil.rmtree(copy / "tests")
    (copy / "tests").mkdir()
    return copy


def cases_of(result_stdout: str) -> list[dict[str, object]]:
    return [case for pack in json.loads(result_stdout)["packs"] for case in pack["cases"]]


@pytest.mark.heavy
def test_fixture_folders_case_files_and_golden_prompts(tmp_path: Path) -> None:
    pack = sentinel_copy(tmp_path)
    fixtures = pack / "tests" / "VERDICT"
    fixtures.mkdir()
    (fixtures / "good.txt").write_text(GOOD)
    (fixtures / "good.txt.yaml").write_text(
        "nonce: 4F2C9A\nvars: {criterion: AC1}\nexpect: {status: pass, action: PROCEED}\n"
    )
    (pack / "tests" / "repairs.yaml").write_text(
        "- {name: repaired once, block: VERDICT, input_file: bad.txt, nonce: 4F2C9A,\n"
        "   vars: {criterion: AC1}, expect: {action: REPAIR, prompt: prompts/bad.md}}\n"
    )
    (pack / "tests" / "bad.txt").write_text(BAD)
    first = run_cli("test", str(pack))
    assert first.exit_code == 1
    assert "golden file prompts/bad.md does not exist (run with --update)" in first.stdout
    assert run_cli("test", str(pack), "--update").exit_code == 0
    golden = pack / "tests" / "prompts" / "bad.md"
    assert "Produce ONE corrected VERDICT block" in golden.read_text()
    passed = run_cli("test", str(pack), "--format", "json")
    assert passed.exit_code == 0
    assert [c["name"] for c in cases_of(passed.stdout)] == ["repaired once", "VERDICT/good.txt"]
    golden.write_text(golden.read_text().replace("Produce ONE", "Produce TWO"))
    changed = run_cli("test", str(pack))
    assert changed.exit_code == 1
    assert "-Produce TWO corrected VERDICT block" in changed.stdout
    assert "+Produce ONE corrected VERDICT block" in changed.stdout
    assert run_cli("test", str(pack), "--min-pass-rate", "0.5").exit_code == 0
    junit = run_cli("test", str(pack), "--format", "junit")
    assert junit.exit_code == 1
    root = ET.fromstring(junit.stdout)
    (failure,) = root.iter("failure")
    assert root.get("failures") == "1" and "repaired once" in failure.text


@pytest.mark.heavy
def test_cases_that_cannot_be_read_are_usage_errors(tmp_path: Path) -> None:
    pack = sentinel_copy(tmp_path)
    fixtures = pack / "tests" / "VERDICT"
    fixtures.mkdir()
    (fixtures / "lonely.txt").write_text(GOOD)
    missing = run_cli("test", str(pack))
    assert missing.exit_code == 2
    assert "lonely.txt: a fixture needs its expectation in lonely.txt.yaml" in missing.output
    shutil.rmtree(fixtures)
    (pack / "tests" / "broken.yaml").write_text("- {name: x, block: VERDICT, input: a\n")
    broken = run_cli("test", str(pack))
    assert broken.exit_code == 2 and "broken.yaml:" in broken.output
    (pack / "tests" / "broken.yaml").write_text(
        "- {name: x, block: VERDICT, input_file: ../../../etc/passwd, expect: {ok: true}}\n"
    )
    outside = run_cli("test", str(pack))
    assert outside.exit_code == 2
    assert "input_file '../../../etc/passwd' is outside the case's folder" in outside.output
    (pack / "tests" / "broken.yaml").write_text("- {name: x, block: VERDICT, expect: {}}\n")
    no_input = run_cli("test", str(pack))
    assert no_input.exit_code == 2 and "broken.yaml:1:3" in no_input.output
    assert "Traceback" not in no_input.output + outside.output + broken.output
