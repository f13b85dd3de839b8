"""Arguments that are not UTF-8 text (bytes a shell passes as they are) are a usage error
naming them, not an internal error on the way to the ledger; an existing file's name and
a model command's own arguments may be any bytes."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from conftest import REPO

RULES = [sys.executable, "-m", "engine"]
BAD = str(REPO / "examples" / "sentinel" / "verdict_bad.txt")
VERDICT = ["--pack", "sentinel", "--block", "VERDICT", "--nonce", "4F2C9A"]


def rules(*args: str | bytes, cwd: Path) -> subprocess.CompletedProcess[bytes]:
    return subprocess.run([*RULES, *args], cwd=cwd, capture_output=True, timeout=60, check=False)


def test_a_var_of_invalid_utf8_is_a_usage_error_naming_it(tmp_path: Path) -> None:
    done = rules("eval", "--session", "s", *VERDICT, b"--var", b"criterion=\xff", BAD, cwd=tmp_path)
    assert done.returncode == 2
    assert b"'criterion=\\xff' is not UTF-8 text" in done.stderr
    assert b"internal error" not in done.stderr and b"Traceback" not in done.stderr
    assert not (tmp_path / "s").exists()  # nothing recorded


def test_an_existing_file_with_a_name_of_any_bytes_is_read(tmp_path: Path) -> None:
    name = os.fsdecode(b"out-\xff.txt")
    (tmp_path / name).write_bytes(Path(BAD).read_bytes())
    done = rules("eval", *VERDICT, "--var", "criterion=AC1", os.fsencode(name), cwd=tmp_path)
    assert done.returncode == 3, done.stderr  # evaluated: a repair is due
    assert b"REPAIR" in done.stdout
