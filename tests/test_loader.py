"""The loader: positions, duplicate keys, bounded aliases, size caps, extends and merging."""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from engine.format.loader import load_pack_tree, merge_trees
from engine.format.yamldoc import MAX_YAML_BYTES, parse_yaml, read_yaml


def rules_of(findings: list) -> list[str]:
    return [f.rule for f in findings]


def test_positions_are_one_based_for_keys_and_values() -> None:
    doc = parse_yaml("a: 1\nb:\n  c: [x, y]\n", "f.yaml")
    assert doc.source.keys[("b", "c")].line == 3
    assert doc.source.keys[("b", "c")].column == 3
    item = doc.source.values[("b", "c", 1)]
    assert (item.line, item.column) == (3, 10)


def test_yaml_12_scalars_keep_yes_no_on_and_times_as_strings() -> None:
    doc = parse_yaml("v: [YES, NO, on, off, y]\nt: 12:30\nb: true\nn: ~\ni: 0x1f\n", "f.yaml")
    assert doc.data == {
        "v": ["YES", "NO", "on", "off", "y"],
        "t": "12:30",
        "b": True,
        "n": None,
        "i": 31,
    }


def test_duplicate_key_names_both_positions() -> None:
    doc = parse_yaml("top:\n  a: 1\n  b: 2\n  a: 3\n", "dup.yaml")
    [finding] = doc.findings
    assert finding.rule == "yaml-duplicate-key"
    assert str(finding.position) == "dup.yaml:4:3"
    assert "dup.yaml:2:3" in finding.message


def test_billion_laughs_fails_fast_with_a_clear_error() -> None:
    lines = ["a: &a [x, x, x, x, x, x, x, x, x, x]"]
    for i in range(1, 10):
        prev, cur = chr(96 + i), chr(97 + i)
        lines.append(f"{cur}: &{cur} [" + ", ".join([f"*{prev}"] * 10) + "]")
    start = time.perf_counter()
    doc = parse_yaml("\n".join(lines) + "\n", "lol.yaml")
    assert time.perf_counter() - start < 10
    assert rules_of(doc.findings) == ["yaml-too-large"]
    assert "alias" in doc.findings[0].message
    assert doc.data is None


def test_recursive_alias_is_refused() -> None:
    doc = parse_yaml("a: &a [*a]\n", "rec.yaml")
    assert rules_of(doc.findings) == ["yaml-too-large"]


def test_file_over_the_size_cap_is_refused(tmp_path: Path) -> None:
    big = tmp_path / "big.yaml"
    big.write_text("a: " + "x" * (MAX_YAML_BYTES + 1) + "\n")
    doc = read_yaml(big)
    assert rules_of(doc.findings) == ["yaml-too-large"]
    assert str(MAX_YAML_BYTES) in doc.findings[0].message


def test_invalid_utf8_and_syntax_errors_are_findings_with_positions(tmp_path: Path) -> None:
    bad = tmp_path / "bad.yaml"
    bad.write_bytes(b"a: \xff\xfe\n")
    assert rules_of(read_yaml(bad).findings) == ["yaml-encoding"]
    doc = parse_yaml("a: 1\nb: [1, 2\nc: 3\n", "syn.yaml")
    [finding] = doc.findings
    assert finding.rule == "yaml-syntax"
    assert finding.position.line == 3


def test_unsafe_tags_are_not_constructed() -> None:
    doc = parse_yaml("a: !!python/object/apply:os.system ['true']\n", "t.yaml")
    assert "yaml-unsupported-tag" in rules_of(doc.findings)


def test_merge_semantics() -> None:
    base = {"maps": {"a": 1, "b": {"x": 1, "y": 2}}, "list": [1, 2, 3], "gone": 1}
    over = {"maps": {"b": {"y": 20}, "c": 3}, "list": [9], "gone": None}
    assert merge_trees(base, over) == {
        "maps": {"a": 1, "b": {"x": 1, "y": 20}, "c": 3},
        "list": [9],
    }


def test_extends_resolves_from_the_declaring_file_not_the_cwd(
    tmp_path: Path, monkeypatch: object
) -> None:
    (tmp_path / "packs" / "base").mkdir(parents=True)
    (tmp_path / "packs" / "base" / "pack.yaml").write_text(
        "rulepack: base\nseverities: {HIGH: 1}\nfailure_types: {A: {severity: HIGH}}\n"
    )
    (tmp_path / "packs" / "child").mkdir()
    (tmp_path / "packs" / "child" / "pack.yaml").write_text(
        "rulepack: child\nextends: [../base]\nfailure_types: {B: {severity: HIGH}}\n"
    )
    tree = load_pack_tree(tmp_path / "packs" / "child" / "pack.yaml")
    assert tree.findings == []
    assert tree.data["rulepack"] == "child"
    assert set(tree.data["failure_types"]) == {"A", "B"}
    # positions of inherited nodes point into the base file
    assert tree.source.keys[("failure_types", "A")].file.endswith("base/pack.yaml")
    assert tree.source.keys[("failure_types", "B")].file.endswith("child/pack.yaml")


def test_extends_builtin(tmp_path: Path) -> None:
    (tmp_path / "pack.yaml").write_text("rulepack: mine\nextends: [builtin:core]\n")
    tree = load_pack_tree(tmp_path / "pack.yaml")
    assert tree.findings == []
    assert "PARSE_ERROR" in tree.data["failure_types"]


def test_extends_cycle_reports_the_whole_cycle(tmp_path: Path) -> None:
    for name, target in (("a", "b.yaml"), ("b", "c.yaml"), ("c", "a.yaml")):
        (tmp_path / f"{name}.yaml").write_text(f"rulepack: {name}\nextends: [{target}]\n")
    tree = load_pack_tree(tmp_path / "a.yaml")
    [finding] = tree.findings
    assert finding.rule == "extends-cycle"
    assert finding.message.count("->") == 3
    for name in ("a.yaml", "b.yaml", "c.yaml"):
        assert name in finding.message
    assert finding.position.file.endswith("c.yaml")
    assert (finding.position.line, finding.position.column) == (2, 11)


def test_extends_missing_and_absolute(tmp_path: Path) -> None:
    (tmp_path / "pack.yaml").write_text("rulepack: x\nextends: [nowhere, /etc, builtin:nope]\n")
    tree = load_pack_tree(tmp_path / "pack.yaml")
    assert rules_of(tree.findings) == ["extends-not-found", "extends-absolute", "extends-not-found"]
    assert "builtin:core" in tree.findings[2].hint


@pytest.mark.parametrize(
    "value", ["!!int abc", "!!float abc", "!!float 0x10", "!!int 0x", "!!bool maybe", "!!bool 1"]
)
def test_an_explicit_tag_on_a_value_it_cannot_hold_is_a_finding(tmp_path: Path, value: str) -> None:
    from engine.format.yamldoc import read_yaml

    path = tmp_path / "pack.yaml"
    path.write_text(f"rulepack: x\nlimits: {{max_output_bytes: {value}}}\n", encoding="utf-8")
    doc = read_yaml(path)
    assert [(f.rule, f.position.line) for f in doc.findings] == [("yaml-syntax", 2)]


@pytest.mark.parametrize(
    ("text", "column"),
    [('m: "\\uD800 too long"\n', 4), ('"k\\uDC00": 1\n', 1), ('- ["ok", "\\udfff"]\n', 10)],
)
def test_a_lone_surrogate_escape_is_a_finding_at_its_place(text: str, column: int) -> None:
    """YAML's "\\uD800" makes a string no UTF-8 output, file name or ledger can hold: a pack
    text holding one was an internal UnicodeEncodeError when printed (found by the fuzzer)."""
    doc = parse_yaml(text, "f.yaml")
    [finding] = doc.findings
    assert (finding.rule, finding.position.line, finding.position.column) == (
        "yaml-syntax",
        1,
        column,
    )
    assert "holds a lone surrogate" in finding.message
    assert "write the character itself" in finding.hint


def test_a_surrogate_pair_written_as_the_character_is_text() -> None:
    assert parse_yaml('m: "\\U0001F600 and 😀"\n', "f.yaml").data == {"m": "😀 and 😀"}
