"""A contract kind from outside the engine (lines_kind.py, beside this file) registered
through the registry API and through an entry point: a pack using it passes `rules check`,
`rules test` and `rules eval`, and `rules schema` lists it."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from lines_kind import KIND, LinesContract

from conftest import REPO, PackMaker, run_cli
from engine.contracts import registry
from engine.core.errors import EngineError
from engine.pack.sections import rulepack_model

PACK = """
rulepack: toy-lines
version: 1.0.0
extends: [builtin:core]
contracts:
  haiku:
    kind: lines
    count: 3
tests:
  - name: three lines pass
    block: haiku
    input: "old pond\\nfrog leaps in\\nwater's sound\\n"
    expect: {status: pass, data: {lines: 3}}
  - name: two lines fail
    block: haiku
    input: "old pond\\n\\nfrog leaps in\\n"
    expect: {status: fail, failure: WRONG_FORMAT, message: "expected 3 non-empty lines, found 2"}
"""


@pytest.fixture
def lines_kind() -> Iterator[None]:
    registry.register_kind(KIND)
    yield
    registry.unregister_kind(KIND.name)


def test_a_registered_kind_passes_check_test_and_eval(
    lines_kind: None, make_pack: PackMaker, tmp_path: Path
) -> None:
    folder = make_pack(PACK)
    checked = run_cli("check", str(folder))
    assert checked.exit_code == 0, checked.output
    tested = run_cli("test", str(folder))
    assert tested.exit_code == 0, tested.output
    assert "1 pack, 2 cases: 2 passed, 0 failed" in tested.output, tested.output

    good, bad = tmp_path / "good.txt", tmp_path / "bad.txt"
    good.write_text("a\nb\nc\n", encoding="utf-8")
    bad.write_text("a\n", encoding="utf-8")
    evaluate = ("eval", "--pack", str(folder), "--block", "haiku", "--format", "json")
    passed = run_cli(*evaluate, str(good))
    assert passed.exit_code == 0, passed.output
    assert json.loads(passed.output)["verdict"]["status"] == "pass"
    failed = run_cli(*evaluate, str(bad))
    verdict = json.loads(failed.output)["verdict"]
    assert failed.exit_code == 1, failed.output
    assert verdict["status"] == "fail"
    assert verdict["failures"][0]["message"] == "expected 3 non-empty lines, found 1"


def test_the_kinds_own_check_and_the_models_validation_are_findings(
    lines_kind: None, make_pack: PackMaker
) -> None:
    too_many = make_pack(PACK.replace("count: 3", "count: 5000"), name="too_many")
    result = run_cli("check", str(too_many))
    assert result.exit_code == 1
    assert "asks for 5000 lines (at most 1000) (lines-too-many)" in result.output
    unknown_key = make_pack(PACK.replace("count: 3", "count: 3\n    colour: red"), name="key")
    result = run_cli("check", str(unknown_key))
    assert result.exit_code == 1
    assert "unknown key 'colour' in contracts.haiku" in result.output


def test_rules_schema_lists_a_kind_registered_after_a_first_load(lines_kind: None) -> None:
    registry.unregister_kind(KIND.name)
    before = rulepack_model().model_json_schema()
    assert "LinesContract" not in before["$defs"]
    registry.register_kind(KIND)
    result = run_cli("schema")
    schema = json.loads(result.output)
    assert schema["$defs"]["LinesContract"]["properties"]["kind"]["const"] == "lines"
    assert "lines" in json.dumps(schema["properties"]["contracts"])


def test_without_the_kind_a_pack_using_it_is_an_unknown_kind(make_pack: PackMaker) -> None:
    result = run_cli("check", str(make_pack(PACK)))
    assert result.exit_code == 1
    assert (
        "contracts.haiku: unknown contract kind 'lines' (the kinds are: sentinel, markdown, "
        "json, text, tool_call) (unknown-kind)"
    ) in result.output


def test_a_kind_is_registered_once_and_its_model_names_it(lines_kind: None) -> None:
    with pytest.raises(EngineError, match="already registered"):
        registry.register_kind(KIND)

    class Misnamed:
        name = "rows"
        model = LinesContract

    with pytest.raises(EngineError, match=r'`kind: Literal\["rows"\]`'):
        registry.register_kind(Misnamed())  # type: ignore[arg-type]


def test_a_pack_of_a_kind_from_outside_has_no_image(lines_kind: None, make_pack: PackMaker) -> None:
    """The kind's code may read its models other than by their fields: such a pack is
    loaded and checked by every command, never read back from an image."""
    from engine.pack.image import pack_image
    from engine.pack.loaded import load_pack

    assert pack_image(load_pack(make_pack(PACK))) is None
    assert pack_image(load_pack("sentinel")) is None  # a kind registered: the root differs


def _with_distribution(tmp_path: Path, entry_point: str) -> dict[str, str]:
    """An installed distribution declaring ``entry_point`` in group rules_engine.kinds (a
    .dist-info folder on the path), and the environment of a process that sees it."""
    site = tmp_path / "site"
    info = site / "toy_kinds-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-kinds\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[rules_engine.kinds]\n{entry_point}\n")
    path = os.pathsep.join([str(site), str(Path(__file__).parent), str(REPO)])
    return {**os.environ, "PYTHONPATH": path}


def _rules(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    command = [sys.executable, "-m", "engine", *args]
    return subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)


@pytest.mark.heavy
def test_an_entry_point_registers_the_kind(make_pack: PackMaker, tmp_path: Path) -> None:
    env = _with_distribution(tmp_path, "lines = lines_kind:KIND")
    folder = make_pack(PACK)
    checked = _rules(env, "check", str(folder))
    assert checked.returncode == 0, checked.stdout + checked.stderr
    tested = _rules(env, "test", str(folder))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "2 passed, 0 failed" in tested.stdout
    schema = json.loads(_rules(env, "schema").stdout)
    assert "LinesContract" in schema["$defs"]
    listed = json.loads(_rules(env, "check", "--list-rules", "--format", "json").stdout)
    assert {
        "id": "lines-too-many",
        "description": "A lines contract asks for more lines than the kind checks.",
        "fix": "Ask for 1000 lines or fewer.",
    } in listed


def test_without_the_kind_its_rules_are_not_listed(tmp_path: Path) -> None:
    env = _with_distribution(tmp_path, "")
    listed = json.loads(_rules(env, "check", "--list-rules", "--format", "json").stdout)
    assert "lines-too-many" not in [row["id"] for row in listed]
    assert "unknown-key" in [row["id"] for row in listed]


def test_a_broken_entry_point_is_named(make_pack: PackMaker, tmp_path: Path) -> None:
    """A pack using the kind gets a `plugin-broken` finding naming the entry point (exit 1,
    as for any pack with errors; issue 35)."""
    env = _with_distribution(tmp_path, "lines = lines_kind:NO_SUCH_KIND")
    result = _rules(env, "check", str(make_pack(PACK)))
    assert result.returncode == 1, result.stdout + result.stderr
    assert "the contract kind 'lines' (lines_kind:NO_SUCH_KIND) cannot be loaded" in (
        result.stdout + result.stderr
    )
    assert "(plugin-broken)" in result.stdout
    assert "Traceback" not in result.stderr


def test_a_kind_redefining_a_rule_of_the_engine_is_named(tmp_path: Path) -> None:
    env = _with_distribution(tmp_path, "clash = clash_kind:KIND")
    (tmp_path / "site" / "clash_kind.py").write_text(
        "from engine.plugins import FindingRule\n\n"
        'CLASH = FindingRule("unknown-key", "Another meaning.", "Another fix.")\n'
        "KIND = None\n"
    )
    result = _rules(env, "check", "--list-rules")
    assert result.returncode == 2, result.stdout + result.stderr
    assert result.stderr == (
        "error: the contract kind 'clash' (clash_kind:KIND) cannot be loaded: "
        "the finding rule 'unknown-key' is defined twice\n"
    )
