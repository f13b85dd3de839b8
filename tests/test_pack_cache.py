"""The compiled-pack cache of `rules parse`: same results from the cache as from a load, and
an entry is never used once a file of the pack (or of a pack it extends) has changed."""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import REPO, SCRIPTS, heavy_imports
from engine.pack.cache import FORMAT

VERDICT = (
    '<<<VERDICT:V1:AC1:NONCE=4F2C9A>>>\nANSWER=YES\nREASON="' + "r" * 400 + '"\n'
    "<<<END_VERDICT:AC1:NONCE=4F2C9A>>>\n"
)


def _parse(
    pack: str, text: str, cache: Path, *extra: str, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [
            str(SCRIPTS / "rules"),
            "parse",
            "--pack",
            pack,
            "--block",
            "VERDICT",
            "--nonce",
            "4F2C9A",
            "--var",
            "criterion=AC1",
            *extra,
        ],
        input=text,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "RULES_CACHE_DIR": str(cache), **(env or {})},
    )


def _entries(cache: Path) -> list[Path]:
    return sorted(cache.glob("*.json")) if cache.is_dir() else []


@pytest.mark.heavy
def test_a_cache_hit_parses_exactly_like_a_load(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    cold = _parse("sentinel", VERDICT, cache, "--format", "json")
    assert len(_entries(cache)) == 1
    warm = _parse("sentinel", VERDICT, cache, "--format", "json")
    off = _parse("sentinel", VERDICT, cache, "--format", "json", env={"RULES_NO_CACHE": "1"})
    assert cold.returncode == warm.returncode == off.returncode == 0
    assert cold.stdout == warm.stdout == off.stdout
    assert json.loads(warm.stdout)["data"]["reason"] == "r" * 400


@pytest.mark.heavy
def test_editing_the_pack_invalidates_its_entry(tmp_path: Path) -> None:
    pack = tmp_path / "sentinel"
    shutil.copytree(REPO / "rules" / "sentinel", pack)
    cache = tmp_path / "cache"
    assert _parse(str(pack), VERDICT, cache).returncode == 0
    pack_file = pack / "pack.yaml"
    text = pack_file.read_text(encoding="utf-8")
    rule = "{check: max_len, field: REASON, max: 500, message: REASON exceeds 500 chars}"
    assert rule in text
    pack_file.write_text(text.replace(rule, rule.replace("500", "300")), encoding="utf-8")
    shorter = _parse(str(pack), VERDICT, cache)
    assert shorter.returncode == 1
    assert shorter.stderr == "error: REASON exceeds 300 chars\n"


@pytest.mark.heavy
def test_a_pack_broken_after_a_cached_parse_is_refused(tmp_path: Path) -> None:
    pack = tmp_path / "sentinel"
    shutil.copytree(REPO / "rules" / "sentinel", pack)
    cache = tmp_path / "cache"
    assert _parse(str(pack), VERDICT, cache).returncode == 0
    (pack / "pack.yaml").write_text("rulepack: [broken\n", encoding="utf-8")
    broken = _parse(str(pack), VERDICT, cache)
    assert broken.returncode == 2
    assert "pack.yaml:2:1: invalid YAML" in broken.stderr


@pytest.mark.heavy
@pytest.mark.parametrize("damage", ["", "{not json", '{"format": 1}', "[]"])
def test_a_damaged_entry_falls_back_to_loading(tmp_path: Path, damage: str) -> None:
    cache = tmp_path / "cache"
    first = _parse("sentinel", VERDICT, cache)
    [entry] = _entries(cache)
    entry.write_text(damage, encoding="utf-8")
    again = _parse("sentinel", VERDICT, cache)
    assert (again.returncode, again.stdout, again.stderr) == (0, first.stdout, "")
    assert json.loads(entry.read_text(encoding="utf-8"))["format"] == FORMAT


@pytest.mark.heavy
def test_no_cache_writes_nothing_and_an_unwritable_folder_is_ignored(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    assert _parse("sentinel", VERDICT, cache, env={"RULES_NO_CACHE": "1"}).returncode == 0
    assert _entries(cache) == []
    blocker = tmp_path / "file"
    blocker.write_text("not a folder", encoding="utf-8")
    done = _parse("sentinel", VERDICT, blocker / "cache")
    assert (done.returncode, done.stderr) == (0, "")


@pytest.mark.heavy
def test_a_warm_parse_imports_no_yaml_pydantic_or_jinja2(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    _parse("sentinel", VERDICT, cache)
    args = ["parse", "--pack", "sentinel", "--block", "VERDICT", "--nonce", "4F2C9A"]
    assert heavy_imports([*args, "--var", "criterion=AC1"], cache, stdin=VERDICT) == []


def test_every_sentinel_case_parses_the_same_from_cached_data() -> None:
    """The cache stores the grammar as JSON: built back from it, every YAML case of the
    sentinel grammar gives the result a freshly loaded pack gives."""
    from sentinel_cases import CASES, build_text, call_args

    import engine
    from engine.pack.cache import ParsingPack, parsing_data

    pack = engine.load_pack("sentinel")
    cached = ParsingPack(json.loads(json.dumps(parsing_data(pack))))
    for case in CASES:
        text, args = build_text(case), call_args(case)
        assert cached.parse(case["block"], text, **args) == pack.parse(
            case["block"], text, **args
        ), case


def _check(target: str, cache: Path, *extra: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPTS / "rules"), "check", target, *extra],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "RULES_CACHE_DIR": str(cache)},
    )


@pytest.mark.heavy
def test_rules_check_remembers_a_clean_pack_until_a_file_of_it_changes(tmp_path: Path) -> None:
    pack = tmp_path / "sentinel"
    shutil.copytree(REPO / "rules" / "sentinel", pack)
    cache = tmp_path / "cache"
    first = _check(str(pack), cache, "--format", "json")
    assert first.returncode == 0
    assert len(list(cache.glob("check-*.json"))) == 1
    probe = (
        "import sys; from engine.cli.main import main; sys.argv = ['rules', 'check', "
        f"{str(pack)!r}, '--format', 'json']\ntry:\n    main()\nexcept SystemExit:\n"
        "    pass\nprint('HEAVY', sorted(m for m in ('yaml', 'pydantic', 'jinja2') "
        "if m in sys.modules), file=sys.stderr)"
    )
    warm = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "RULES_CACHE_DIR": str(cache)},
    )
    assert warm.stdout == first.stdout
    assert "HEAVY []" in warm.stderr, warm.stderr
    # a template of the pack breaks: the entry no longer holds, the finding is reported
    template = next((pack / "templates").glob("*.j2"))
    template.write_text("{{ parser_eror }}\n", encoding="utf-8")
    broken = _check(str(pack), cache)
    assert broken.returncode == 1
    assert "unknown-template-variable" in broken.stdout


@pytest.mark.heavy
def test_rules_check_never_remembers_findings(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    target = str(REPO / "tests" / "fixtures" / "packs" / "many_findings")
    first, second = _check(target, cache), _check(target, cache)
    assert first.returncode == second.returncode == 1
    assert first.stdout == second.stdout
    assert list(cache.glob("check-*.json")) == []


def test_the_cached_pack_refuses_a_block_as_the_loaded_pack_does() -> None:
    """Pack and the cached ParsingPack share one parse entry point: an unknown block and a
    block of a kind without a parser are refused with the same message by both."""
    import engine
    from engine.core.errors import EngineError
    from engine.pack.cache import ParsingPack, parsing_data

    pack = engine.load_pack(str(REPO / "tests" / "fixtures" / "packs" / "json_text"))
    cached = ParsingPack(json.loads(json.dumps(parsing_data(pack))))
    expected = {
        "NOPE": "pack 'json-text' has no block 'NOPE'",
        "task": "block 'task' is a json contract; `parse` needs a sentinel contract",
        "summary": "block 'summary' is a text contract; `parse` needs a sentinel contract",
    }
    for block, message in expected.items():
        for parser in (pack, cached):
            with pytest.raises(EngineError, match=re.escape(message)):
                parser.parse(block, "text", nonce="4F2C9A")
