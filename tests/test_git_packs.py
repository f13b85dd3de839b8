"""Packs pinned to a git repository (`extends: ["git+URL@REV#path"]`) and `rules lock`,
against a local repository (file://): no test needs the network."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path

import pytest

from conftest import run_cli

GIT = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]


def git(*args: str, cwd: Path) -> None:
    subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True)


@pytest.fixture
def origin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("RULES_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CI", raising=False)
    repo = tmp_path / "origin"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    assert run_cli("init", "shared", "--dir", str(repo / "packs")).exit_code == 0
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "one", cwd=repo)
    return repo


def my_pack(tmp_path: Path, ref: str) -> Path:
    """A pack that is its git base and nothing more (contracts, templates, tests: the base's)."""
    folder = tmp_path / "work" / "mine"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pack.yaml").write_text(
        f'rulepack: mine\nversion: 1.0.0\nrequires: ">=0.1"\ndescription: x\nextends: ["{ref}"]\n'
    )
    return folder


def lock_of(pack: Path) -> dict[str, dict[str, str]]:
    packs: dict[str, dict[str, str]] = json.loads((pack / "rules.lock").read_text())["packs"]
    return packs


def template_of_commit(pack: Path) -> str:
    """The repair template the pack renders with, from the fetched commit."""
    rendered = run_cli(
        "render",
        "--pack",
        str(pack),
        "--block",
        "ANSWER",
        "--nonce",
        "4F2C9A",
        "--var",
        "question=Q1",
        input="<<<ANSWER:V1:Q1:NONCE=4F2C9A>>>\nDECISION=maybe, no\n"
        'REASON="a reason long enough"\n<<<END_ANSWER:Q1:NONCE=4F2C9A>>>\n',
    )
    assert rendered.exit_code == 0, rendered.output
    return rendered.stdout


def test_lock_pins_a_branch_until_upgrade(origin: Path, tmp_path: Path) -> None:
    ref = f"git+{origin.as_uri()}@main#packs/shared"
    pack = my_pack(tmp_path, ref)
    locked = run_cli("lock", str(pack))
    assert locked.exit_code == 0, locked.output
    entry = lock_of(pack)[ref]
    assert len(entry["commit"]) == 40 and entry["hash"].startswith("sha256:")
    assert run_cli("check", str(pack)).exit_code == 0
    before = template_of_commit(pack)
    template = origin / "packs" / "shared" / "templates" / "repair.md.j2"
    template.write_text(template.read_text() + "A LINE FROM THE MOVED BRANCH\n")
    git("commit", "-qam", "two", cwd=origin)
    assert template_of_commit(pack) == before  # the branch moved: nothing changes
    assert run_cli("lock", str(pack)).exit_code == 0
    assert lock_of(pack)[ref] == entry  # lock keeps its entries without --upgrade
    assert run_cli("lock", str(pack), "--upgrade").exit_code == 0
    assert lock_of(pack)[ref]["commit"] != entry["commit"]
    assert "A LINE FROM THE MOVED BRANCH" in template_of_commit(pack)


def test_locked_mode_tampering_and_offline_use(origin: Path, tmp_path: Path) -> None:
    ref = f"git+{origin.as_uri()}@main#packs/shared"
    pack = my_pack(tmp_path, ref)
    unlocked = run_cli("--locked", "check", "--format", "json", str(pack))
    assert unlocked.exit_code == 1
    rules = [f["rule"] for f in json.loads(unlocked.stdout)["packs"][0]["findings"]]
    assert rules[0] == "git-unlocked"
    assert run_cli("check", "--locked", str(pack)).exit_code == 1
    ci = run_cli("check", str(pack), env={"CI": "true"})
    assert ci.exit_code == 1 and "git-unlocked" in ci.output
    assert run_cli("lock", str(pack)).exit_code == 0
    assert run_cli("check", str(pack), env={"CI": "true"}).exit_code == 0
    shutil.rmtree(origin)  # offline: the fetched commit is in the cache
    assert run_cli("--locked", "check", str(pack)).exit_code == 0
    assert "broke its contract" in template_of_commit(pack)  # from the cached commit
    fetched = next((tmp_path / "cache" / "git").glob("*/*/packs/shared/pack.yaml"))
    assert not fetched.stat().st_mode & 0o222  # read-only
    fetched.chmod(0o644)
    fetched.write_text(fetched.read_text() + "\n# tampered\n")
    tampered = run_cli("check", "--format", "json", str(pack))
    assert tampered.exit_code == 1
    findings = json.loads(tampered.stdout)["packs"][0]["findings"]
    assert findings[0]["rule"] == "git-hash-mismatch"
    assert findings[0]["file"].endswith("mine/pack.yaml") and findings[0]["line"] == 5


def test_locked_is_an_argument_not_left_behind_by_the_cli(origin: Path, tmp_path: Path) -> None:
    """`rules --locked` locks its own command only: a program loading the same pack in the
    same process afterwards is not locked unless it says so (`locked=True`)."""
    from engine import PackError, load_pack

    pack = my_pack(tmp_path, f"git+{origin.as_uri()}@main#packs/shared")
    rendered = run_cli("--locked", "render", "--pack", str(pack), "--block", "ANSWER")
    assert rendered.exit_code == 2 and "no entry in rules.lock" in rendered.output
    assert run_cli("check", "--locked", str(pack)).exit_code == 1
    records = tmp_path / "records.jsonl"
    records.write_text('{"block": "ANSWER", "text": "x"}\n')
    backtest = run_cli("--locked", "backtest", "--pack", str(pack), str(records))
    assert backtest.exit_code == 2 and "no entry in rules.lock" in backtest.output
    assert load_pack(pack).name == "mine"
    with pytest.raises(PackError, match=r"no entry in rules\.lock"):
        load_pack(pack, locked=True)


@pytest.mark.parametrize(
    ("ref", "rule"),
    [
        ("git+file:///nowhere@main", "git-ref-invalid"),
        ("git+file:///nowhere@main#../../etc", "git-path-outside"),
        ("git+file:///nowhere/repo@main#packs/x", "git-fetch-failed"),
        ("git+--upload-pack=touch@main#x", "git-ref-invalid"),
        ("git+file:///nowhere@main\\u0000#x", "git-ref-invalid"),  # not a path error later
        ("git+fd::3@main#x", "git-ref-invalid"),
    ],
)
def test_bad_references_are_findings(ref: str, rule: str, origin: Path, tmp_path: Path) -> None:
    pack = my_pack(tmp_path, ref)
    result = run_cli("check", "--format", "json", str(pack))
    assert result.exit_code == 1
    findings = json.loads(result.stdout)["packs"][0]["findings"]
    assert findings[0]["rule"] == rule, findings[0]
