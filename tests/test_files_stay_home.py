"""Issue 35, files: nothing read from rules.lock makes a folder or runs git before it is
checked, and hashing a pack (its revision, its cache fingerprint, a git pack's locked
hash) never reads through a symlink out of the pack nor past the pack size bound. The
unused symlink to a large file is a sparse file here (cheap to make, 1.2 GB to read)."""

from __future__ import annotations

import json
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from conftest import REPO, run_cli, script
from engine.format.packfolder import MAX_PACK_BYTES, PackTooLarge
from engine.pack.revision import pack_revision

BIG = 1_200_000_000
SENTINEL = ["--block", "VERDICT", "--nonce", "4F2C9A", "--var", "criterion=AC1"]
GOOD = (REPO / "examples" / "sentinel" / "verdict.txt").read_bytes()


GIT = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]


def git(*args: str, cwd: Path) -> None:
    subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True)


def my_pack(tmp_path: Path, ref: str) -> Path:
    """A pack that is its git base and nothing more."""
    folder = tmp_path / "work" / "mine"
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pack.yaml").write_text(
        f'rulepack: mine\nversion: 1.0.0\nrequires: ">=0.1"\ndescription: x\nextends: ["{ref}"]\n'
    )
    return folder


@pytest.fixture
def origin(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A git repository holding a pack, the cache in ``tmp_path/cache``."""
    monkeypatch.setenv("RULES_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv("CI", raising=False)
    repo = tmp_path / "origin"
    repo.mkdir()
    git("init", "-q", "-b", "main", cwd=repo)
    assert run_cli("init", "shared", "--dir", str(repo / "packs")).exit_code == 0
    git("add", "-A", cwd=repo)
    git("commit", "-qm", "one", cwd=repo)
    return repo


def _lock(pack: Path, ref: str, commit: str, hash_: str = "sha256:" + "0" * 64) -> None:
    entry = {"commit": commit, "hash": hash_}
    (pack / "rules.lock").write_text(json.dumps({"version": 1, "packs": {ref: entry}}))


@pytest.mark.parametrize(
    "commit",
    ["../../../../x/made/here", "/abs/olute", "-c core.x=y", "A" * 40, "0" * 39, "0" * 41],
)
def test_a_lock_entry_that_is_no_commit_makes_no_folder(
    origin: Path, tmp_path: Path, commit: str
) -> None:
    ref = f"git+{origin.as_uri()}@main#packs/shared"
    pack = my_pack(tmp_path, ref)
    _lock(pack, ref, commit)
    checked = run_cli("check", str(pack), "--format", "json")
    assert checked.exit_code == 1, checked.output
    (result,) = json.loads(checked.stdout)["packs"]
    (finding,) = [f for f in result["findings"] if f["level"] == "error"]
    assert finding["rule"] == "git-lock-invalid"
    assert "40 lowercase hex digits" in finding["message"]
    assert not (tmp_path / "cache").exists()  # no mkdir, no clone
    assert not any(p.name == "made" for p in tmp_path.rglob("*"))


def test_a_lock_entry_whose_name_is_no_git_reference_is_refused(
    origin: Path, tmp_path: Path
) -> None:
    ref = f"git+{origin.as_uri()}@main#packs/shared"
    pack = my_pack(tmp_path, ref)
    _lock(pack, f"git+{origin.as_uri()}@main#../../etc", "0" * 40)
    checked = run_cli("check", str(pack))
    assert checked.exit_code == 1 and "git-lock-invalid" in checked.output
    assert not (tmp_path / "cache").exists()


def _sparse(path: Path, size: int = BIG) -> Path:
    with open(path, "wb") as handle:
        handle.truncate(size)
    return path


def _sentinel_with_link(tmp_path: Path) -> Path:
    pack = tmp_path / "pack"
    shutil.copytree(REPO / "rules" / "sentinel", pack)
    (pack / "unused.bin").symlink_to(_sparse(tmp_path / "huge.bin"))
    return pack


@pytest.mark.heavy
def test_rules_check_reports_a_symlink_out_of_a_local_pack_quickly(tmp_path: Path) -> None:
    """The row: an unused symlink to a 1.2 GB file outside; `rules check` says path-escape
    within seconds, reading none of it."""
    pack = _sentinel_with_link(tmp_path)
    started = time.monotonic()
    checked = subprocess.run(
        [script("rules"), "check", str(pack)], capture_output=True, cwd=tmp_path, timeout=60
    )
    assert time.monotonic() - started < 10
    assert checked.returncode == 1, checked.stdout
    shown = checked.stdout.decode()
    assert "unused.bin:1:1: [error] the symlink 'unused.bin' points outside the pack" in shown
    assert "(path-escape)" in shown


@pytest.mark.heavy
def test_eval_session_does_not_read_through_the_link(tmp_path: Path) -> None:
    """`eval --session` loads the pack (refused: the same finding) without hashing the
    1.2 GB file for a revision."""
    pack = _sentinel_with_link(tmp_path)
    started = time.monotonic()
    done = subprocess.run(
        [script("rules"), "eval", "--pack", str(pack), *SENTINEL, "--session", "s"],
        input=GOOD, capture_output=True, cwd=tmp_path, timeout=60,
    )  # fmt: skip
    assert time.monotonic() - started < 10
    assert done.returncode == 2
    assert b"points outside the pack" in done.stderr


def test_a_revision_never_reads_through_a_link_out_of_the_pack(tmp_path: Path) -> None:
    pack = _sentinel_with_link(tmp_path)
    started = time.monotonic()
    first = pack_revision([pack / "pack.yaml"])
    assert time.monotonic() - started < 5
    (tmp_path / "huge.bin").write_bytes(b"changed")  # what it points to is not its content
    assert pack_revision([pack / "pack.yaml"]) == first
    (pack / "unused.bin").unlink()
    (pack / "unused.bin").symlink_to(tmp_path / "elsewhere.bin")
    assert pack_revision([pack / "pack.yaml"]) != first  # where it points is


def test_a_pack_past_the_size_bound_is_a_finding_and_an_error(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    shutil.copytree(REPO / "rules" / "sentinel", pack)
    _sparse(pack / "data.bin", MAX_PACK_BYTES + 1)
    checked = run_cli("check", str(pack), "--format", "json")
    assert checked.exit_code == 1
    rules = [f["rule"] for f in json.loads(checked.stdout)["packs"][0]["findings"]]
    assert rules == ["pack-too-large"]
    with pytest.raises(PackTooLarge, match="64 MiB"):
        pack_revision([pack / "pack.yaml"])


def test_a_git_pack_with_a_link_out_of_it_is_refused_without_reading_it(
    origin: Path, tmp_path: Path
) -> None:
    """The row's git case: the fetched commit holds the link; locking or checking it
    reports path-escape within seconds, and nothing outside the cache is touched."""
    target = _sparse(tmp_path / "huge.bin")
    (origin / "packs" / "shared" / "unused.bin").symlink_to(target)
    git("add", "-A", cwd=origin)
    git("commit", "-qm", "link", cwd=origin)
    mode = target.stat().st_mode
    ref = f"git+{origin.as_uri()}@main#packs/shared"
    pack = my_pack(tmp_path, ref)
    started = time.monotonic()
    locked = run_cli("lock", str(pack))
    checked = run_cli("check", str(pack))
    assert time.monotonic() - started < 20
    assert locked.exit_code == 1 and "(path-escape)" in locked.output
    assert checked.exit_code == 1 and "(path-escape)" in checked.output
    assert target.stat().st_mode == mode  # the checkout's read-only pass left it alone


def test_a_git_url_that_would_run_a_command_is_refused(tmp_path: Path) -> None:
    """git's ext:: transport runs a command: only the transports that fetch are allowed."""
    made = tmp_path / "made-by-ext"
    command = tmp_path / "command.sh"
    command.write_text(f"#!/bin/sh\ntouch {made}\n")
    command.chmod(0o755)
    for url in (f"ext::{command}", f"fd::{command}", "ftp://127.0.0.1/x"):
        pack = my_pack(tmp_path, f"git+{url}@main#p")
        for ci in ("true", "false"):  # refused before the lock is read, so CI=true alike
            checked = run_cli("check", str(pack), env={"CI": ci})
            assert checked.exit_code == 1 and "(git-ref-invalid)" in checked.output, url
            assert "only the file, git, http, https and ssh transports" in checked.output
    assert not made.exists()
