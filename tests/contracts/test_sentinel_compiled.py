"""The compiled sentinel grammar: its fast paths agree with the plain definitions they
replace, and a parser builds from plain data without pydantic."""

from __future__ import annotations

import json
import subprocess
import sys
from collections.abc import Mapping

import re2
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sentinel_cases import CASES, build_text, call_args

from conftest import REPO, shipped_pack
from engine.contracts.kinds.sentinel import syntax
from engine.contracts.kinds.sentinel.parser import SentinelParser
from engine.contracts.kinds.sentinel.values import ValueError_, parse_value, tokenize

FAST = settings(max_examples=500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
PACK = shipped_pack("sentinel")

line_text = st.text(alphabet=st.sampled_from(list('AZaz09_=:-" \t\\ÉѦ٣\u00a0xQ')), max_size=20)


@FAST
@given(line=line_text)
def test_default_line_syntax_matches_its_patterns(line: str) -> None:
    header = re2.compile("^([A-Z_]+):$").search(line)
    assert syntax.header_matcher("^([A-Z_]+):$")(line) == (header and header.group(1))
    field = re2.compile("^([A-Z][A-Z0-9_]*)=").search(line)
    expected = field and (field.group(1), line[field.end() :])
    assert syntax.field_line_matcher("^([A-Z][A-Z0-9_]*)=")(line) == expected
    assert syntax.name_check("^[A-Z]")(line) == (re2.search("^[A-Z]", line) is not None)
    assert syntax.name_check("^[a-z][a-z_]*$")(line) == (
        re2.search("^[a-z][a-z_]*$", line) is not None
    )


def test_other_line_syntax_uses_the_pattern() -> None:
    assert syntax.header_matcher("^([a-z]+);$")("abc;") == "abc"
    assert syntax.field_line_matcher("^([a-z]+) *: *")("ab : x") == ("ab", "x")
    assert not syntax.splits_at_first_equals("^([a-z]+);$", "^([A-Z][A-Z0-9_]*)=")


# The character-by-character definitions the fast value grammar must agree with.


def reference_value(raw: str, quote: str, escapes: Mapping[str, str]) -> tuple[str, bool]:
    value = raw.strip()
    if not value.startswith(quote):
        return value, False
    if len(value) < 2 or not value.endswith(quote):
        raise ValueError_("unmatched_quote")
    inner, out, index = value[1:-1], [], 0
    while index < len(inner):
        char = inner[index]
        if char == quote:
            raise ValueError_("unescaped_quote")
        if char == "\\":
            if index + 1 == len(inner):
                raise ValueError_("unterminated_escape")
            if inner[index + 1] not in escapes:
                raise ValueError_("invalid_escape", char=inner[index + 1])
            out.append(escapes[inner[index + 1]])
            index += 2
            continue
        out.append(char)
        index += 1
    return "".join(out), True


def reference_tokens(text: str, quote: str) -> list[str]:
    tokens, current, in_quote, index = [], [], False, 0
    while index < len(text):
        char = text[index]
        if in_quote:
            if char == "\\":
                if index + 1 >= len(text):
                    raise ValueError_("unterminated_token")
                current.append(text[index : index + 2])
                index += 2
                continue
            current.append(char)
            in_quote = char != quote
        elif char in " \t":
            if current:
                tokens.append("".join(current))
                current = []
        else:
            in_quote = char == quote
            current.append(char)
        index += 1
    if in_quote:
        raise ValueError_("unterminated_token")
    if current:
        tokens.append("".join(current))
    return tokens


def outcome(function: object, *args: object) -> object:
    try:
        return function(*args)  # type: ignore[operator]
    except ValueError_ as bad:
        return ("error", bad.code, bad.values)


ESCAPES = {"\\": "\\", '"': '"', "n": "\n", "t": "\t", "r": "\r"}
value_text = st.text(alphabet=st.sampled_from(list('ab "\\ntq\t=\u00a0é')), max_size=16)


@FAST
@given(raw=value_text)
def test_values_decode_like_the_character_loop(raw: str) -> None:
    assert outcome(parse_value, raw, '"', ESCAPES) == outcome(reference_value, raw, '"', ESCAPES)
    quoted = '"' + raw + '"'
    assert outcome(parse_value, quoted, '"', ESCAPES) == outcome(
        reference_value, quoted, '"', ESCAPES
    )


@FAST
@given(text=value_text)
def test_items_tokenize_like_the_character_loop(text: str) -> None:
    assert outcome(tokenize, text, '"') == outcome(reference_tokens, text, '"')


def test_parser_from_plain_data_gives_the_same_results() -> None:
    model = PACK.model
    for case in CASES[:200]:
        block = case["block"]
        plain = SentinelParser.from_data(
            block,
            json.loads(json.dumps(model.contracts[block].model_dump())),
            json.loads(json.dumps(model.sentinel.model_dump())),
        )
        args = call_args(case)
        params = {k: v for k, v in (args.get("vars") or {}).items()}
        assert plain.parse(build_text(case), args.get("nonce"), params) == PACK.parse(
            block, build_text(case), **args
        )


def test_sentinel_package_imports_without_pydantic() -> None:
    model = PACK.model
    data = json.dumps(
        {
            "contract": model.contracts["VERDICT"].model_dump(),
            "grammar": model.sentinel.model_dump(),
        }
    )
    code = f"""
import json, sys, types
package = types.ModuleType("engine"); package.__path__ = ["engine"]; sys.modules["engine"] = package
from engine.contracts.kinds.sentinel.parser import SentinelParser
data = json.loads({data!r})
parser = SentinelParser.from_data("VERDICT", data["contract"], data["grammar"])
text = "\\n".join(["<<<VERDICT:V1:AC1:NONCE=4F2C9A>>>", "ANSWER=YES", 'REASON="ok"',
                  "<<<END_VERDICT:AC1:NONCE=4F2C9A>>>"])
result = parser.parse(text, "4F2C9A", {{"criterion": "AC1"}})
assert result.ok, result.failure
loaded = [m for m in ("pydantic", "yaml", "jinja2", "jsonschema", "re2") if m in sys.modules]
assert loaded == [], loaded
"""
    subprocess.run([sys.executable, "-c", code], check=True, cwd=REPO)


def test_plain_data_defaults_are_the_model_defaults() -> None:
    from engine.contracts.kinds.sentinel.compiler import _GRAMMAR_DEFAULTS
    from engine.contracts.kinds.sentinel.model import SentinelGrammar

    assert SentinelGrammar().model_dump() == _GRAMMAR_DEFAULTS


def test_clean_text_replaces_surrogates_in_huge_texts_too() -> None:
    from engine.core.textio import clean_text

    def reference(text: str) -> str:
        try:
            text.encode("utf-8")
        except UnicodeEncodeError:
            return text.encode("utf-16", "surrogatepass").decode("utf-16", "replace")
        return text

    big = "é" * (1 << 20)
    for text in [
        "abc",
        "é\ud800",
        "\ud83d\ude00x",
        big,
        big + "\udcff",
        "a" + big,
        big[:-1] + "\ud83d" + "\ude00",
    ]:
        assert clean_text(text) == reference(text)
