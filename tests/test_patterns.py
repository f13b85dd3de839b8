"""Pack patterns: stdlib ``re`` only where proven linear and equivalent to RE2, else RE2."""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import re2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pydantic import BaseModel

from conftest import FIXTURES, REPO
from engine.contracts.kinds.sentinel.delimiters import DelimiterTemplate
from engine.core.patterns import (
    RE2,
    STDLIB,
    PatternError,
    compile_pattern,
    pattern_engine,
    plan_pattern,
)
from engine.format.fields import Ref
from engine.format.model import Rulepack
from engine.format.references import _element, _refs_in
from engine.pack.loaded import check_pack_file

ACCEPTED = [
    "^[A-Za-z0-9_./-]+\\n?$",
    "^[0-9A-F]{6}\\n?$",
    "[0-9A-F]{6}",
    "^([A-Z_]+):$",
    "^([A-Z][A-Z0-9_]*)=",
    "^[a-z][a-z_]*$",
    "^AC[0-9]+\\n?$",
    "^[1-9][0-9]*$",
    "Traceback [(]most recent call last[)]",
    "^(add|modify|delete)$",
    "^[^,]+,[0-9]+$",
    "^\\d+\\s*$",
    "^\\w+-\\w+$",
    "^(?:ab|cd)x?[0-9]{2,4}\\z",
    "^(?P<id>[A-Z]+)-[0-9]+$",
    "^a+?b",
    "^[^\\d]*[0-9]",
    "\\A[a-z]+",
    "^(a|bb)c+",
    "GAP-[A-Z]{2,10}-[0-9]{3}",
    "^(?:ab|cd)(?:ef|gh)[0-9]+$",
    "plain text, no repetition",
]

REFUSED = [
    ("(a+)+", "a quantifier on a group"),
    ("^a*?", "empty string"),
    ("^[0-9]*$", "empty string"),
    ("^(a|b)+$", "a quantifier on a group or alternation"),
    ("^a*a*b$", "overlaps"),
    ("^\\d+\\d+$", "overlaps"),
    ("^a+a", "overlaps"),
    ("^.*x.*$", "overlaps"),
    ("^(a|aa)", "alternative"),
    ("^(?:ab|ab)(?:ab|ab)(?:ab|ab)c", "alternative"),
    ("^(a|[a-c]x)", "same character"),
    ("^(?:x|)y", "empty alternative"),
    ("^a{2,}b?a", "overlaps"),
    ("[a-z]+x", "not anchored"),
    ("[a-z]{1,17}x", "not anchored"),
    ("exceeds [0-9]+ chars", "not anchored"),
    ("unknown field|unknown .* keys", "inside an alternation"),
    ("(?i)abc", "(?"),
    ("\\bword", "escape"),
    ("a(?=b)", "(?"),
    ("(a)\\1", "escape"),
    ("\\pL", "escape"),
    ("\\x41", "escape"),
    ("\\Z", "escape"),
    ("\\Qa.b\\E", "escape"),
    ("[[:alpha:]]", "'['"),
    ("a{,3}", "'{'"),
    ("a{1001}", "above 1000"),
    ("a*+", "after a quantifier"),
    ("a**", "after a quantifier"),
    ("(?>a)", "(?"),
    ("[a-b-c]", "'-'"),
    ("[]a]", "']' first"),
    ("[a--b]", "'--'"),
    ("*a", "nothing to repeat"),
    ("x\ud800", "surrogate"),
]


@pytest.mark.parametrize("pattern", ACCEPTED)
def test_accepted_patterns_run_on_stdlib_re(pattern: str) -> None:
    engine, reason = pattern_engine(pattern)
    assert engine == STDLIB, reason
    re2.compile(pattern)  # accepted means RE2 accepts it too: `rules check` is unchanged


@pytest.mark.parametrize(("pattern", "why"), REFUSED)
def test_refused_patterns_run_on_re2_and_say_why(pattern: str, why: str) -> None:
    engine, reason = pattern_engine(pattern)
    assert engine == RE2
    assert why in reason


def test_patterns_re2_cannot_compile_still_raise() -> None:
    for pattern in ["(?<=nonce) mismatch", "(a)\\1", "a(?=b)"]:
        with pytest.raises(PatternError):
            compile_pattern(pattern)


def test_dollar_means_end_of_text_in_both_engines() -> None:
    plan = plan_pattern("^a$")
    assert plan.source == "^a\\Z"
    assert compile_pattern("^a$").search("a\n") is None
    assert compile_pattern("^a\\n?$").search("a\n") is not None


TRICKY = [
    "",
    "a",
    "a\n",
    "\na",
    "AC1",
    "AC1\n",
    "AC1\n\n",
    "ac1",
    "٣",
    "١٢٣",
    "x\u00a0y",
    "a\u2028b",
    "\v",
    "\f",
    "\t",
    " ",
    "ǅ",
    "ſ",
    "K",
    "ß",
    "ＡＢ",
    "_",
    "a_b",
    "a-b",
    "4F2C9A",
    "4f2c9a",
    "4F2C9A\n",
    "x/y.z",
    "../x",
    "é",
    "😀",
    "a,1",
    ",",
    "aab",
    "abab",
    "cdx99",
    "abx1234",
    "ID-12",
    "  ",
    "a\r",
    "0123456789",
    "x" * 50,
]


def _same(pattern: str, text: str) -> None:
    ours = compile_pattern(pattern)
    theirs = re2.compile(pattern)
    for method in ("search", "fullmatch"):
        mine, reference = getattr(ours, method)(text), getattr(theirs, method)(text)
        assert (mine is None) == (reference is None), (pattern, text, method)
        if mine is not None:
            assert mine.span() == reference.span(), (pattern, text, method)
            assert mine.groups() == reference.groups(), (pattern, text, method)
    assert [m.span() for m in ours.finditer(text)] == [m.span() for m in theirs.finditer(text)], (
        pattern,
        text,
    )


@pytest.mark.parametrize("pattern", ACCEPTED)
def test_stdlib_translation_matches_like_re2(pattern: str) -> None:
    for text in TRICKY:
        _same(pattern, text)


# Generated patterns: whatever the planner accepts must compile on RE2 and match like it.
_ATOMS = [
    "a",
    "b",
    "x",
    "\\d",
    "\\w",
    "\\s",
    "\\D",
    "\\S",
    ".",
    "[ab]",
    "[^a]",
    "[a-c]",
    "[\\d_]",
    "[^\\s]",
    "\\.",
    "\\-",
    "\\n",
    "é",
    "(a|bc)",
    "(?:x|y)",
    "(a)",
    "^",
    "$",
    "\\A",
    "\\z",
    "[[:alpha:]]",
    "\\b",
    "{",
    "}",
    "]",
    "(?i)",
    "\\Z",
]
_QUANTIFIERS = ["", "", "", "*", "+", "?", "{2}", "{1,3}", "{2,}", "*?", "+?", "??", "{,2}", "*+"]

patterns = st.lists(
    st.tuples(st.sampled_from(_ATOMS), st.sampled_from(_QUANTIFIERS)), min_size=0, max_size=5
).map(lambda parts: "".join(a + q for a, q in parts))
texts = st.text(alphabet=st.sampled_from(list("abcx. é_-1\n٣\v\u00a0Kſ")), max_size=12)


@pytest.mark.heavy
@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(pattern=patterns, prefix=st.booleans(), samples=st.lists(texts, max_size=8))
def test_generated_patterns_agree_with_re2(pattern: str, prefix: bool, samples: list[str]) -> None:
    pattern = ("^" if prefix else "") + pattern
    if plan_pattern(pattern).engine != STDLIB:
        return
    re2.compile(pattern)  # never accept what RE2 refuses
    for text in [*samples, *TRICKY[:12]]:
        _same(pattern, text)


# --------------------------------------------------------------------------- linear time


def _all_patterns(value: Any, annotation: Any, refs: tuple[Ref, ...]) -> Iterator[str]:
    """Every pattern of a pack model, defaults included (what the engine will run)."""
    if isinstance(value, BaseModel):
        for name, field in type(value).model_fields.items():
            marks = tuple(m for m in field.metadata if isinstance(m, Ref))
            yield from _all_patterns(
                getattr(value, name), field.annotation, marks + _refs_in(field.annotation)
            )
    elif isinstance(value, str):
        if Ref.PATTERN in refs:
            yield value
    elif isinstance(value, list):
        inner = _element(annotation, 0)
        for item in value:
            yield from _all_patterns(item, inner, _refs_in(inner))
    elif isinstance(value, dict):
        inner = _element(annotation, 1)
        for item in value.values():
            yield from _all_patterns(item, inner, _refs_in(inner))


def _pack_patterns() -> list[str]:
    files = sorted((REPO / "rules").glob("*/pack.yaml"))
    files += sorted((FIXTURES / "packs").glob("*/pack.yaml"))
    found: set[str] = set()
    for pack_file in files:
        model = check_pack_file(Path(pack_file)).model
        assert model is not None, pack_file
        found.update(_all_patterns(model, Rulepack, ()))
        for contract in model.contracts.values():
            if getattr(contract, "kind", None) == "sentinel":
                for template in (contract.opener, contract.closer):  # type: ignore[union-attr]
                    delimiter = DelimiterTemplate(template, model.sentinel.nonce_token)
                    found.add(delimiter.bind({name: "AC1" for name in delimiter.names}).source)
    return sorted(found)


PACK_PATTERNS = _pack_patterns()
ADVERSARIAL_SIZE = 1_000_000


def _adversarial_lines() -> list[str]:
    n = ADVERSARIAL_SIZE
    return [
        "a" * n + "!",
        "A" * n + "!",
        "0" * n + "!",
        "AC" + "1" * n + "!",
        "ab" * (n // 2) + "\n!",
        " " * n + "x",
        "<" * n,
        "-" * n + "=",
        "A" * n + "=" + '"' * 3,
        "F" * n,
        "é" * n + "!",
        "a," * (n // 2),
    ]


@pytest.mark.slow
def test_every_pack_pattern_runs_in_linear_time_on_adversarial_lines() -> None:
    """Each pattern of the shipped and fixture packs, on 1 MB hostile lines: < 1 s each."""
    lines = _adversarial_lines()
    slow = []
    for pattern in PACK_PATTERNS:
        try:
            compiled = compile_pattern(pattern)
        except PatternError:
            continue  # refused by `rules check`: never runs
        for line in lines:
            start = time.perf_counter()
            compiled.search(line)
            compiled.fullmatch(line)
            for _ in zip(range(1000), compiled.finditer(line), strict=False):
                pass
            spent = time.perf_counter() - start
            if spent > 1.0:
                slow.append((pattern, line[:10], round(spent, 2)))
    assert slow == []


def test_the_pack_patterns_were_found() -> None:
    assert "^AC[0-9]+\\n?$" in PACK_PATTERNS
    assert "^([A-Z_]+):$" in PACK_PATTERNS  # a grammar default, not written in the YAML
    assert len(PACK_PATTERNS) > 10


def test_patterns_module_imports_re2_only_when_needed() -> None:
    code = (
        "import sys; from engine.core.patterns import compile_pattern;"
        "compile_pattern('^[A-Z]+$'); assert 're2' not in sys.modules;"
        "compile_pattern('[a-z]+x'); assert 're2' in sys.modules"
    )
    subprocess.run([sys.executable, "-c", _STUB_ENGINE + code], check=True, cwd=REPO)


# Import a module of `engine` without running engine/__init__.py (which loads everything).
_STUB_ENGINE = (
    "import sys, types; package = types.ModuleType('engine');"
    "package.__path__ = ['engine']; sys.modules['engine'] = package;"
)
