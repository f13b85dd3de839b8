"""Packs as a team shares them, through the real CLI: `rules test` in GitHub Actions, a
pack without cases (a warning; a failure with --strict), `rules test --with-base` (the base
cases a pack changes), `rules lock` beside a pack.yaml, and the schema reference `rules
init` writes."""

from __future__ import annotations

import json
import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

import pytest
import yaml
from test_git_packs import git, lock_of, my_pack, origin

from conftest import REPO, run_cli

__all__ = ["origin"]  # the fixture of the git-pack tests: a local repository with a pack

SENTINEL = REPO / "rules" / "sentinel"


def failing_pack(tmp_path: Path) -> Path:
    """A pack made by `rules init` with one case that now fails."""
    assert run_cli("init", "mine", "--dir", str(tmp_path)).exit_code == 0
    folder = tmp_path / "mine"
    cases = folder / "tests" / "cases.yaml"
    cases.write_text(cases.read_text().replace("action: REPAIR", "action: PROCEED"))
    return folder


def test_rules_test_writes_annotations_in_github_actions(tmp_path: Path) -> None:
    folder = failing_pack(tmp_path)
    annotated = run_cli("test", str(folder), env={"GITHUB_ACTIONS": "true"})
    assert annotated.exit_code == 1
    (line,) = annotated.stdout.splitlines()
    assert line.startswith("::error file=") and "mine/tests/cases.yaml,line=1," in line
    assert 'action: expected "PROCEED", got "REPAIR"' in line
    plain = run_cli("test", str(folder))
    assert plain.exit_code == 1 and plain.stdout.startswith("FAIL mine: ")
    chosen = run_cli("test", str(folder), "--format", "text", env={"GITHUB_ACTIONS": "true"})
    assert chosen.stdout == plain.stdout


def test_a_pack_without_cases_is_a_warning_and_fails_with_strict() -> None:
    warned = run_cli("test", "builtin:core")
    assert warned.exit_code == 0
    assert warned.stderr.startswith("warning: pack 'core' has no test cases (")
    assert "0 cases" in warned.stdout
    report = json.loads(run_cli("test", "builtin:core", "--format", "json").stdout)
    (notice,) = report["notices"]
    assert (notice["rule"], notice["level"]) == ("pack-no-cases", "warning")
    assert notice["file"].endswith("core/pack.yaml")
    github = run_cli("test", "builtin:core", env={"GITHUB_ACTIONS": "true"})
    assert github.stdout.startswith("::warning file=") and "title=pack-no-cases" in github.stdout

    strict = run_cli("test", "builtin:core", "--strict", "--format", "junit")
    assert strict.exit_code == 1
    assert strict.stderr.startswith("error: pack 'core' has no test cases")
    (failure,) = ET.fromstring(strict.stdout).iter("failure")
    assert failure.get("type") == "pack-no-cases"
    sarif = json.loads(run_cli("test", "builtin:core", "--strict", "--format", "sarif").stdout)
    (result,) = sarif["runs"][0]["results"]
    assert (result["ruleId"], result["level"]) == ("pack-no-cases", "error")
    # a pack with cases is not affected by --strict
    assert run_cli("test", str(SENTINEL), "--strict").exit_code == 0


# --- --with-base ------------------------------------------------------------------------


BLOCK = "VERDICT"
LOWER_CAP = 0


def expected_changes() -> list[str]:
    """Computed from the sentinel pack's own files, not by the engine: the cases of BLOCK
    that expect a repair at an attempt the lower cap no longer allows (a repair is decided
    while the attempt is at most the cap; past it, the after-failure action)."""
    pack = yaml.safe_load((SENTINEL / "pack.yaml").read_text())
    cap = pack["triggers"][BLOCK]["max_attempts"]
    assert cap > LOWER_CAP
    cases: list[dict[str, Any]] = []
    for case_file in sorted((SENTINEL / "tests").glob("*.yaml")):
        cases.extend(yaml.safe_load(case_file.read_text()))
    return [
        case["name"]
        for case in cases
        if case.get("block") == BLOCK
        and case["expect"].get("action") == "REPAIR"
        and LOWER_CAP < case.get("attempt", 1) <= cap
    ]


def lowered_pack(tmp_path: Path) -> Path:
    folder = tmp_path / "stricter"
    folder.mkdir()
    (folder / "pack.yaml").write_text(
        "rulepack: stricter\nversion: 1.0.0\ndescription: the sentinel pack, no repairs of "
        f"{BLOCK}\nextends: [builtin:sentinel]\n"
        f"triggers:\n  {BLOCK}: {{max_attempts: {LOWER_CAP}}}\n"
    )
    return folder


@pytest.mark.heavy
def test_with_base_lists_exactly_the_base_cases_whose_action_changes(tmp_path: Path) -> None:
    wanted = expected_changes()
    assert len(wanted) >= 2
    pack = lowered_pack(tmp_path)

    ran = run_cli("test", str(pack), "--with-base", "--format", "json")
    assert ran.exit_code == 0, ran.output
    (entry,) = json.loads(ran.stdout)["packs"]
    assert [base["pack"] for base in entry["bases"]] == ["sentinel", "core"]
    sentinel, core = entry["bases"]
    assert sentinel["cases"] == 33 and core["cases"] == 0
    assert [change["name"] for change in sentinel["changed"]] == wanted
    for change in sentinel["changed"]:
        assert change["base"] == {"passed": True, "action": "REPAIR"}
        assert (change["pack"]["passed"], change["pack"]["action"]) == (False, "NEEDS_HUMAN")

    text = run_cli("test", str(pack), "--with-base")
    assert text.exit_code == 0
    listed = [line.split(": ", 2)[1] for line in text.stdout.splitlines() if "CHANGED" in line]
    assert listed == wanted
    assert "action REPAIR -> NEEDS_HUMAN" in text.stdout
    assert text.stdout.splitlines()[-1].endswith(f"; {len(wanted)} base cases changed")

    junit = ET.fromstring(run_cli("test", str(pack), "--with-base", "--format", "junit").stdout)
    (suite,) = [s for s in junit.iter("testsuite") if s.get("name", "").endswith("--with-base")]
    assert [case.get("name") for case in suite] == [f"sentinel: {name}" for name in wanted]
    assert suite.get("failures") == "0"

    strict = run_cli("test", str(pack), "--with-base", "--strict", "--format", "junit")
    assert strict.exit_code == 1
    failed = [f.get("type") for f in ET.fromstring(strict.stdout).iter("failure")]
    assert failed.count("base-case-changed") == len(wanted)


def test_with_base_is_quiet_for_a_pack_that_changes_nothing(tmp_path: Path) -> None:
    pack = tmp_path / "same"
    pack.mkdir()
    (pack / "pack.yaml").write_text(
        "rulepack: same\nversion: 1.0.0\ndescription: x\nextends: [builtin:sentinel]\n"
    )
    ran = run_cli("test", str(pack), "--with-base", "--strict", "--format", "json")
    report = json.loads(ran.stdout)
    assert [b["changed"] for b in report["packs"][0]["bases"]] == [[], []]
    assert [n["rule"] for n in report["notices"]] == ["pack-no-cases"]  # its own: none
    assert ran.exit_code == 1


# --- rules lock beside pack.yaml -----------------------------------------------------------


def test_lock_without_argument_locks_the_pack_beside_it(
    origin: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ref = f"git+{origin.as_uri()}@main#packs/shared"
    pack = my_pack(tmp_path, ref)
    monkeypatch.chdir(pack)
    locked = run_cli("lock")
    assert locked.exit_code == 0, locked.output
    assert "wrote rules.lock (1 git pack(s))" in locked.stdout
    assert len(lock_of(pack)[ref]["commit"]) == 40
    assert run_cli("--locked", "check", ".").exit_code == 0

    monkeypatch.chdir(tmp_path)
    nothing = run_cli("lock")
    assert nothing.exit_code == 2
    assert "no pack.yaml here and no rules/ folder" in nothing.stderr


# --- the schema reference of rules init ----------------------------------------------------


@pytest.mark.heavy
def test_init_schema_reference_survives_a_commit_and_a_clone(tmp_path: Path) -> None:
    import jsonschema

    from engine.format.yamldoc import read_yaml

    repo = tmp_path / "team"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    assert run_cli("init", "demo", "--dir", str(repo / "rules")).exit_code == 0
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "a pack", cwd=repo)
    clone = tmp_path / "elsewhere" / "clone"
    git("clone", "-q", str(repo), str(clone), cwd=tmp_path)

    pack_file = clone / "rules" / "demo" / "pack.yaml"
    modeline = pack_file.read_text().splitlines()[0]
    reference = modeline.removeprefix("# yaml-language-server: $schema=")
    assert reference == "rulepack.schema.json"  # relative to the pack, inside the repository
    schema_file = pack_file.parent / reference
    assert schema_file.read_text() == run_cli("schema").stdout
    schema = json.loads(schema_file.read_text())
    # as YAML 1.2 (editors) reads it: `on:` is a key, not true
    jsonschema.validate(read_yaml(pack_file).data, schema)
    assert run_cli("check", str(pack_file.parent)).exit_code == 0
    assert run_cli("test", str(pack_file.parent)).exit_code == 0


def test_with_base_runs_a_git_base_and_skips_a_partial_file(origin: Path, tmp_path: Path) -> None:
    """A git base's cases run from the fetched commit; a YAML file holding part of a pack
    has no cases of its own and is listed as not run."""
    pack = my_pack(tmp_path, f"git+{origin.as_uri()}@main#packs/shared")
    (pack.parent / "no-repairs.yaml").write_text("triggers:\n  ANSWER: {max_attempts: 0}\n")
    text = (pack / "pack.yaml").read_text()
    (pack / "pack.yaml").write_text(text.replace('"]', '", "../no-repairs.yaml"]'))
    ran = run_cli("test", str(pack), "--with-base", "--format", "json")
    assert ran.exit_code == 0, ran.output
    shared, core, partial = json.loads(ran.stdout)["packs"][0]["bases"]
    assert (shared["pack"], core["pack"]) == ("shared", "core") and shared["cases"] == 2
    assert [c["name"] for c in shared["changed"]] == ["a quoted decision is repaired once"]
    assert partial["pack"].endswith("no-repairs.yaml")
    assert "missing required key 'rulepack'" in partial["skipped"]
