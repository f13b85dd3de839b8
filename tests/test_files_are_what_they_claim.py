"""Files the engine reads are what they claim: a FIFO, a socket or a folder is refused on
the open file before anything is read (a FIFO blocked `rules test` forever), a long line
with no end is skipped within a bound (`--jsonl /dev/zero` never ended), and a cache entry
edited by hand is not believed (an AttributeError before)."""

from __future__ import annotations

import json
import os
import resource
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest

from conftest import REPO, SCRIPTS
from engine.core.files import NotARegularFile, read_file_bytes, read_file_capped
from engine.pack.batch import SKIP_LIMIT, capped_lines

pytestmark = pytest.mark.skipif(sys.platform == "win32", reason="FIFOs")

VERDICT = ("--block", "VERDICT", "--nonce", "4F2C9A", "--var", "criterion=AC1")


def rules(*args: str, timeout: float = 30, **kwargs: object) -> subprocess.CompletedProcess[str]:
    """The `rules` script in a child process: a hang fails the test instead of blocking it."""
    try:
        return subprocess.run(
            [str(SCRIPTS / "rules"), *args],
            capture_output=True,
            text=True,
            timeout=timeout,
            **kwargs,  # type: ignore[call-overload]
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"rules {' '.join(args)} ran past {timeout} s")


def _sentinel_pack(tmp_path: Path) -> Path:
    pack = tmp_path / "sentinel"
    shutil.copytree(REPO / "rules" / "sentinel", pack)
    return pack


def test_the_reader_refuses_a_fifo_a_folder_and_bounds_a_device(tmp_path: Path) -> None:
    fifo = tmp_path / "pipe"
    os.mkfifo(fifo)
    with pytest.raises(NotARegularFile, match="a FIFO"):
        read_file_capped(fifo, 10)
    with pytest.raises(NotARegularFile, match="a folder"):
        read_file_capped(tmp_path, 10)
    if os.path.exists("/dev/zero"):
        assert read_file_capped("/dev/zero", 10) == (b"\0" * 10, True)
        with pytest.raises(OSError, match="over the 10-byte limit"):
            read_file_bytes("/dev/zero", 10)
    regular = tmp_path / "file.txt"
    regular.write_bytes(b"12345")
    assert read_file_capped(regular, 5) == (b"12345", False)


@pytest.mark.heavy
def test_a_pack_test_whose_input_file_is_a_fifo_is_refused_at_once(tmp_path: Path) -> None:
    pack = _sentinel_pack(tmp_path)
    shutil.rmtree(pack / "tests", ignore_errors=True)
    (pack / "tests").mkdir()
    os.mkfifo(pack / "tests" / "out.fifo")
    (pack / "tests" / "cases.yaml").write_text(
        "- name: from a fifo\n"
        "  block: VERDICT\n"
        "  input_file: out.fifo\n"
        "  nonce: 4F2C9A\n"
        "  vars: {criterion: AC1}\n"
        "  expect: {status: pass}\n",
        encoding="utf-8",
    )
    started = time.monotonic()
    result = rules("test", str(pack), timeout=20)
    assert time.monotonic() - started < 10
    assert result.returncode == 2
    assert "input_file out.fifo: a FIFO (named pipe), not a regular file" in result.stderr
    assert "internal error" not in result.stderr


def test_a_context_fifo_is_refused_without_waiting_for_a_writer(tmp_path: Path) -> None:
    fifo = tmp_path / "ctx.yaml"
    os.mkfifo(fifo)
    result = rules("eval", "--pack", "sentinel", *VERDICT, "--context", str(fifo), os.devnull)
    assert result.returncode == 2
    assert "ctx.yaml:1:1: cannot read file: a FIFO (named pipe), not a regular file" in (
        result.stderr
    )


def test_a_schema_file_that_is_a_fifo_is_a_finding(tmp_path: Path) -> None:
    pack = tmp_path / "pack"
    pack.mkdir()
    os.mkfifo(pack / "s.schema.json")
    (pack / "pack.yaml").write_text(
        "rulepack: p\nversion: 1.0.0\nextends: [builtin:core]\n"
        "contracts:\n  j: {kind: json, schema_file: s.schema.json}\n",
        encoding="utf-8",
    )
    result = rules("check", str(pack), timeout=20)
    assert result.returncode == 1
    assert "internal error" not in result.stdout + result.stderr


def test_jsonl_from_dev_zero_ends_within_its_bounds() -> None:
    if not os.path.exists("/dev/zero"):
        pytest.skip("no /dev/zero")
    started = time.monotonic()
    result = rules("parse", "--pack", "sentinel", "--jsonl", "/dev/zero", timeout=30)
    assert time.monotonic() - started < 10
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss < 1024 * 1024  # KiB
    assert result.returncode == 1
    [line] = result.stdout.splitlines()
    record = json.loads(line)
    assert record["failure_type"] == "INVALID_RECORD"
    assert "longer than 67108864 bytes" in record["error"]


class _Endless:
    """A stream of one line that never ends, counting what was read of it."""

    def __init__(self) -> None:
        self.read = 0

    def readline(self, size: int = -1) -> bytes:
        self.read += size
        return b"x" * size


def test_a_long_line_is_skipped_within_a_bound() -> None:
    stream = _Endless()
    assert list(capped_lines(stream, 100)) == [None]  # type: ignore[arg-type]
    assert stream.read <= 101 + SKIP_LIMIT + 2 * 1024 * 1024


def test_a_long_line_with_an_end_is_still_skipped_and_the_rest_read() -> None:
    import io

    stream = io.BytesIO(b"x" * 5000 + b"\nshort\n")
    assert list(capped_lines(stream, 100)) == [None, b"short\n"]


def _cached_parse(cache: Path, output: Path) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "RULES_CACHE_DIR": str(cache)}
    return rules("parse", "--pack", "sentinel", *VERDICT, str(output), env=env)


@pytest.mark.parametrize(
    "edit",
    [
        lambda data: [
            parser["contract"].update({name: 5 for name in parser["contract"]})
            for _, parser in data["parsers"].values()
        ],
        lambda data: [parser.update({"grammar": []}) for _, parser in data["parsers"].values()],
        lambda data: data.update({"kinds": "x"}),
    ],
)
@pytest.mark.heavy
def test_a_cache_entry_edited_by_hand_is_not_believed(tmp_path: Path, edit: object) -> None:
    cache = tmp_path / "cache"
    output = tmp_path / "out.txt"
    output.write_text("no block here\n", encoding="utf-8")
    first = _cached_parse(cache, output)
    [entry_path] = list(cache.glob("parse-*.json"))
    entry = json.loads(entry_path.read_text(encoding="utf-8"))
    data = json.loads(entry["data"])
    edit(data)  # type: ignore[operator]
    entry["data"] = json.dumps(data)
    entry_path.write_text(json.dumps(entry), encoding="utf-8")
    again = _cached_parse(cache, output)
    assert (again.returncode, again.stdout, again.stderr) == (
        first.returncode,
        first.stdout,
        first.stderr,
    )
    assert "internal error" not in again.stderr


@pytest.mark.heavy
def test_a_cache_entry_that_is_a_fifo_is_passed_over(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    output = tmp_path / "out.txt"
    output.write_text("no block here\n", encoding="utf-8")
    first = _cached_parse(cache, output)
    [entry_path] = list(cache.glob("parse-*.json"))
    entry_path.unlink()
    os.mkfifo(entry_path)
    again = _cached_parse(cache, output)
    assert (again.returncode, again.stderr) == (first.returncode, first.stderr)


@pytest.mark.heavy
def test_a_golden_prompt_that_is_a_fifo_is_the_cases_problem(tmp_path: Path) -> None:
    """Reading it (or writing it with --update) would wait for the other end forever."""
    pack = _sentinel_pack(tmp_path)
    shutil.rmtree(pack / "tests", ignore_errors=True)
    (pack / "tests" / "prompts").mkdir(parents=True)
    os.mkfifo(pack / "tests" / "prompts" / "bad.md")
    (pack / "tests" / "bad.txt").write_text("no block\n", encoding="utf-8")
    (pack / "tests" / "cases.yaml").write_text(
        "- {name: golden, block: VERDICT, input_file: bad.txt, nonce: 4F2C9A,\n"
        "   vars: {criterion: AC1}, expect: {action: REPAIR, prompt: prompts/bad.md}}\n",
        encoding="utf-8",
    )
    for update in ((), ("--update",)):
        result = rules("test", str(pack), *update, timeout=20)
        assert result.returncode == 1
        assert "golden file prompts/bad.md is not a regular file" in result.stdout


@pytest.mark.parametrize(
    "command",
    [
        ("parse", "--pack", "sentinel", *VERDICT),
        ("eval", "--pack", "sentinel", *VERDICT),
        ("render", "--pack", "sentinel", *VERDICT),
        ("gate", "--pack", "quality-gate", "--stage", "TEST"),
    ],
    ids=["parse", "eval", "render", "gate"],
)
def test_an_output_file_that_is_a_fifo_is_refused_without_waiting(
    tmp_path: Path, command: tuple[str, ...]
) -> None:
    """No writer ever opens the FIFO: reading it would wait forever."""
    fifo = tmp_path / "output.txt"
    os.mkfifo(fifo)
    result = rules(*command, str(fifo))
    assert result.returncode == 2, result.stderr
    assert "output.txt: cannot read: a FIFO (named pipe), not a regular file" in result.stderr


@pytest.mark.heavy
def test_a_forged_cache_entry_with_its_digest_recomputed_falls_back_to_a_fresh_load(
    tmp_path: Path,
) -> None:
    """The digest is an HMAC with the cache folder's key: an entry rewritten with a
    checksum recomputed is not used (and data of the wrong shape that got through would
    fail as it parses, the pack then loaded afresh)."""
    import hashlib

    cache = tmp_path / "cache"
    output = REPO / "examples" / "sentinel" / "verdict.txt"
    first = _cached_parse(cache, output)
    [entry_path] = list(cache.glob("parse-*.json"))
    entry = json.loads(entry_path.read_text(encoding="utf-8"))
    data = json.loads(entry["data"])
    data["parsers"]["VERDICT"][1]["contract"]["warnings"] = "x"
    entry["data"] = json.dumps(data)
    entry["digest"] = hashlib.sha256(entry["data"].encode()).hexdigest()
    entry_path.write_text(json.dumps(entry), encoding="utf-8")
    again = _cached_parse(cache, output)
    assert (again.returncode, again.stdout, again.stderr) == (
        first.returncode,
        first.stdout,
        first.stderr,
    )


@pytest.mark.parametrize(
    "command",
    [
        ("parse", "--pack", "sentinel", *VERDICT, "/dev/stdin"),
        ("eval", "--pack", "sentinel", *VERDICT, "/dev/stdin"),
        ("parse", "--pack", "sentinel", "--jsonl", "/dev/stdin"),
    ],
    ids=["parse", "eval", "parse-jsonl"],
)
def test_a_pipe_with_a_writer_is_read_as_before(command: tuple[str, ...]) -> None:
    """A pipe that a process writes (`/dev/stdin` on a pipe, `<(cmd)`) is no FIFO without a
    writer: it is read, more than the first 64 KiB probe included."""
    if "--jsonl" in command:
        line = (REPO / "examples" / "sentinel" / "records.jsonl").read_text().splitlines()[0]
        data = ("\n".join([line] * 2000) + "\n").encode()
    else:
        data = (" " * 100_000 + "\n").encode() + (
            REPO / "examples" / "sentinel" / "verdict.txt"
        ).read_bytes()
    piped = rules(*command, input=data.decode())
    assert piped.returncode == 0, piped.stderr
    if "--jsonl" in command:
        assert len(piped.stdout.splitlines()) == 2000
    else:
        assert "All acceptance criteria are satisfied" in piped.stdout or "pass" in piped.stdout
