"""`kind: json` contracts: extraction, bounds, schema failures with JSON Pointers,
deterministic order; through the API and the CLI (text contracts: test_text.py)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

import engine
from conftest import FIXTURES, PackMaker, run_cli

PACK_DIR = FIXTURES / "packs" / "json_text"
PACK = engine.load_pack(PACK_DIR)
GOOD = {"id": "T-1", "status": "todo", "metadata": {"success_criteria": ["tests pass"]}}


def verdict(block: str, text: str | bytes) -> tuple[str, list[tuple[str, str, int | None]]]:
    result = PACK.evaluate(block, text)
    return result.status, [(f.type, f.message, f.line) for f in result.failures]


def test_a_valid_document_passes_and_is_the_verdict_data() -> None:
    result = PACK.evaluate("task", json.dumps(GOOD))
    assert (result.status, result.data) == ("pass", GOOD)


def test_a_missing_nested_key_reads_as_in_seed_004() -> None:
    bad = {**GOOD, "metadata": {}}
    assert verdict("task", json.dumps(bad)) == (
        "fail",
        [("SCHEMA_ERROR", "Missing: metadata.success_criteria", None)],
    )


def test_every_schema_error_is_one_failure_in_pointer_order() -> None:
    bad = {"status": "later", "metadata": {"success_criteria": [], "owner": ""}, "extra": 1}
    status, failures = verdict("task", json.dumps(bad))
    assert status == "fail"
    assert [m for _, m, _ in failures] == [
        "the document has keys the contract does not allow: remove `extra`",
        "Missing: id",
        "`metadata.owner` is empty: write it",
        "`metadata.success_criteria` has too few items: give at least 1",
        '`status` is "later": it must be one of "todo", "done"',
    ]
    again = verdict("task", json.dumps(dict(reversed(list(bad.items())))))
    assert again == (status, failures)


@pytest.mark.parametrize(
    ("text", "message", "line"),
    [
        ('{"id": "T-1",\n  "status": }', "line 2 column 13: Expecting value", 2),
        ('{"id": "T-1"} and then prose', "line 1 column 15: extra data after the JSON value", 1),
        ("[" * 100_000, "JSON nested too deeply", None),
        ("[" * 300 + "]" * 300, "JSON nested deeper than 200 levels", None),
    ],
)
def test_unreadable_json_is_a_parse_error_with_its_place(
    text: str, message: str, line: int | None
) -> None:
    assert verdict("task", text) == ("fail", [("PARSE_ERROR", message, line)])


def test_a_bom_and_invalid_utf8_get_a_verdict() -> None:
    assert PACK.evaluate("task", "\ufeff" + json.dumps(GOOD)).status == "pass"
    status, failures = verdict("task", b'{"id": "T-\xff1", "status": "todo"}')
    assert status == "fail"
    assert [t for t, _, _ in failures] == ["SCHEMA_ERROR", "SCHEMA_ERROR"]


def test_an_output_over_the_size_cap_fails_without_being_read() -> None:
    huge = '{"pad": "' + "x" * (9 * 1024 * 1024) + '"}'
    status, failures = verdict("task", huge)
    assert status == "fail"
    assert (
        failures[0][1] == f"the output is {len(huge)} characters, over the limit of "
        f"{8 * 1024 * 1024} for JSON"
    )


def test_fenced_and_first_extraction_ignore_the_prose_around() -> None:
    body = json.dumps(GOOD, indent=2)
    assert PACK.evaluate("fenced_task", f"Here:\n```json\n{body}\n```\nDone.").status == "pass"
    assert verdict("fenced_task", "no fence here") == (
        "fail",
        [("PARSE_ERROR", "no ```json fenced block in the output", None)],
    )
    assert PACK.evaluate("first_task", f"Sure! {body} Hope it helps {{").status == "pass"


def test_many_documents_as_a_list_or_as_lines() -> None:
    bad = {**GOOD, "id": "X"}
    listed = PACK.evaluate("task_list", json.dumps([GOOD, bad]))
    assert [f.message for f in listed.failures] == [
        'item 2: `id` is "X", which does not match the pattern ^T-[0-9]+$'
    ]
    lines = PACK.evaluate("task_lines", json.dumps(GOOD) + "\n\n" + json.dumps(GOOD) + "\n")
    assert (lines.status, lines.data) == ("pass", [GOOD, GOOD])
    assert verdict("task_lines", json.dumps(GOOD) + "\n{oops}\n")[1][0][2] == 2


def test_a_lone_surrogate_escape_is_a_parse_error_naming_where() -> None:
    """JSON can write "\\ud800" alone, which decodes to no text: accepted, it was an internal
    UnicodeEncodeError when `rules run` or `rules eval --format json` printed the data."""
    named = {**GOOD, "metadata": {"success_criteria": ["ok \\ud800"]}}
    assert verdict("task", json.dumps(named).replace("\\\\", "\\")) == (
        "fail",
        [("PARSE_ERROR", "metadata.success_criteria.0: " + LONE, None)],
    )
    assert verdict("task_lines", json.dumps(GOOD) + '\n{"\\udc00": 1}\n')[1] == [
        ("PARSE_ERROR", "item 2: (root): a key holding " + LONE, None)
    ]
    pair = {**GOOD, "id": "T-1", "metadata": {"success_criteria": ["\\ud83d\\ude00"]}}
    result = PACK.evaluate("task", json.dumps(pair).replace("\\\\", "\\"))
    assert (result.status, result.data["metadata"]) == ("pass", {"success_criteria": ["😀"]})


LONE = "a lone surrogate (a \\ud800-\\udfff escape alone) is not text"


def test_rules_eval_repairs_a_json_output_with_the_pack_template(tmp_path: Path) -> None:
    output = tmp_path / "out.json"
    output.write_text(json.dumps({**GOOD, "metadata": {}}), encoding="utf-8")
    evaluated = run_cli(
        "eval", "--pack", str(PACK_DIR), "--block", "task", "--format", "json", str(output)
    )
    assert evaluated.exit_code == 3
    decision = json.loads(evaluated.stdout)["decision"]
    assert (decision["action"], decision["template"]) == ("REPAIR", "json_repair")
    rendered = run_cli("render", "--pack", str(PACK_DIR), "--block", "task", str(output))
    assert rendered.exit_code == 0
    assert "Missing: metadata.success_criteria" in rendered.stdout
    assert "metadata.success_criteria (a non-empty list)" in rendered.stdout


def test_rules_check_refuses_a_schema_that_reaches_outside(make_pack: PackMaker) -> None:
    folder = make_pack(
        """
        rulepack: t
        extends: [builtin:core]
        contracts:
          doc: {kind: json, schema_file: remote.json}
          other: {kind: json, schema_file: broken.json}
          lines: {kind: text, min_lines: 5, max_lines: 2, messages: {too_long: x}}
        """,
        files={
            "remote.json": '{"$ref": "https://example.invalid/s.json"}',
            "broken.json": '{"type": 12}',
        },
    )
    result = run_cli("check", str(folder), "--format", "json")
    assert result.exit_code == 1
    found = sorted(
        (f["rule"], f["message"]) for f in json.loads(result.stdout)["packs"][0]["findings"]
    )
    assert found == [
        ("invalid-range", "min_lines (5) is over max_lines (2)"),
        (
            "invalid-schema",
            "schema file 'broken.json': not a valid JSON Schema: 12 is not "
            "valid under any of the given schemas",
        ),
        (
            "invalid-schema",
            "schema file 'remote.json': $ref 'https://example.invalid/s.json' "
            "points outside the schema (only local '#...' references are "
            "resolved; nothing is fetched)",
        ),
        ("unknown-message", "unknown message id 'too_long'"),
    ]


def test_a_pack_copy_with_another_schema_changes_the_verdict(tmp_path: Path) -> None:
    copy = tmp_path / "pack"
    shutil.copytree(PACK_DIR, copy)
    schema_file = copy / "schemas" / "task.schema.json"
    schema = json.loads(schema_file.read_text(encoding="utf-8"))
    schema["properties"]["metadata"]["required"] = []
    schema_file.write_text(json.dumps(schema), encoding="utf-8")
    lenient = engine.load_pack(copy)
    assert lenient.evaluate("task", json.dumps({**GOOD, "metadata": {}})).status == "pass"
    assert PACK.evaluate("task", json.dumps({**GOOD, "metadata": {}})).status == "fail"


@pytest.mark.slow
def test_a_50_mb_json_output_gets_a_verdict_in_bounded_memory(tmp_path: Path) -> None:
    import subprocess
    import sys

    big = tmp_path / "big.json"
    big.write_text('{"id": "T-1", "pad": "' + "x" * (50 * 1024 * 1024) + '"}', encoding="utf-8")
    probe = (
        f"import resource, subprocess, sys; done = subprocess.run([{sys.executable!r}, "
        f"'-m', 'engine', 'eval', '--pack', {str(PACK_DIR)!r}, '--block', 'task', "
        f"{str(big)!r}], capture_output=True, text=True); "
        "print(done.returncode, resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss, "
        "done.stdout.splitlines()[2] if done.stdout else done.stderr)"
    )
    measured = subprocess.run(
        [sys.executable, "-I", "-S", "-c", probe],
        capture_output=True,
        text=True,
        timeout=120,
        check=True,
    ).stdout.split(" ", 2)
    code, peak_kib, failure = int(measured[0]), int(measured[1]), measured[2]
    assert code == 3
    assert "over the limit of" in failure
    assert peak_kib < 400 * 1024, f"peak {peak_kib // 1024} MiB"
