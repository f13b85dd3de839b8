"""`rules parse`: single blocks through CliRunner and subprocesses, and --jsonl batches."""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest
from sentinel_cases import NONCE, VERDICT_ARGS, delimiters

from conftest import run_cli, run_script, script

VERDICT_OK = "\n".join(
    [delimiters("VERDICT")[0], "ANSWER=YES", 'REASON="fine"', delimiters("VERDICT")[1]]
)
ARGS = (
    "parse",
    *VERDICT_ARGS,
)


def test_success_prints_the_data() -> None:
    result = run_cli(*ARGS, input=VERDICT_OK)
    assert result.exit_code == 0
    assert json.loads(result.stdout) == {"criterion_id": "AC1", "answer": "YES", "reason": "fine"}
    assert result.stderr == ""


def test_failure_prints_error_on_stderr() -> None:
    result = run_cli(*ARGS, input=VERDICT_OK.replace("YES", "MAYBE"))
    assert result.exit_code == 1
    assert result.stdout == ""
    assert result.stderr == "error: ANSWER must be YES or NO\n"


def test_nonce_mismatch_is_its_own_failure_type() -> None:
    args = list(ARGS)
    args[args.index(NONCE)] = "ABCDEF"
    result = run_cli(*args, "--format", "json", input=VERDICT_OK)
    assert result.exit_code == 1
    payload = json.loads(result.stdout)
    assert payload["failure"]["type"] == "NONCE_MISMATCH"
    assert payload["error"] == "nonce mismatch: block=4F2C9A, expected=ABCDEF"


def test_file_argument_and_warnings(tmp_path: Path) -> None:
    opener, closer = delimiters("PLAN")
    plan = "\n".join(
        [
            opener,
            "TASK_ID=t",
            'TITLE="x"',
            "SUMMARY=",
            "  s",
            "FILES:",
            '- path=a.py action=add rationale="r"',
            "ACCEPTANCE:",
            '- id=AC1 text="optimize it"',
            "ESTIMATED_DIFF=3",
            closer,
        ]
    )
    source = tmp_path / "plan.txt"
    source.write_text(plan)
    result = run_cli(
        "parse", "--pack", "sentinel", "--block", "PLAN", "--nonce", NONCE, str(source)
    )
    assert result.exit_code == 0
    assert json.loads(result.stdout)["warnings"] == [
        "AC1 uses vague verb 'optimize' without metrics"
    ]
    assert result.stderr == "warning: AC1 uses vague verb 'optimize' without metrics\n"


def test_usage_errors_exit_2_without_traceback() -> None:
    for args in (
        ("parse", "--pack", "sentinel", "--block", "NOPE", "--nonce", NONCE),
        ("parse", "--pack", "no-such-pack", "--block", "VERDICT"),
        ("parse", "--pack", "sentinel", "--nonce", NONCE),
        (*ARGS, "--var", "novalue"),
        (*ARGS, "missing-file.txt"),
    ):
        result = run_cli(*args, input="")
        assert result.exit_code == 2, (args, result.output)
        assert "Traceback" not in result.output


def test_hostile_inputs_get_a_verdict() -> None:
    for data in (
        b"",
        b"\x00" * 100,
        b"\xff\xfe\xfd",
        VERDICT_OK.encode().replace(b"\n", b"\r"),
        b"\xef\xbb\xbf" + VERDICT_OK.encode(),
        VERDICT_OK.encode() + b"\x00",
    ):
        result = run_cli(*ARGS, input=data)
        assert result.exit_code in (0, 1)
        assert result.stderr.startswith("error: ") or result.exit_code == 0


def test_jsonl_keeps_order_and_reports_bad_lines() -> None:
    lines = [
        json.dumps(
            {
                "id": "a",
                "block": "VERDICT",
                "nonce": NONCE,
                "vars": {"criterion": "AC1"},
                "text": VERDICT_OK,
            }
        ),
        "this is not json",
        json.dumps({"id": "c", "nonce": NONCE, "vars": {"criterion": "AC1"}, "text": VERDICT_OK}),
        json.dumps({"id": "d", "block": "VERDICT", "vars": {"criterion": 1}, "text": ""}),
        json.dumps([1, 2]),
    ]
    result = run_cli("parse", "--pack", "sentinel", "--jsonl", "-", input="\n".join(lines) + "\n")
    assert result.exit_code == 1
    out = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["id"] for r in out] == ["a", None, "c", "d", None]
    assert [r["ok"] for r in out] == [True, False, False, False, False]
    assert out[1]["error"].startswith("input line 2: not valid JSON")
    assert (
        out[2]["error"] == "input line 3: 'block' is missing (give it in the record or "
        "with --block)"
    )
    assert out[3]["error"] == "input line 4: 'vars' must be an object of strings"


@pytest.mark.parametrize("vars", [[], 0, "", False, ["criterion", "AC1"]])
def test_jsonl_vars_of_a_wrong_shape_are_refused_even_when_falsy(vars: object) -> None:
    """An empty list, 0, "" or false is not "no vars": it is refused as any other shape."""
    line = json.dumps({"id": 1, "block": "VERDICT", "nonce": NONCE, "vars": vars, "text": "x"})
    result = run_cli("parse", "--pack", "sentinel", "--jsonl", "-", input=line + "\n")
    assert json.loads(result.stdout)["error"] == "input line 1: 'vars' must be an object of strings"


def test_jsonl_vars_null_is_no_vars() -> None:
    line = json.dumps({"id": 1, "block": "VERDICT", "nonce": NONCE, "vars": None, "text": "x"})
    result = run_cli("parse", "--pack", "sentinel", "--jsonl", "-", input=line + "\n")
    assert 'needs "vars": {"criterion": ...}' in json.loads(result.stdout)["error"]


def test_a_jsonl_record_holding_a_lone_surrogate_escape_is_that_records_error() -> None:
    """An id, nonce or var written as a lone "\\ud800" escape decodes to no text: echoing
    the id was an internal UnicodeEncodeError that ended the batch. The text is cleaned as
    every output is (U+FFFD)."""
    good = {"block": "VERDICT", "nonce": NONCE, "vars": {"criterion": "AC1"}, "text": VERDICT_OK}
    lines = [
        json.dumps({**good, "id": "a\ud800"}),
        json.dumps({**good, "id": 2, "vars": {"criterion": "AC1\udfff"}}),
        json.dumps({**good, "id": 3, "nonce": "\udc00"}),
        json.dumps({**good, "id": 4, "text": VERDICT_OK.replace('REASON="', 'REASON="\ud800', 1)}),
    ]
    result = run_cli("parse", "--pack", "sentinel", "--jsonl", "-", input="\n".join(lines) + "\n")
    assert result.exit_code == 1, result.output
    out = [json.loads(line) for line in result.stdout.splitlines()]
    lone = "holds a lone surrogate (a \\ud800-\\udfff escape alone), not text"
    assert [(r["id"], r["ok"], r["error"]) for r in out] == [
        (None, False, f"input line 1: 'id' {lone}"),
        (2, False, f"input line 2: 'vars' {lone}"),
        (3, False, f"input line 3: 'nonce' {lone}"),
        (4, True, None),
    ]
    assert out[3]["data"]["reason"] == "\ufffdfine"


def test_a_jsonl_line_nested_too_deeply_is_that_records_error() -> None:
    lines = [
        '{"id": 1, "text": ' + "[" * 100_000,
        json.dumps(
            {
                "id": 2,
                "block": "VERDICT",
                "nonce": NONCE,
                "vars": {"criterion": "AC1"},
                "text": VERDICT_OK,
            }
        ),
    ]
    result = run_cli("parse", "--pack", "sentinel", "--jsonl", "-", input="\n".join(lines) + "\n")
    assert result.exit_code == 1
    out = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["ok"], r["error"]) for r in out] == [
        (False, "input line 1: JSON nested too deeply"),
        (True, None),
    ]


def test_a_jsonl_line_over_the_cap_and_a_record_without_its_params_are_record_errors() -> None:
    good = {"block": "VERDICT", "nonce": NONCE, "vars": {"criterion": "AC1"}, "text": VERDICT_OK}
    lines = [
        json.dumps({**good, "id": 1, "text": "x" * 5000}),  # over a 2,000-byte cap
        json.dumps({**good, "id": 2, "vars": {}}),
        json.dumps({**good, "id": 3}),
    ]
    result = run_cli(
        "parse",
        "--pack",
        "sentinel",
        "--max-output-bytes",
        "2000",
        "--jsonl",
        "-",
        input="\n".join(lines) + "\n",
    )
    assert result.exit_code == 1
    out = [json.loads(line) for line in result.stdout.splitlines()]
    assert [(r["id"], r["failure_type"], r["error"]) for r in out] == [
        (None, "INVALID_RECORD", "input line 1: longer than 2000 bytes; not read"),
        (
            2,
            "INVALID_RECORD",
            'input line 2: block \'VERDICT\' needs "vars": {"criterion": ...} '
            "(the caller's input)",
        ),
        (3, None, None),
    ]


@pytest.mark.slow
def test_jsonl_ten_thousand_records_in_one_process(tmp_path: Path) -> None:
    megabyte = "x" * (1024 * 1024)
    kinds = [
        lambda i: {"text": VERDICT_OK},
        lambda i: {"text": ""},
        lambda i: {"text_base64": base64.b64encode(bytes(range(256)) * 4).decode()},
        lambda i: {"text": VERDICT_OK.replace("fine", f"fine {i}")},
        lambda i: {"text": VERDICT_OK.replace("YES", "NO").replace("\n", "\r\n")},
    ]
    records = []
    for i in range(10_000):
        record = {"id": i, "block": "VERDICT", "nonce": NONCE, "vars": {"criterion": "AC1"}}
        record.update(kinds[i % len(kinds)](i))
        if i % 2500 == 7:
            record.pop("text_base64", None)
            record["text"] = megabyte + "\n" + VERDICT_OK
        records.append(json.dumps(record).encode())
    # raw invalid UTF-8 inside a JSON string, and a binary line
    records[5] = (
        b'{"id": 5, "block": "VERDICT", "nonce": "4F2C9A", "vars": {"criterion": '
        b'"AC1"}, "text": "\xff\xfe junk"}'
    )
    records[6] = b"\x00\x01\x02 not json at all \xff"
    source = tmp_path / "in.jsonl"
    source.write_bytes(b"\n".join(records) + b"\n")
    result = run_script(
        script("rules"), "parse", "--pack", "sentinel", "--jsonl", str(source), timeout=600
    )
    assert result.returncode == 1, result.stderr[-2000:]
    out = [json.loads(line) for line in result.stdout.decode().splitlines()]
    assert len(out) == 10_000
    assert [r["id"] for r in out if r["id"] is not None] == [i for i in range(10_000) if i != 6]
    assert out[6]["failure_type"] == "INVALID_RECORD"
    assert out[0]["ok"] and out[3]["ok"] and out[4]["ok"]
    assert out[1]["error"] == "expected exactly 1 <<<VERDICT: block, found 0"
    assert out[5]["error"] == "expected exactly 1 <<<VERDICT: block, found 0"
    big = [r for r in out if r["id"] is not None and r["id"] % 2500 == 7]
    assert len(big) == 4
    assert all(r["ok"] for r in big)
