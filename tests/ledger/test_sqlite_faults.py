"""Faults of a SQLite ledger that are not the ledger's: another process holding it locked,
a full disk. Each is an error naming its cause within the busy timeout, and the ledger is
left as it is (never "not a usable ledger ... move it away")."""

from __future__ import annotations

import shutil
import sqlite3
import subprocess
import sys
import time
from pathlib import Path

import pytest
from sentinel_cases import VERDICT_ARGS

from conftest import REPO, run_script, script
from engine.ledger.lock import BUSY_TIMEOUT_MS

GOOD = (
    b'<<<VERDICT:V1:AC1:NONCE=4F2C9A>>>\nANSWER=YES\nREASON="ok"\n'
    b"<<<END_VERDICT:AC1:NONCE=4F2C9A>>>\n"
)


def eval_in(session: Path) -> subprocess.CompletedProcess[bytes]:
    return run_script(script("rules"), "eval", *VERDICT_ARGS, "--session", str(session), input=GOOD)


@pytest.mark.heavy
def test_a_ledger_another_process_holds_locked_is_exit_2_naming_the_lock_within_10_s(
    tmp_path: Path,
) -> None:
    """A `sqlite3` shell holding BEGIN EXCLUSIVE made eval --session and run --session wait
    60 s in silence; now each exits 2 within 10 s saying another process holds the lock."""
    assert BUSY_TIMEOUT_MS < 10_000
    session = tmp_path / "s"
    assert eval_in(session).returncode == 0
    holder = sqlite3.connect(session / "ledger.sqlite3", isolation_level=None)
    holder.execute("BEGIN EXCLUSIVE")
    try:
        started = time.monotonic()
        done = eval_in(session)
        took = time.monotonic() - started
        prompt = tmp_path / "p.txt"
        prompt.write_text("Judge AC1.\n", encoding="utf-8")
        started = time.monotonic()
        ran = run_script(
            script("rules"),
            "run",
            *VERDICT_ARGS,
            "--prompt",
            str(prompt),
            "--session",
            str(session),
            "--",
            sys.executable,
            str(REPO / "examples" / "fake_model.py"),
        )
        ran_took = time.monotonic() - started
    finally:
        holder.rollback()
        holder.close()
    for result, seconds in ((done, took), (ran, ran_took)):
        stderr = result.stderr.decode()
        assert result.returncode == 2, stderr
        assert "another process has held the ledger locked for over 8 s" in stderr, stderr
        assert "move it away" not in stderr and "Traceback" not in stderr
        assert seconds < 10 + 3, seconds  # the busy timeout, and a process start under load
    assert eval_in(session).returncode == 0  # the ledger was left as it was


def _can_mount_tmpfs() -> str | None:
    if sys.platform != "linux" or shutil.which("unshare") is None:
        return "needs Linux and unshare(1)"
    probe = subprocess.run(
        ["unshare", "-rm", "sh", "-c", "mount -t tmpfs -o size=64k tmpfs /mnt"],
        capture_output=True,
        check=False,
        timeout=30,
    )
    if probe.returncode != 0:
        return f"cannot mount a small tmpfs in a namespace here: {probe.stderr.decode()[:200]}"
    return None


@pytest.mark.heavy
@pytest.mark.skipif(bool(_can_mount_tmpfs()), reason=str(_can_mount_tmpfs()))
def test_a_full_disk_under_the_session_is_named_as_such(tmp_path: Path) -> None:
    """A session on a 1 MB file system filled by another file: eval --session said 'not a
    usable ledger (disk I/O error) ... move it away' of a healthy ledger; now the message
    says the disk is full and to free space, and the ledger works once there is space."""
    (tmp_path / "in.txt").write_bytes(GOOD)
    rules = script("rules")
    args = " ".join(VERDICT_ARGS)
    shell = f"""
set -u
mount -t tmpfs -o size=1m tmpfs "$MNT"
cd "$MNT"
{rules} eval {args} --session s < "$IN" > /dev/null || exit 10
head -c 4194304 /dev/zero > fill 2> /dev/null
{rules} eval {args} --session s < "$IN" > /dev/null 2> "$OUT/full.txt"
echo $? > "$OUT/full.rc"
rm fill
{rules} eval {args} --session s < "$IN" > /dev/null 2> "$OUT/after.txt"
echo $? > "$OUT/after.rc"
"""
    mount = tmp_path / "mnt"
    mount.mkdir()
    done = subprocess.run(
        ["unshare", "-rm", "sh", "-c", shell],
        env={
            "PATH": "/usr/bin:/bin",
            "HOME": str(tmp_path),
            "MNT": str(mount),
            "IN": str(tmp_path / "in.txt"),
            "OUT": str(tmp_path),
        },
        capture_output=True,
        check=False,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr.decode()
    message = (tmp_path / "full.txt").read_text()
    assert (tmp_path / "full.rc").read_text().strip() == "2", message
    assert "the disk holding the ledger is full" in message, message
    assert "free some space" in message
    assert "move it away" not in message and "not a usable ledger" not in message
    assert (tmp_path / "after.rc").read_text().strip() == "0", (tmp_path / "after.txt").read_text()
