"""The compiled-pack cache on a hostile or broken machine: whatever happens to the cache
folder, its key or its entries (moved, edited, truncated, huge, written by many processes at
once, by another user), a command says what it says without a cache, and never a traceback.
Real processes of the `rules` script, real files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import REPO, SCRIPTS

RULE = "{check: max_len, field: REASON, max: 500, message: REASON exceeds 500 chars}"
VERDICT = (
    '<<<VERDICT:V1:AC1:NONCE=4F2C9A>>>\nANSWER=YES\nREASON="' + "r" * 400 + '"\n'
    "<<<END_VERDICT:AC1:NONCE=4F2C9A>>>\n"
)
NOBODY = 65534
PARSE = ["--block", "VERDICT", "--nonce", "4F2C9A", "--var", "criterion=AC1"]


def _rules(
    cache: Path, *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPTS / "rules"), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "RULES_CACHE_DIR": str(cache), **(env or {})},
    )


def _parse(pack: Path, cache: Path) -> tuple[int, str, str]:
    done = _rules(cache, "parse", "--pack", str(pack), *PARSE, stdin=VERDICT)
    return done.returncode, done.stdout, done.stderr


def _sentinel(folder: Path, max_reason: int = 500) -> Path:
    """A copy of the sentinel pack in ``folder`` whose REASON may be ``max_reason`` long."""
    pack = folder
    shutil.copytree(REPO / "rules" / "sentinel", pack)
    text = (pack / "pack.yaml").read_text(encoding="utf-8")
    assert RULE in text
    shorter = RULE.replace("500", str(max_reason))
    (pack / "pack.yaml").write_text(text.replace(RULE, shorter), encoding="utf-8")
    return pack


def _only_entry(cache: Path, purpose: str) -> Path:
    [entry] = cache.glob(f"{purpose}-*.json")
    return entry


def test_an_entry_moved_to_the_name_of_another_packs_entry_is_not_used(tmp_path: Path) -> None:
    """Anyone who can write into the cache folder can copy files there: an entry of one pack
    under the name of another's must not give the other pack the first one's rules."""
    lenient, strict = _sentinel(tmp_path / "lenient"), _sentinel(tmp_path / "strict", 300)
    cache = tmp_path / "cache"
    assert _parse(lenient, cache)[0] == 0
    lenient_entry = _only_entry(cache, "parse").read_bytes()
    expected = _parse(strict, cache)
    assert expected[0] == 1 and "REASON exceeds 300 chars" in expected[2]
    strict_entry = next(p for p in cache.glob("parse-*.json") if p.read_bytes() != lenient_entry)
    strict_entry.write_bytes(lenient_entry)
    assert _parse(strict, cache) == expected


def test_an_entry_whose_list_of_files_was_emptied_is_not_used(tmp_path: Path) -> None:
    """The files an entry holds for are part of what it signs: emptied, a stale entry would
    never be found stale again."""
    pack, cache = _sentinel(tmp_path / "pack"), tmp_path / "cache"
    assert _parse(pack, cache)[0] == 0
    entry_path = _only_entry(cache, "parse")
    entry = json.loads(entry_path.read_text(encoding="utf-8"))
    _sentinel(tmp_path / "stricter", 300)
    shutil.copy(tmp_path / "stricter" / "pack.yaml", pack / "pack.yaml")
    entry.update(folders=[], files={})
    entry_path.write_text(json.dumps(entry), encoding="utf-8")
    again = _parse(pack, cache)
    assert again[0] == 1 and again[2] == "error: REASON exceeds 300 chars\n"


@pytest.fixture
def reachable(tmp_path: Path) -> Iterator[Path]:
    """A folder of this test that the unprivileged user of ``_as_another_user`` can reach
    (pytest's own folders are its owner's only)."""
    folder = Path(tempfile.mkdtemp(prefix="rules-cache-env-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _as_another_user() -> list[str]:
    """A command prefix that runs as an unprivileged user when this test runs as root
    (root reads and writes whatever the modes say), else nothing."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: no way to lose root's rights here")
    prefix = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    probe = subprocess.run([*prefix, str(SCRIPTS / "rules"), "--version"], capture_output=True)
    if probe.returncode != 0:  # e.g. this checkout sits in a folder only root may enter
        pytest.skip("an unprivileged user cannot run this checkout's rules script")
    return prefix


def _outcome(prefix: list[str], cache: Path, *args: str, **env: str) -> tuple[int, str, str]:
    done = subprocess.run(
        [*prefix, str(SCRIPTS / "rules"), *args],
        input=VERDICT if args[0] == "parse" else None,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "RULES_CACHE_DIR": str(cache), **env},
    )
    return done.returncode, done.stdout, done.stderr


def _owned_by_the_runner(path: Path, prefix: list[str]) -> None:
    if prefix:
        for item in [path, *path.rglob("*")]:
            os.chown(item, NOBODY, NOBODY, follow_symlinks=False)


def test_a_stray_file_nobody_may_read_in_the_pack_folder_is_no_error(reachable: Path) -> None:
    """An editor's swap file of another user (or of none) sits in the pack's folder: the
    pack loads without reading it, and the cache, which cannot fingerprint the folder,
    steps aside instead of failing the command."""
    prefix = _as_another_user()
    pack = _sentinel(reachable / "pack")
    stray = pack / ".pack.yaml.swp"
    stray.write_text("someone else's\n", encoding="utf-8")
    stray.chmod(0o600 if prefix else 0o000)
    for item in [pack, *pack.rglob("*")]:
        if item != stray:
            item.chmod(0o755 if item.is_dir() else 0o644)
    cache = reachable / "cache"
    cache.mkdir()
    _owned_by_the_runner(cache, prefix)
    bad = str(REPO / "examples" / "sentinel" / "verdict_bad.txt")
    for args in (
        ["parse", "--pack", str(pack), *PARSE],
        ["eval", "--pack", str(pack), *PARSE, "--format", "json", bad],
        ["check", str(pack)],
    ):
        off = _outcome(prefix, cache, *args, RULES_NO_CACHE="1")
        assert "internal error" not in off[2] and "Permission denied" not in off[2], off
        assert _outcome(prefix, cache, *args) == off, args
