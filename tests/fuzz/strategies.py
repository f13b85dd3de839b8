"""Hypothesis strategies of the fuzzing harness: packs around a valid one, outputs of each
contract kind, templates and conditions, gate documents."""

from __future__ import annotations

import json
import math
from pathlib import Path
from typing import Any

import yaml
from fuzzkit import Case
from hypothesis import strategies as st

from conftest import REPO

HUGE = [10**30, -(10**30), 2**63, 2**64 + 1, 10**400, 1500000000, 4194305, -1, 0]

# ---------------------------------------------------------------- odd values

SPECIAL = [math.inf, -math.inf, math.nan, 1e308, -0.0, 2**53 + 1]
odd_scalars = st.one_of(
    st.sampled_from(SPECIAL),
    st.sampled_from(HUGE),
    st.integers(min_value=-(2**70), max_value=2**70),
    st.floats(allow_nan=True, allow_infinity=True),
    st.booleans(),
    st.none(),
    st.text(max_size=40),
    st.sampled_from(["", "x" * 100_000, "\x00", "\ud800", "{{ x }}", "${HOME}", "../../etc"]),
)
odd_keys = st.one_of(
    st.text(max_size=20),
    st.sampled_from(["", "on", "when", "extends", "__class__", "x" * 1000, "1", "null"]),
)
odd_values = st.recursive(
    odd_scalars,
    lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(odd_keys, inner, max_size=4),
    ),
    max_leaves=12,
)


def deep(depth: int) -> Any:
    value: Any = 1
    for _ in range(depth):
        value = {"a": value}
    return value


# ---------------------------------------------------------------- packs

# the pack of conftest's template_pack, with a contract of each kind and a guard
BASE_PACK: dict[str, Any] = {
    "rulepack": "fuzz",
    "extends": ["builtin:core"],
    "contracts": {
        "doc": {"kind": "text", "min_chars": 5},
        "data": {"kind": "json", "schema_file": "s.json"},
        "notes": {"kind": "markdown", "checks": [{"check": "non_empty", "fail": "EMPTY_OUTPUT"}]},
    },
    "triggers": {
        "doc": {
            "on": ["WRONG_FORMAT"],
            "max_attempts": 1,
            "template": "rep",
            "skip_when": [{"name": "g", "when": "output | length > 10000"}],
        }
    },
    "templates": {"rep": {"file": "rep.j2", "purpose": "repair"}},
}
SCHEMA = '{"type": "object", "properties": {"n": {"type": "number", "multipleOf": 0.5}}}'
PACK_FILES = {"s.json": SCHEMA, "rep.j2": "{{ parser_error }}"}


def pack_files(pack: Any = None, template: str = "{{ parser_error }}") -> dict[str, str]:
    text = yaml.safe_dump(BASE_PACK if pack is None else pack, sort_keys=False)
    return {"pack.yaml": text, "s.json": SCHEMA, "rep.j2": template}


def _paths(value: Any, prefix: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    """The places of ``value`` (down to 30 levels: a deep nesting is one place)."""
    found = [prefix]
    if len(prefix) >= 30:
        return found
    if isinstance(value, dict):
        for key, item in value.items():
            found += _paths(item, (*prefix, key))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += _paths(item, (*prefix, index))
    return found


def _replace(value: Any, path: tuple[Any, ...], new: Any) -> Any:
    if not path:
        return new
    head, rest = path[0], path[1:]
    if isinstance(value, dict):
        return {**value, head: _replace(value[head], rest, new)}
    copy = list(value)
    copy[head] = _replace(copy[head], rest, new)
    return copy


@st.composite
def packs(draw: st.DrawFn) -> str:
    """The text of a pack.yaml: the base pack with a few places replaced by odd values,
    odd keys added, or deep nesting."""
    pack: Any = json.loads(json.dumps(BASE_PACK))
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(pack)
        path = draw(st.sampled_from(paths))
        how = draw(st.sampled_from(["scalar", "scalar", "value", "key", "deep"]))
        if how == "scalar":
            pack = _replace(pack, path, draw(odd_scalars))
        elif how == "value":
            pack = _replace(pack, path, draw(odd_values))
        elif how == "deep":
            pack = _replace(pack, path, deep(draw(st.integers(10, 2000))))
        else:
            target: Any = pack
            for step in path:
                target = target[step]
            if isinstance(target, dict):
                target[draw(odd_keys)] = draw(odd_values)
    try:
        return yaml.safe_dump(pack, allow_unicode=True, sort_keys=False)
    except (yaml.YAMLError, RecursionError, UnicodeEncodeError):
        return "rulepack: broken\n"


# ---------------------------------------------------------------- outputs

VERDICT = (REPO / "examples" / "sentinel" / "verdict.txt").read_text(encoding="utf-8")
SENTINEL_ARGS = ("--pack", "sentinel", "--block", "VERDICT", "--nonce", "4F2C9A")
SENTINEL_ARGS += ("--var", "criterion=AC1")
TOKENS = [
    "<<<VERDICT:V1:AC1:NONCE=4F2C9A>>>", "<<<END_VERDICT:AC1:NONCE=4F2C9A>>>", "ANSWER=",
    "YES", "NO", "REASON=", '"', "\n", "\r\n", "=", "\x00", "\ufeff", "x" * 5000, " ", "#",
    "## Gap Resolution:", "**Confidence:**", "GAP-FLOW-001", "```json\n", "```", "{", "}",
]  # fmt: skip


@st.composite
def mutated(draw: st.DrawFn, text: str) -> str:
    """``text`` with a few chunks inserted, removed or replaced."""
    for _ in range(draw(st.integers(0, 5))):
        at = draw(st.integers(0, len(text)))
        end = min(len(text), at + draw(st.integers(0, 20)))
        chunk = draw(st.one_of(st.sampled_from(TOKENS), st.text(max_size=10)))
        text = text[:at] + chunk + text[end:]
    return text


def json_documents() -> st.SearchStrategy[str]:
    """JSON texts: random values (huge and non-finite numbers included), deep nesting, and
    raw number forms Python's json reads (NaN, Infinity, 400-digit integers)."""
    values = st.recursive(
        st.one_of(
            st.integers(min_value=-(2**70), max_value=2**70),
            st.sampled_from(HUGE),
            st.floats(allow_nan=False, allow_infinity=False),
            st.text(max_size=20),
            st.booleans(),
            st.none(),
        ),
        lambda inner: st.one_of(
            st.lists(inner, max_size=4), st.dictionaries(st.text(max_size=8), inner, max_size=4)
        ),
        max_leaves=15,
    )
    raw = st.sampled_from(
        [
            '{"n": NaN}',
            '{"n": Infinity, "m": -Infinity}',
            '{"n": ' + "1" * 401 + "}",
            '{"n": 1e400}',
            "[" * 5000 + "]" * 5000,
            '{"a": "\\ud800"}',
        ]
    )
    return st.one_of(values.map(lambda v: json.dumps(v)), raw)


def output_cases() -> st.SearchStrategy[Case]:
    """`rules parse` and `rules eval` of outputs of each kind: sentinel (a VERDICT around
    the shipped example), json, markdown and text (the fuzz pack's contracts)."""
    commands = st.sampled_from([("parse",), ("eval",), ("eval", "--format", "json")])
    sentinel = st.tuples(commands, mutated(VERDICT)).map(
        lambda t: Case((*t[0], *SENTINEL_ARGS, "out.txt"), {"out.txt": t[1]})
    )
    others = st.tuples(
        commands,
        st.sampled_from(["doc", "data", "notes"]),
        st.one_of(json_documents(), mutated("## Notes\n\nGAP-FLOW-001 text\n")),
    ).map(
        lambda t: Case(
            (*t[0], "--pack", ".", "--block", t[1], "out.txt"),
            {**pack_files(), "out.txt": t[2]},
        )
    )
    return st.one_of(sentinel, others)


# ---------------------------------------------------------------- templates and conditions

NUMBERS = st.one_of(st.integers(-3, 40), st.sampled_from(HUGE), st.just(4000000))
ATOMS = st.one_of(
    st.sampled_from(["parser_error", "attempt", "max_attempts", "nonce", "output", "'ab'"]),
    NUMBERS.map(str),
    st.sampled_from(["[1, 2]", "{'a': 1}", "'{:>{}}'", "'%*s'", "'\\t'", "'x' * 1000", "none"]),
    st.sampled_from(["('<a>' | safe)", "('{:>{}}' | escape)", "namespace(v=1)", "range(5)"]),
    st.floats(allow_nan=False, allow_infinity=False).map(repr),
)  # fmt: skip
METHODS = [
    "center", "ljust", "rjust", "zfill", "expandtabs", "replace", "join", "format", "split",
    "append", "extend", "insert", "update", "to_bytes", "translate", "upper", "count",
]  # fmt: skip
FILTERS = [
    "center", "indent", "list", "join", "int", "string", "replace", "wordwrap", "sort",
    "unique", "batch", "sum", "length", "format", "truncate", "json", "tojson", "reverse",
    "first", "round", "abs", "float", "map('upper')", "select", "dictsort", "items",
]  # fmt: skip


def expressions() -> st.SearchStrategy[str]:
    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.tuples(inner, st.sampled_from(["+", "*", "**", "~", "%", "//", "-"]), inner).map(
                lambda t: f"({t[0]} {t[1]} {t[2]})"
            ),
            st.tuples(inner, st.sampled_from(METHODS), st.lists(inner, max_size=2)).map(
                lambda t: f"{t[0]}.{t[1]}({', '.join(t[2])})"
            ),
            st.tuples(inner, st.sampled_from(FILTERS), st.lists(inner, max_size=1)).map(
                lambda t: (
                    f"({t[0]} | {t[1]}({', '.join(t[2])}))"
                    if t[2] and "(" not in t[1]
                    else f"({t[0]} | {t[1]})"
                )
            ),
            st.tuples(inner, inner).map(lambda t: f"[{t[0]}, {t[1]}]"),
            st.tuples(inner, inner).map(lambda t: f"{t[0]}[{t[1]}]"),
            st.tuples(inner, inner).map(lambda t: f"({t[0]} < {t[1]})"),
        )

    return st.recursive(ATOMS, extend, max_leaves=8)


@st.composite
def templates(draw: st.DrawFn) -> str:
    """A template: expressions output, set, and in loops over ranges."""
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        expression = draw(expressions())
        kind = draw(st.sampled_from(["out", "set", "loop", "ns"]))
        if kind == "out":
            parts.append("{{ " + expression + " }}")
        elif kind == "set":
            parts.append("{% set v = " + expression + " %}{{ v }}")
        elif kind == "loop":
            count = draw(st.sampled_from([3, 30, 1000, 100000]))
            parts.append(
                "{% set xs = [] %}{% for i in range(" + str(count) + ") %}"
                "{{ xs.append(" + expression + ") or '' }}{% endfor %}{{ xs | length }}"
            )
        else:
            parts.append(
                "{% set ns = namespace(v=" + expression + ") %}{% for i in range(40) %}"
                "{% set ns.v = ns.v * ns.v %}{% endfor %}{{ ns.v }}"
            )
    return "\n".join(parts)


def render_cases() -> st.SearchStrategy[Case]:
    """`rules render` of the template pack with a generated template or guard."""
    args = ("render", "--pack", ".", "--block", "doc", "out.txt")
    template = templates().map(lambda t: Case(args, {**pack_files(template=t), "out.txt": "hi\n"}))

    def with_guard(expression: str) -> Case:
        pack = _replace(BASE_PACK, ("triggers", "doc", "skip_when", 0, "when"), expression)
        return Case(args, {**pack_files(pack), "out.txt": "hi\n"})

    return st.one_of(template, expressions().map(with_guard))


# ---------------------------------------------------------------- gates

TODO = (REPO / "examples" / "quality-gate" / "todo.json").read_text(encoding="utf-8")
GATE_ARGS = ("gate", "--pack", "quality-gate", "--stage", "IMPLEMENT")
GATE_ARGS += ("--now", "2026-01-04T06:30:00Z")


def gate_cases() -> st.SearchStrategy[Case]:
    """`rules gate` with generated JSON: random documents and the shipped todo.json with a
    few of its values replaced by odd ones."""
    todo = json.loads(TODO)

    @st.composite
    def odd_todo(draw: st.DrawFn) -> str:
        value: Any = todo
        for _ in range(draw(st.integers(1, 3))):
            path = draw(st.sampled_from(_paths(value)))
            value = _replace(value, path, draw(odd_values))
        try:
            return json.dumps(value, ensure_ascii=False)
        except (ValueError, RecursionError):
            return TODO

    documents = st.one_of(json_documents(), odd_todo(), mutated(TODO))
    retry = st.sampled_from([[], ["--retry", "1"], ["--retry", "99999999999999999999999"]])
    return st.tuples(documents, retry).map(
        lambda t: Case((*GATE_ARGS, *t[1], "out.json"), {"out.json": t[0]})
    )


def check_cases() -> st.SearchStrategy[Case]:
    return packs().map(lambda text: Case(("check", "."), {**pack_files(), "pack.yaml": text}))


def shipped_check_cases() -> list[Case]:
    """`rules check` of each shipped pack: the base every generated pack varies."""
    return [Case(("check", str(path))) for path in sorted(Path(REPO / "rules").iterdir())]
