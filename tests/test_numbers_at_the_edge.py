"""Numbers are bounded where they enter: NaN, infinities and integers past what the ledger
(a 64-bit SQLite INTEGER) or JSON holds are refused with a message naming where, in a pack,
a context, an option, a JSON output or a record; never an internal error, never printed as
JSON that is not JSON, never seconds spent converting digits."""

from __future__ import annotations

import json
import os
import resource
import subprocess
import time
from pathlib import Path
from typing import Any

import click
import pytest

from conftest import REPO, SCRIPTS, PackMaker, run_cli
from engine.cli.types import BoundedInt, FiniteFloat
from engine.contracts.json_documents import JsonDocumentError, read_documents
from engine.core.errors import ContextError
from engine.core.numbers import INT64_MAX, strict_loads
from engine.format.context import build_context
from engine.format.vocabulary import ContextKey
from engine.pack.batch import parse_record
from engine.session.choose import ChoiceError, parse_item

HUGE = "99999999999999999999999"

PACK = """
rulepack: numbers
version: 1.0.0
extends: [builtin:core]
contracts:
  half:
    kind: json
    schema_file: half.schema.json
triggers:
  half:
    on: [PARSE_ERROR]
    max_attempts: {attempts}
    after_failure: NEEDS_HUMAN
"""
JSON_PACK = """
rulepack: numbers
version: 1.0.0
extends: [builtin:core]
contracts:
  half:
    kind: json
    schema_file: half.schema.json
"""
HALF_SCHEMA = '{"type": "object", "properties": {"n": {"type": "number", "multipleOf": 0.5}}}'


def measured(*args: str, timeout: float = 30) -> tuple[subprocess.CompletedProcess[str], float]:
    """Run the `rules` script; the result and a bound on its peak memory in MiB (the
    largest peak of any child of this process so far, so the command's is no larger)."""
    try:
        result = subprocess.run(
            [str(SCRIPTS / "rules"), *args], capture_output=True, text=True, timeout=timeout
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"rules {' '.join(args)} ran past {timeout} s")
    return result, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024


def strict_json(text: str) -> Any:
    """JSON as RFC 8259 has it: NaN and infinities are not JSON."""

    def refuse(name: str) -> Any:
        raise AssertionError(f"{name} printed as JSON")

    return json.loads(text, parse_constant=refuse)


# ------------------------------------------------------------------------- packs


@pytest.mark.parametrize("value", [".inf", "-.INF", ".nan", ".NaN", HUGE, "1e999"])
def test_a_number_a_pack_cannot_hold_is_a_finding_at_its_place(
    make_pack: PackMaker, value: str
) -> None:
    folder = make_pack(PACK.format(attempts=value), files={"half.schema.json": HALF_SCHEMA})
    result = run_cli("check", str(folder))
    assert result.exit_code == 1
    assert "internal error" not in result.output
    line = next(line for line in result.output.splitlines() if "(number-out-of-range)" in line)
    assert line.startswith("../pack/pack.yaml:11:19: [error] ")  # the run's folder is cwd/
    assert result.output.count("pack.yaml:11:19") == 1  # not also "should be a valid integer"


def test_a_number_within_64_bits_is_a_number(make_pack: PackMaker) -> None:
    folder = make_pack(PACK.format(attempts=3), files={"half.schema.json": HALF_SCHEMA})
    assert run_cli("check", str(folder)).exit_code == 0


@pytest.mark.parametrize("value", [".inf", "-.INF", ".nan", HUGE])
def test_a_context_file_with_such_a_number_is_a_usage_error_naming_it(
    tmp_path: Path, value: str
) -> None:
    context = tmp_path / "ctx.yaml"
    context.write_text(f"round: 1\nscore: {value}\n", encoding="utf-8")
    result = run_cli(
        "eval", "--pack", "gap-review", "--block", "engineer", "--var", "round=1",
        "--context", str(context), os.devnull,
    )  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr.startswith("error: ")
    assert "ctx.yaml:2:8: " in result.stderr
    assert "internal error" not in result.output


def test_context_values_and_vars_are_checked_for_numbers() -> None:
    declared = {"n": ContextKey(type="number"), "i": ContextKey(type="int")}
    for strings in ({"n": "nan"}, {"n": "inf"}, {"n": "-Infinity"}, {"i": HUGE}, {"i": "9" * 5000}):
        with pytest.raises(ContextError):
            build_context(declared, strings=strings)
    for given in ({"n": float("nan")}, {"i": 2**64}):
        with pytest.raises(ContextError, match="context key"):
            build_context(declared, given=given)
    anything = {"m": ContextKey(type="any")}
    with pytest.raises(ContextError, match=r"context key m\['a'\]\[1\]: inf is not a finite"):
        build_context(anything, given={"m": {"a": [1, float("inf")]}})
    assert build_context(declared, strings={"n": "0.5", "i": str(INT64_MAX)}) == {
        "n": 0.5,
        "i": INT64_MAX,
    }


# ------------------------------------------------------------------------- options


def test_gate_retry_past_64_bits_is_a_usage_error(tmp_path: Path) -> None:
    todo = REPO / "rules" / "quality-gate" / "examples" / "todo.json"
    session = tmp_path / "S"
    result, peak = measured(
        "gate", "--pack", "quality-gate", "--stage", "IMPLEMENT", "--retry", HUGE,
        "--session", str(session), str(todo),
    )  # fmt: skip
    assert result.returncode == 2
    assert "Invalid value for '--retry'" in result.stderr
    assert "out of range" in result.stderr
    assert "internal error" not in result.stderr
    assert peak < 1024


@pytest.mark.parametrize("value", ["nan", "inf", "-inf", "NaN", "Infinity"])
def test_run_timeout_must_be_finite(value: str) -> None:
    result = run_cli(
        "run", "--pack", "sentinel", "--block", "VERDICT", "--timeout", value, "--", "true"
    )
    assert result.exit_code == 2
    assert "Invalid value for '--timeout'" in result.output
    assert "is not a finite number" in result.output


def test_the_option_types_keep_their_bounds_and_refuse_the_rest() -> None:
    count = BoundedInt(min=1)
    assert count.convert("5", None, None) == 5
    assert count.convert(str(INT64_MAX), None, None) == INT64_MAX
    for bad in ("0", str(INT64_MAX + 1), HUGE, "9" * 5000, "x"):
        with pytest.raises(click.BadParameter):
            count.convert(bad, None, None)
    timeout = FiniteFloat(min=0, min_open=True)
    assert timeout.convert("2.5", None, None) == 2.5
    for bad in ("nan", "inf", "-inf", "0", "1e999"):
        with pytest.raises(click.BadParameter):
            timeout.convert(bad, None, None)


def test_a_round_past_64_bits_never_reaches_the_ledger(tmp_path: Path) -> None:
    session = tmp_path / "S"
    result = run_cli(
        "eval", "--pack", "gap-review", "--block", "engineer", "--var", f"round={HUGE}",
        "--session", str(session), os.devnull,
    )  # fmt: skip
    assert result.exit_code == 2
    assert result.stderr.startswith("error: context key round: the integer is out of range")


def test_a_choice_item_or_option_past_64_bits_is_a_choice_error() -> None:
    assert parse_item("author@3") == ("author", 3)
    for item in (f"author@{HUGE}", f"author@{INT64_MAX + 1}", "author@²"):
        with pytest.raises(ChoiceError):
            parse_item(item)


# ------------------------------------------------------------------------- JSON outputs


def _json_pack(make_pack: PackMaker) -> Path:
    return make_pack(JSON_PACK, files={"half.schema.json": HALF_SCHEMA})


def test_an_integer_of_401_digits_is_the_outputs_failure_not_an_overflow(
    make_pack: PackMaker, tmp_path: Path
) -> None:
    folder = _json_pack(make_pack)
    output = tmp_path / "out.json"
    output.write_text('{"n": 1' + "0" * 400 + "}", encoding="utf-8")
    result = run_cli(
        "eval", "--pack", str(folder), "--block", "half", "--format", "json", str(output)
    )
    assert result.exit_code == 1
    verdict = strict_json(result.stdout)["verdict"]
    assert verdict["status"] == "fail"
    assert verdict["failures"][0]["type"] == "PARSE_ERROR"
    assert verdict["failures"][0]["message"].startswith("n: a number of 401 digits")


@pytest.mark.heavy
def test_a_number_of_3_000_000_digits_is_refused_in_bounded_time(
    make_pack: PackMaker, tmp_path: Path
) -> None:
    """29.7 s before: the engine lifted Python's digit limit and converted the digits."""
    folder = _json_pack(make_pack)
    output = tmp_path / "out.json"
    output.write_text('{"n": 1' + "0" * 3_000_000 + "}", encoding="utf-8")
    started = time.monotonic()
    result, peak = measured("eval", "--pack", str(folder), "--block", "half", str(output))
    assert time.monotonic() - started < 10
    assert peak < 1024
    assert result.returncode == 1
    assert "PARSE_ERROR" in result.stdout
    assert "n: a number of 3000001 digits is too long" in result.stdout


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('{"score": NaN}', "score: NaN is not a JSON number"),
        ('{"a": [1, Infinity]}', "a.1: Infinity is not a JSON number"),
        ('{"a": {"b": -Infinity}}', "a.b: -Infinity is not a JSON number"),
        ('{"n": 1e999}', "n: 1e999 is beyond"),
        ("-1e400", "(root): -1e400 is beyond"),
    ],
)
def test_nan_and_infinity_fail_the_output_and_are_never_printed(
    make_pack: PackMaker, tmp_path: Path, text: str, message: str
) -> None:
    folder = _json_pack(make_pack)
    output = tmp_path / "out.json"
    output.write_text(text, encoding="utf-8")
    result = run_cli(
        "eval", "--pack", str(folder), "--block", "half", "--format", "json", str(output)
    )
    assert result.exit_code == 1
    verdict = strict_json(result.stdout)["verdict"]  # RFC 8259 JSON
    assert verdict["data"] is None
    assert verdict["failures"][0]["message"].startswith(message)


def test_read_documents_names_the_item_and_path_of_a_refused_number() -> None:
    with pytest.raises(JsonDocumentError, match=r"^item 2: x: NaN is not a JSON number"):
        read_documents('{"x": 1}\n{"x": NaN}\n', many="jsonl")
    with pytest.raises(JsonDocumentError, match=r"^item 1: 0: Infinity"):
        read_documents("[[Infinity]]", many="list")
    with pytest.raises(JsonDocumentError, match=r"^0: NaN"):
        read_documents("prose [NaN] prose", extract="first")
    with pytest.raises(JsonDocumentError, match=r"^n: a number of 310 digits is beyond"):
        read_documents('{"n": ' + "9" * 310 + "}")
    big = int("9" * 300)
    assert read_documents(f'{{"n": {big}, "f": 1.5e300}}') == [{"n": big, "f": 1.5e300}]


def test_the_gate_reports_a_nan_output_as_its_error(tmp_path: Path) -> None:
    todo = json.loads((REPO / "rules/quality-gate/examples/todo.json").read_text("utf-8"))
    output = tmp_path / "todo.json"
    output.write_text(json.dumps(todo)[:-1] + ', "score": NaN}', encoding="utf-8")
    result = run_cli(
        "gate", "--pack", "quality-gate", "--stage", "IMPLEMENT", "--format", "json", str(output)
    )
    assert "internal error" not in result.output
    errors = strict_json(result.stdout)["errors"]
    assert any("score: NaN is not a JSON number" in error for error in errors)


# ------------------------------------------------------------------------- records


def test_records_with_such_numbers_are_invalid_records() -> None:
    for line in ('{"id": NaN, "block": "VERDICT"}', '{"id": 1' + "0" * 5000 + "}"):
        record = parse_record(copy_pack_parser(), line, 1, None, None)
        assert record["failure_type"] == "INVALID_RECORD"
        assert record["id"] is None
        json.dumps(record, allow_nan=False)
    with pytest.raises(ValueError, match="out of range"):
        strict_loads(str(INT64_MAX + 1))
    assert strict_loads(f"[{INT64_MAX}, 0.5]") == [INT64_MAX, 0.5]


def copy_pack_parser() -> Any:
    from engine.pack.loaded import load_pack

    return load_pack("sentinel")


def test_a_backtest_record_with_nan_is_reported_not_evaluated(tmp_path: Path) -> None:
    records = tmp_path / "records.jsonl"
    records.write_text('{"block": "VERDICT", "context": {"x": NaN}, "text": ""}\n')
    result = run_cli("backtest", "--pack", "sentinel", "--format", "json", str(records))
    assert "internal error" not in result.output
    report = strict_json(result.stdout)
    assert "NaN is not a JSON number" in json.dumps(report)
