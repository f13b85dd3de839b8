"""Costs that grow linearly with the input: schema patterns on RE2 or proven linear, bounded
error messages, each pack of an `extends` graph loaded once, `many` outputs and markdown
sections in linear time. Each case of the hostile table runs as the CLI runs it, under a
wall-clock bound."""

from __future__ import annotations

import json
import time
from pathlib import Path

import pytest

from conftest import PackMaker, run_script, script
from engine.contracts.json_keywords import schema_pattern
from engine.core.patterns import PatternError

JSON_PACK = """
rulepack: costs
version: 1.0.0
extends: [builtin:core]
contracts:
  doc:
    kind: json
    schema_file: schema.json
    many: {many}
"""


def json_pack(make_pack: PackMaker, schema: object, many: str = "one") -> Path:
    return make_pack(JSON_PACK.format(many=many), files={"schema.json": json.dumps(schema)})


def rules(*args: str, input: bytes | None = None, bound: float = 10) -> tuple[int, str, float]:
    """Run the CLI; its exit code, its output and how long it took (failing past ``bound``)."""
    start = time.monotonic()
    done = run_script(script("rules"), *args, input=input, timeout=bound + 20)
    took = time.monotonic() - start
    assert took < bound, f"took {took:.1f} s"
    return done.returncode, (done.stdout + done.stderr).decode("utf-8", "replace"), took


# --------------------------------------------------------------------------- patterns


@pytest.mark.heavy
def test_a_catastrophic_schema_pattern_runs_on_re2_and_fails_the_output(
    make_pack: PackMaker, tmp_path: Path
) -> None:
    schema = {"properties": {"t": {"type": "string", "pattern": "^(\\w+\\s?)*$"}}}
    pack = json_pack(make_pack, schema)
    assert rules("check", str(pack))[0] == 0
    output = tmp_path / "out.json"
    output.write_text(json.dumps({"t": "a" * 59 + "!"}), encoding="utf-8")
    code, text, _ = rules("eval", "--pack", str(pack), "--block", "doc", str(output))
    assert code == 1
    assert "SCHEMA_ERROR" in text and "does not match the pattern ^(\\w+\\s?)*$" in text
    output.write_text(json.dumps({"t": "some words here"}), encoding="utf-8")
    code, text, _ = rules("eval", "--pack", str(pack), "--block", "doc", str(output))
    assert (code, "pass" in text) == (0, True)


@pytest.mark.heavy
def test_a_schema_pattern_no_linear_engine_takes_is_a_finding_with_its_pointer(
    make_pack: PackMaker, tmp_path: Path
) -> None:
    schema = {
        "$defs": {"word": {"type": "string", "pattern": "^(\\w+)\\1$"}},
        "patternProperties": {"^(?!x)(a|ab)*c": {}},
    }
    pack = json_pack(make_pack, schema)
    code, text, _ = rules("check", str(pack))
    assert code == 1
    assert "schema file 'schema.json': /$defs/word/pattern: pattern" in text
    assert "/patternProperties/^(?!x)(a|ab)*c: pattern" in text
    assert "cannot run in linear time" in text and "Traceback" not in text
    output = tmp_path / "out.json"
    output.write_text("{}", encoding="utf-8")
    code, text, _ = rules("eval", "--pack", str(pack), "--block", "doc", str(output))
    assert code == 2
    assert "cannot run in linear time" in text and "Traceback" not in text


@pytest.mark.heavy
def test_patterns_matched_by_jsonschema_internals_are_checked_too(make_pack: PackMaker) -> None:
    schema = {"patternProperties": {"^(a+)+$": {}}, "unevaluatedProperties": False}
    code, text, _ = rules("check", str(json_pack(make_pack, schema)))
    assert code == 1
    assert "/patternProperties/^(a+)+$" in text and "unevaluatedProperties" in text


@pytest.mark.parametrize(
    ("pattern", "matches", "misses"),
    [
        # proven linear: stdlib re, Python's meaning unchanged
        ("^[A-Z][A-Z0-9_]*$(?!\\n)", ["AB_1"], ["AB\n", "ab"]),
        ("\\S", ["  x "], ["  \n"]),
        ("^/[^\\u0000\\n\\r]*$(?!\\n)", ["/a/b"], ["/a\x00", "/a\n"]),
        # RE2: the end-of-text idiom and \u escapes are translated
        ("^[a-z][a-z0-9]*(_[a-z0-9]+)*$(?!\\n)", ["ab_c1"], ["ab_c1\n", "ab__c"]),
        ("^(\\u00e9+)*\\Z", ["éé"], ["éx"]),
        ("^(\\w+\\s?)*$", ["some words", "héllo wörld\u3000١٢"], ["a" * 59 + "!"]),
        ("^(\\d+[\\s,]?)+\\Z", ["١٢ 3,4"], ["12a"]),
        ("^([^\\W_]+-?)+\\Z", ["ab-c"], ["a_b"]),
    ],
)
def test_schema_patterns_keep_their_meaning(
    pattern: str, matches: list[str], misses: list[str]
) -> None:
    compiled = schema_pattern(pattern)
    assert [compiled.search(text) is not None for text in matches] == [True] * len(matches)
    assert [compiled.search(text) is not None for text in misses] == [False] * len(misses)


def test_a_pattern_with_a_backreference_is_refused() -> None:
    with pytest.raises(PatternError):
        schema_pattern("^(a)\\1$")


def test_pattern_properties_and_additional_properties_run_on_re2(make_pack: PackMaker) -> None:
    import engine

    schema = {"patternProperties": {"^(\\w+\\s?)*$": {"type": "integer"}}}
    pack = engine.load_pack(json_pack(make_pack, {**schema, "additionalProperties": False}))
    hostile = "a" * 59 + "!"
    start = time.monotonic()
    result = pack.evaluate("doc", json.dumps({hostile: 1, "ok words": "x"}))
    assert time.monotonic() - start < 2
    assert sorted(f.message for f in result.failures) == [
        f"(root): '{hostile}' does not match any of the regexes: '^(\\\\w+\\\\s?)*$'",
        "`ok words` is a string: it must be an integer",
    ]


# --------------------------------------------------------------------------- messages


@pytest.mark.slow
def test_an_enum_is_quoted_up_to_a_few_values_and_a_count(
    make_pack: PackMaker, tmp_path: Path
) -> None:
    values = [f"v{i}" for i in range(300_000)]
    schema = {"type": "object", "properties": {"v": {"enum": values}}}
    pack = json_pack(make_pack, schema, many="jsonl")
    output = tmp_path / "out.jsonl"
    output.write_text((json.dumps({"v": "nope"}) + "\n") * 1000, encoding="utf-8")
    code, text, _ = rules("eval", "--pack", str(pack), "--block", "doc", str(output))
    assert code == 1
    assert (
        'item 1: `v` is "nope": it must be one of "v0", "v1", "v2", "v3", "v4", ... '
        "(300000 values)" in text
    )
    assert len(text) < 200_000


def test_a_short_enum_reads_as_before_and_a_huge_const_is_cut(make_pack: PackMaker) -> None:
    import engine

    schema = {
        "properties": {
            "s": {"enum": ["todo", "done", 1]},
            "c": {"const": "x" * 100_000},
            "n": {"enum": list(range(10))},
            "m": {"enum": list(range(10))},
        }
    }
    pack = engine.load_pack(json_pack(make_pack, schema))
    result = pack.evaluate("doc", json.dumps({"s": "later", "c": "y", "n": 1.0, "m": 11}))
    messages = sorted(f.message for f in result.failures)
    assert messages[1:] == [
        "`m` is 11: it must be one of 0, 1, 2, 3, 4, ... (10 values)",
        '`s` is "later": it must be one of "todo", "done", 1',
    ]  # and n: 1.0 equals 1 in JSON Schema
    assert messages[0].startswith('`c` is "y": it must be "xxx') and messages[0].endswith("...")
    assert len(messages[0]) < 300


# --------------------------------------------------------------------------- extends


def _diamond(folder: Path, levels: int, finding: bool = False) -> Path:
    """Packs l0a, l0b, ... each extending both packs of the level below; the top one."""
    folder.mkdir(parents=True, exist_ok=True)
    for level in range(levels + 1):
        for side in "ab":
            below = f"[l{level - 1}a.yaml, l{level - 1}b.yaml]" if level else "[builtin:core]"
            extra = "unknown_key: 1\n" if finding and level == 0 and side == "a" else ""
            text = f"rulepack: l{level}{side}\nversion: 1.0.0\nextends: {below}\n{extra}"
            (folder / f"l{level}{side}.yaml").write_text(text, encoding="utf-8")
    top = folder / "pack.yaml"
    top.write_text(
        f"rulepack: top\nversion: 1.0.0\nextends: [l{levels}a.yaml, l{levels}b.yaml]\n",
        encoding="utf-8",
    )
    return top


def test_an_extends_diamond_loads_each_pack_once(tmp_path: Path) -> None:
    code, text, took = rules("check", str(_diamond(tmp_path / "d", 12)))
    assert (code, text.strip()) == (0, "1 pack checked: 0 errors, 0 warnings")
    assert took < 5


def test_a_finding_of_a_pack_reached_twice_is_reported_once(tmp_path: Path) -> None:
    from engine.format.loader import load_pack_tree

    tree = load_pack_tree(_diamond(tmp_path / "d", 3))
    assert len(tree.files) == len(set(tree.files)) == 10
    code, text, _ = rules("check", str(_diamond(tmp_path / "f", 3, finding=True)))
    assert code == 1
    assert text.count("unknown_key") == 1, text


# --------------------------------------------------------------------------- many


@pytest.mark.heavy
def test_json_lines_past_the_document_limit_fail_naming_it(
    make_pack: PackMaker, tmp_path: Path
) -> None:
    pack = json_pack(make_pack, {"type": "object"}, many="jsonl")
    output = tmp_path / "out.jsonl"
    output.write_text("{}\n" * 2_600_000, encoding="utf-8")
    code, text, _ = rules("eval", "--pack", str(pack), "--block", "doc", str(output))
    assert code == 1
    assert (
        "PARSE_ERROR (HIGH): the output holds more than 10000 JSON documents, over the "
        "contract's limit (max_documents)" in text
    )


def test_the_document_limit_is_a_contract_setting_for_lists_and_lines(
    make_pack: PackMaker,
) -> None:
    import engine

    folder = json_pack(make_pack, {"type": "object"}, many="list")
    yaml = (folder / "pack.yaml").read_text(encoding="utf-8")
    (folder / "pack.yaml").write_text(yaml + "    max_documents: 3\n", encoding="utf-8")
    pack = engine.load_pack(folder)
    assert pack.evaluate("doc", "[{}, {}, {}]").status == "pass"
    failures = pack.evaluate("doc", "[{}, {}, {}, {}]").failures
    assert [f.message for f in failures] == [
        "the output holds more than 3 JSON documents, over the contract's limit (max_documents)"
    ]


@pytest.mark.slow
def test_json_lines_cost_time_linear_in_their_count(make_pack: PackMaker) -> None:
    import engine

    folder = json_pack(make_pack, {"type": "object"}, many="jsonl")
    yaml = (folder / "pack.yaml").read_text(encoding="utf-8")
    (folder / "pack.yaml").write_text(yaml + "    max_documents: 1000000\n", encoding="utf-8")
    pack = engine.load_pack(folder)

    def cost(lines: int) -> float:
        start = time.monotonic()
        assert pack.evaluate("doc", '{"a": 1}\n' * lines).status == "pass"
        return time.monotonic() - start

    def best(lines: int) -> float:
        return min(cost(lines) for _ in range(3))

    cost(1000)
    small, large = best(50_000), best(400_000)
    assert large < 8 * small * 2.5, (small, large)  # 8x the lines, about 8x the time


# --------------------------------------------------------------------------- markdown

SECTION = "## DISAGREE: ISSUE-R1-001\n\n**Reviewer Concern:**\n> q\n\n**Rationale:**\nBecause.\n\n"
HEAD = "## Gap Resolution: GAP-FLOW-001\n\n**Confidence:** HIGH\n\n### Trade-offs\nSome.\n\n"


def _context(tmp_path: Path) -> Path:
    context = tmp_path / "context.json"
    known = {
        "known_gaps": ["GAP-FLOW-001"],
        "known_issues": [{"id": "ISSUE-R1-001", "severity": "LOW"}],
    }
    context.write_text(json.dumps(known), encoding="utf-8")
    return context


@pytest.mark.heavy
def test_sections_past_the_limit_fail_naming_it(tmp_path: Path) -> None:
    from engine.contracts.kinds.markdown.sections import MAX_SECTIONS

    output = tmp_path / "out.md"
    context = ["--context", str(_context(tmp_path))]
    pack = ["--pack", "gap-review", "--block", "engineer"]
    output.write_text(HEAD + SECTION * MAX_SECTIONS, encoding="utf-8")
    assert rules("eval", *pack, *context, str(output))[0] == 0
    output.write_text(HEAD + SECTION * (MAX_SECTIONS + 1), encoding="utf-8")
    code, text, _ = rules("eval", *pack, *context, str(output))
    assert code == 3
    assert (
        "INVALID_DISAGREE_REF (HIGH): more than 10000 disagree sections: over the engine's "
        "limit of 10000 sections for one sections check (MAX_SECTIONS)"
    ) in text


@pytest.mark.slow
def test_a_60_mb_markdown_output_of_500_000_sections_gets_its_verdict(tmp_path: Path) -> None:
    output = tmp_path / "out.md"
    output.write_text(HEAD + SECTION * (60_000_000 // len(SECTION)), encoding="utf-8")
    start = time.monotonic()
    done = run_script(
        "/usr/bin/time",
        "-f",
        "%M",
        script("rules"),
        *("eval", "--pack", "gap-review", "--block", "engineer", str(output)),
        *("--context", str(_context(tmp_path))),
        timeout=60,
    )
    assert time.monotonic() - start < 10
    assert done.returncode == 3
    assert b"more than 10000 disagree sections" in done.stdout
    assert int(done.stderr.decode().split()[-1]) < 1024 * 1024  # KB


def test_sections_end_at_the_next_heading_of_their_check_and_cost_linear_time() -> None:
    from engine.contracts.kinds.markdown.model import SectionsCheck
    from engine.contracts.kinds.markdown.sections import find_sections

    check = SectionsCheck(
        check="sections", name="items", heading="### Item [0-9]+", until="## ", fail="X"
    )
    text = "### Item 1\none\n### Item 2\ntwo\n## Next\nrest\n### Item 3\nthree"
    assert [(s.id, s.text) for s in find_sections(text, check)] == [
        ("### Item 1", "### Item 1\none\n"),
        ("### Item 2", "### Item 2\ntwo"),
        ("### Item 3", "### Item 3\nthree"),
    ]

    # no `until` in the text: each section still holds only its own part of it (the sum of
    # the sections is the text, not a quadratic sum of the rests), found in one pass
    body = "### Item 1\n" + "x" * 200 + "\n"
    sections = find_sections(body * 5_000, check)
    assert len(sections) == 5_000
    assert sum(len(section.text) for section in sections) == len(body) * 5_000


def test_a_coverage_check_over_a_large_context_and_output_fails_before_searching(
    tmp_path: Path,
) -> None:
    """Each context item is looked for in the whole output: 1,000 items over 60 MB were 44 s
    of substring searches. Over MAX_COVERAGE_WORK the check fails at once, naming the bound;
    the shipped pack's ordinary cases stay below it."""
    issues = [
        {
            "id": f"ISSUE-R{1 + i // 1000}-{i % 1000:03d}",
            "severity": "HIGH",
            "summary": "s",
            "key_phrase": f"retry limit {i}",
            "location": f"docs/flow{i}.md",
        }
        for i in range(1000)
    ]
    context = tmp_path / "ctx.json"
    context.write_text(json.dumps({"known_gaps": ["GAP-FLOW-001"], "known_issues": issues}))
    head = "## Gap Resolution: GAP-FLOW-001\n\n**Confidence:** HIGH\n\n### Trade-offs\nSome.\n\n"
    line = "### Response to ISSUE-R9-999\nplain words in a response here\n\n"
    output = tmp_path / "out.md"
    output.write_text(head + line * (6_000_000 // len(line)))
    code, text, seconds = rules(
        "eval",
        "--pack",
        "gap-review",
        "--block",
        "engineer",
        "--context",
        str(context),
        str(output),
    )
    assert code == 1, text
    assert "(MAX_COVERAGE_WORK)" in text
    assert seconds < 10
