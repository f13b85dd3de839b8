"""Outputs as models write them (issue 27): a JSON document in one fenced block passes by
default (`extract: whole` stays strict, two blocks are named); an empty or whitespace-only
output is EMPTY_OUTPUT and an output that is not text is NOT_TEXT in every kind, and such an
output never reaches a prompt raw."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from sentinel_cases import VERDICT_ARGS

import engine
from conftest import FIXTURES, REPO, PackMaker, run_cli

JSON_PACK = engine.load_pack(FIXTURES / "packs" / "json_text")
DOC = '{"id": "T-1", "status": "todo", "metadata": {"success_criteria": ["tests pass"]}}'

NOT_TEXT_OUTPUTS = {
    "utf-16 with bom": "Some text, and more of it.".encode("utf-16"),
    "utf-16 without bom": "Some text, and more of it.".encode("utf-16-le"),
    "nul bytes": b"ANSWER=YES\x00\x00\x00 and then some",
    "mostly invalid utf-8": bytes(range(0x80, 0xFF)) * 4,
}


def markdown_pack(make_pack: PackMaker) -> engine.Pack:
    folder = make_pack(
        """
        rulepack: md
        version: 1.0.0
        extends: [builtin:core]
        contracts:
          report:
            kind: markdown
            checks:
              - {check: require_text, text: "## Summary", fail: WRONG_FORMAT}
        """
    )
    return engine.load_pack(folder)


def test_a_json_document_in_one_fence_passes_by_default() -> None:
    for text in (f"```json\n{DOC}\n```\n", f"Here it is:\n```\n{DOC}\n```\nHope it helps."):
        verdict = JSON_PACK.evaluate("task", text)
        assert (verdict.status, verdict.data["id"]) == ("pass", "T-1"), text


def test_two_fenced_blocks_are_a_failure_naming_both() -> None:
    text = f"```json\n{DOC}\n```\nor maybe\n\n```json\n{DOC}\n```\n"
    verdict = JSON_PACK.evaluate("task", text)
    assert (verdict.failure_type, verdict.error) == (
        "PARSE_ERROR",
        "the output holds 2 fenced blocks, at lines 1 and 6: write one JSON document, alone "
        "or in one ```json block",
    )
    many = "Intro.\n```python\nprint()\n```\n" + f"```\n{DOC}\n```\n" * 7
    assert JSON_PACK.evaluate("task", many).error == (
        "the output holds 7 fenced blocks, at lines 5, 8, 11, 14, 17 and more: write one JSON "
        "document, alone or in one ```json block"
    )


def test_extract_whole_stays_strict(make_pack: PackMaker) -> None:
    folder = make_pack(
        """
        rulepack: strict
        version: 1.0.0
        extends: [builtin:core]
        contracts:
          doc: {kind: json, schema_file: s.json, extract: whole}
        """,
        files={"s.json": '{"type": "object"}'},
    )
    pack = engine.load_pack(folder)
    assert pack.evaluate("doc", "{}").status == "pass"
    fenced = pack.evaluate("doc", "```json\n{}\n```\n")
    assert (fenced.failure_type, fenced.error) == (
        "PARSE_ERROR",
        "line 2 column 1: the JSON object that starts here has text around it: write only "
        "the JSON object, with nothing before or after it",
    )  # still refused (whole is strict); the message names the object inside the fence


@pytest.mark.parametrize("text", ["", "  \n\t\n"])
def test_an_empty_output_is_empty_output_in_every_kind(
    text: str, make_pack: PackMaker, tmp_path: Path
) -> None:
    markdown = markdown_pack(make_pack)
    for pack, block in ((JSON_PACK, "task"), (JSON_PACK, "summary"), (markdown, "report")):
        assert pack.evaluate(block, text).failure_type == "EMPTY_OUTPUT", (block, text)
    output = tmp_path / "out.txt"
    output.write_text(text)
    evaluated = run_cli("eval", *VERDICT_ARGS, "--format", "json", str(output))
    assert json.loads(evaluated.stdout)["verdict"]["failures"][0]["type"] == "EMPTY_OUTPUT"


@pytest.mark.parametrize("name", list(NOT_TEXT_OUTPUTS))
def test_an_output_that_is_not_text_is_not_text_in_every_kind(
    name: str, make_pack: PackMaker
) -> None:
    data = NOT_TEXT_OUTPUTS[name]
    markdown = markdown_pack(make_pack)
    sentinel = engine.load_pack("sentinel")
    for pack, block, extra in (
        (JSON_PACK, "task", {}),
        (JSON_PACK, "summary", {}),
        (markdown, "report", {}),
        (sentinel, "VERDICT", {"nonce": "4F2C9A", "vars": {"criterion": "AC1"}}),
    ):
        verdict = pack.evaluate(block, data, **extra)
        assert verdict.failure_type == "NOT_TEXT", (name, block)
        assert "\x00" not in (verdict.error or "") and "\ufffd" not in (verdict.error or "")


def test_a_repair_prompt_shows_the_size_and_first_bytes_escaped_never_the_output(
    tmp_path: Path,
) -> None:
    output = tmp_path / "out.txt"
    data = "ANSWER=YES and a long enough line of text to be repaired".encode("utf-16")
    output.write_bytes(data)
    decided = run_cli("eval", *VERDICT_ARGS, "--format", "json", str(output))
    assert json.loads(decided.stdout)["decision"]["action"] == "REPAIR"
    rendered = run_cli("render", *VERDICT_ARGS, str(output))
    assert rendered.exit_code == 0, rendered.output
    prompt = rendered.stdout
    assert "\x00" not in prompt and "\ufffd" not in prompt
    assert "the output is not text (UTF-8 expected): 114 characters holding NUL" in prompt
    assert "starting '\\ufffd\\ufffdA\\x00N\\x00S\\x00W\\x00E\\x00R\\x00" in prompt


def test_the_core_vocabulary_declares_both_failure_types() -> None:
    core = (REPO / "rules" / "core" / "pack.yaml").read_text(encoding="utf-8")
    assert "  EMPTY_OUTPUT:\n" in core and "  NOT_TEXT:\n" in core


def test_a_rules_init_json_pack_takes_a_fenced_answer_and_repairs_two_errors(
    tmp_path: Path,
) -> None:
    """The issue's first two rows, as a new user meets them: `rules init --kind json`."""
    assert run_cli("init", "triage", "--kind", "json", "--dir", str(tmp_path)).exit_code == 0
    pack = ["--pack", str(tmp_path / "triage"), "--block", "ANSWER"]
    fenced = tmp_path / "fenced.txt"
    fenced.write_text('```json\n{"decision": "YES", "reason": "it holds"}\n```\n')
    assert run_cli("eval", *pack, str(fenced)).exit_code == 0
    two = tmp_path / "two.json"
    two.write_text('{"decision": "MAYBE", "reason": 3}')
    rendered = run_cli("render", *pack, str(two))
    assert rendered.exit_code == 0, rendered.output
    listed = [line for line in rendered.stdout.splitlines() if line.startswith("- ")]
    assert len(listed) == 2 and "(at /decision)" in listed[0] and "(at /reason)" in listed[1]
