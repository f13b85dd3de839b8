"""Strategies of the harness for what the engine gained after it was written: the compiled-pack
cache serving `rules eval`, `render` and `gate` from a pack's image (each case runs twice in
one folder, the second from the cache, and must say the same), `rules run` with a first
prompt, json contracts reading fenced output, text contracts' options and messages, and
hostile values to ``engine.run``'s options (an in-process target of its own)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml
from fuzzkit import Case
from hypothesis import strategies as st
from strategies import (
    BASE_PACK,
    HUGE,
    SENTINEL_ARGS,
    TODO,
    VERDICT,
    _paths,
    _replace,
    expressions,
    json_documents,
    mutated,
    odd_scalars,
    odd_values,
    pack_files,
    templates,
)

from conftest import REPO
from engine.format.yamldoc import parse_yaml

# ---------------------------------------------------------------- packs that still load


def _pack_folder(name: str) -> dict[str, str]:
    """The files of a shipped pack (its tests left out), by path in the pack folder."""
    root = REPO / "rules" / name
    return {
        str(path.relative_to(root)): path.read_text(encoding="utf-8")
        for path in sorted(root.rglob("*"))
        if path.is_file() and "tests" not in path.relative_to(root).parts
    }


SENTINEL_FILES = _pack_folder("sentinel")
GATE_FILES = _pack_folder("quality-gate")
REVIEW_FILES = _pack_folder("gap-review")
ENGINEER = REVIEW_FILES["examples/engineer.md"].replace("GAP-XXX", "GAP-FLOW-001")
REVIEW_CONTEXT = "known_gaps: [GAP-FLOW-001, GAP-FLOW-002]\nround: 4\noriginal_prompt: Write it.\n"

ODD_TEXT = [
    "", " ", "{", "}", "{}", "{name}", "{0}", "{value!r}", "{count:>99999}", "%s", "\\", "\n",
    "\x00", "\ud800", "é", "x" * 5000, "{{ x }}", "$", "^$", "(?i)x", "[", "a{2,1}",
]  # fmt: skip
ODD_INTS = [*HUGE, 1, 2, 3, 7, 100, 2**31, 2**53 + 1]


def _same_kind(value: Any) -> st.SearchStrategy[Any]:
    """A value of the same JSON type as ``value``: what a careless edit of a pack that
    still loads gives."""
    if isinstance(value, bool):
        return st.booleans()
    if isinstance(value, int):
        return st.one_of(st.sampled_from(ODD_INTS), st.integers(-5, 50))
    if isinstance(value, float):
        return st.one_of(st.sampled_from([0.0, -0.0, 1e308, 5e-324, 0.5]), st.floats(0, 1))
    if isinstance(value, str):
        return st.one_of(st.sampled_from(ODD_TEXT), st.text(max_size=12), mutated(value))
    if isinstance(value, list):
        return st.one_of(st.just([]), st.just(value + value), st.just(value[:1]))
    return odd_scalars


def _at(value: Any, path: tuple[Any, ...]) -> Any:
    for step in path:
        value = value[step]
    return value


@st.composite
def edited(draw: st.DrawFn, text: str) -> str:
    """The YAML ``text`` with one to three of its values replaced by values of the same
    type (most such packs still load, so their image is written and read back)."""
    pack: Any = parse_yaml(text, "pack.yaml").data  # as the engine reads it (YAML 1.2)
    for _ in range(draw(st.integers(1, 3))):
        paths = _paths(pack)[1:]
        numbers = [path for path in paths if isinstance(_at(pack, path), (int, float))]
        path = draw(st.sampled_from(numbers if numbers and draw(st.booleans()) else paths))
        pack = _replace(pack, path, draw(_same_kind(_at(pack, path))))
    try:
        return yaml.safe_dump(pack, allow_unicode=True, sort_keys=False)
    except (yaml.YAMLError, RecursionError, UnicodeEncodeError):
        return text


# ---------------------------------------------------------------- outputs models write

PROSE = ["Here it is:\n", "Sure!\n", "", "\ufeff", "Done.\n", "```python\nx = 1\n```\n"]
FENCES = ["```json\n", "```\n", "```JSON \r\n", " ```json\n", "```jsonc\n", "~~~json\n"]


@st.composite
def fenced(draw: st.DrawFn) -> str:
    """JSON as a model writes it: prose, one or more fenced blocks (some not closed)."""
    parts = []
    for _ in range(draw(st.integers(1, 3))):
        parts.append(draw(st.sampled_from(PROSE)))
        parts.append(draw(st.sampled_from(FENCES)))
        parts.append(draw(json_documents()) + "\n")
        if draw(st.integers(0, 4)):
            parts.append(draw(st.sampled_from(["```\n", "```", " ``` \n", "````\n"])))
    return draw(mutated("".join(parts)))


def json_contracts() -> st.SearchStrategy[dict[str, Any]]:
    return st.fixed_dictionaries(
        {"kind": st.just("json"), "schema_file": st.just("s.json")},
        optional={
            "extract": st.sampled_from(["auto", "whole", "fenced", "first"]),
            "many": st.sampled_from(["one", "list", "jsonl"]),
            "max_chars": st.sampled_from([1, 10, 1000, 8388608, 2**31]),
            "max_depth": st.sampled_from([0, 1, 3, 200, 10000]),
            "max_documents": st.sampled_from([0, 1, 2, 10000, 1000000]),
            "max_errors": st.sampled_from([0, 1, 100, 2**31]),
        },
    )


PATTERNS = ["x", "^x$", "(?m)^## ", "(?i)gap-\\w+", "[\\s\\S]{0,1000}", "\\A", "\\d{3,}", "é"]
TEXT_MESSAGES = ["min_chars", "max_chars", "min_lines", "max_lines", "pattern", "require", "forbid"]


def text_contracts() -> st.SearchStrategy[dict[str, Any]]:
    rule = st.fixed_dictionaries(
        {"pattern": st.sampled_from(PATTERNS)},
        optional={"message": st.sampled_from(ODD_TEXT), "fail": st.just("WRONG_FORMAT")},
    )
    sizes = st.sampled_from([0, 1, 5, 2**31, 2**63 - 1])
    return st.fixed_dictionaries(
        {"kind": st.just("text")},
        optional={
            "min_chars": sizes,
            "max_chars": sizes,
            "min_lines": sizes,
            "max_lines": sizes,
            "pattern": st.sampled_from(PATTERNS),
            "require": st.lists(rule, max_size=2),
            "forbid": st.lists(rule, max_size=2),
            "messages": st.dictionaries(
                st.sampled_from(TEXT_MESSAGES), st.sampled_from(ODD_TEXT), max_size=3
            ),
        },
    )


def _options(command: str, options: tuple[str, ...]) -> tuple[str, ...]:
    """``options`` without --format for `rules render` (which prints the prompt only)."""
    if command == "eval" or "--format" not in options:
        return options
    return tuple(o for o in options if o not in ("--format", "json"))


COMMANDS = st.tuples(
    st.sampled_from(["eval", "render"]),
    st.sampled_from(
        [
            (),
            ("--format", "json"),
            ("--attempt", "2"),
            ("--attempt", "3", "--format", "json"),
            ("--previous-error", "x"),
            ("--model", "m"),
            ("--error", "boom"),
        ]
    ),
).map(lambda t: (t[0], *_options(t[0], t[1])))
"""A command and a few of its options: later attempts reach the escalation prompts."""


def _fuzz_pack(contracts: dict[str, Any]) -> dict[str, Any]:
    return {**BASE_PACK, "contracts": {**BASE_PACK["contracts"], **contracts}}


GATE_NOW = ("--now", "2026-01-04T06:30:00Z")


def warm_cases() -> st.SearchStrategy[Case]:
    """`rules eval`, `render` and `gate`, each run twice in one folder (the second run from
    the pack's image in the cache): shipped packs with a few values edited, the fuzz pack
    with generated json and text contracts, fenced and mutated outputs."""
    sentinel = st.tuples(COMMANDS, edited(SENTINEL_FILES["pack.yaml"]), mutated(VERDICT)).map(
        lambda t: Case(
            (*t[0], *SENTINEL_ARGS[:1], ".", *SENTINEL_ARGS[2:], "out.txt"),
            {**SENTINEL_FILES, "pack.yaml": t[1], "out.txt": t[2]},
            runs=2,
        )
    )
    gate_options = st.sampled_from([(), ("--format", "json"), ("--retry", "2"), ("--retry", "9")])
    gate = st.tuples(
        edited(GATE_FILES["pack.yaml"]), st.one_of(mutated(TODO), fenced()), gate_options
    ).map(
        lambda t: Case(
            ("gate", "--pack", ".", "--stage", "IMPLEMENT", *GATE_NOW, *t[2], "out.json"),
            {**GATE_FILES, "pack.yaml": t[0], "out.json": t[1]},
            runs=2,
        )
    )
    contract = st.one_of(json_contracts(), text_contracts())
    output = st.one_of(fenced(), json_documents(), mutated("## Notes\n\nGAP-FLOW-001 text\n"))
    fuzz = st.tuples(COMMANDS, contract, output).map(
        lambda t: Case(
            (*t[0], "--pack", ".", "--block", "x", "out.txt"),
            {**pack_files(_fuzz_pack({"x": t[1]})), "out.txt": t[2]},
            runs=2,
        )
    )
    review = st.tuples(
        COMMANDS,
        edited(REVIEW_FILES["pack.yaml"]),
        mutated(ENGINEER),
        st.one_of(st.just(REVIEW_CONTEXT), mutated(REVIEW_CONTEXT)),
    ).map(
        lambda t: Case(
            (*t[0], "--pack", ".", "--block", "engineer", "--context", "ctx.yaml", "out.md"),
            {**REVIEW_FILES, "pack.yaml": t[1], "out.md": t[2], "ctx.yaml": t[3]},
            runs=2,
            own_exits=True,
        )
    )
    return st.one_of(sentinel, gate, fuzz, guard_cases(), review)


# ---------------------------------------------------------------- rules run


def _yaml(value: Any) -> str:
    try:
        return yaml.safe_dump(value, allow_unicode=True)
    except (yaml.YAMLError, RecursionError, UnicodeEncodeError):
        return "{}\n"


RUN_PACK: dict[str, Any] = {
    **BASE_PACK,
    "triggers": {
        "doc": {"on": ["WRONG_FORMAT"], "max_attempts": 2, "template": "rep"},
        "x": {"on": ["PARSE_ERROR", "SCHEMA_ERROR", "WRONG_FORMAT"], "template": "rep"},
    },
    "templates": {
        "rep": {"file": "rep.j2", "purpose": "repair"},
        "first": {"file": "first.j2", "purpose": "initial"},
    },
    "prompts": {"doc": "first", "x": "first"},
    "limits": {"max_output_bytes": 100_000},
    "context": {
        "topic": {"type": "string", "default": ""},
        "n": {"type": "int", "default": 0},
        "xs": {"type": "list", "default": []},
        "m": {"type": "map", "default": {}},
        "anything": {"type": "any", "default": None},
        "where": {"type": "path", "default": "."},
    },
}
# the model: prints out.txt, reading its prompt first (or not: a model that does not read
# stdin); the prompts it was sent are kept beside
MODELS = [
    ("sh", "-c", "cat >> prompts.txt; cat out.txt"),
    ("sh", "-c", "cat out.txt"),
    ("sh", "-c", "head -c 10 >/dev/null; cat out.txt; exit 3"),
    ("sh", "-c", "cat >/dev/null; printf '\\377\\376x'"),
]
RUN_OPTIONS = st.lists(
    st.sampled_from(
        [
            ("--nonce", "4F2C9A"), ("--nonce", ""), ("--nonce", "\x7f\u2028"),
            ("--var", "criterion=AC1"), ("--var", "x="), ("--var", "=x"), ("--var", "a=\ud800"),
            ("--item", "k"), ("--item", "x" * 5000), ("--timeout", "0.000001"),
            ("--timeout", "1e308"), ("--max-output-bytes", "1"), ("--model", "m\n1"),
            ("--keep-outputs",), ("--prompt", "p.md"), ("--prompt", "missing.md"),
            ("--context", "ctx.yaml"), ("--var", "topic=\x00"), ("--var", "n=99999999999999999999"),
        ]
    ),
    max_size=3,
)  # fmt: skip


def run_cases() -> st.SearchStrategy[Case]:
    """`rules run` with a first prompt (the pack's `prompts:` template, generated, or a
    `--prompt` file) and a shell stand-in for the model printing a generated output; run
    once or twice in one session."""

    @st.composite
    def case(draw: st.DrawFn) -> Case:
        contract = draw(st.one_of(json_contracts(), text_contracts()))
        pack = {**RUN_PACK, "contracts": {**BASE_PACK["contracts"], "x": contract}}
        first = draw(st.one_of(st.just("Write {{ nonce }} {{ topic }} {{ m }}"), templates()))
        files = {
            **pack_files(pack),
            "first.j2": first,
            "p.md": draw(st.one_of(st.text(max_size=50), st.sampled_from(ODD_TEXT))),
            "out.txt": draw(st.one_of(fenced(), json_documents(), mutated("hello there\n"))),
            "ctx.yaml": _yaml(draw(st.dictionaries(st.sampled_from(CONTEXT_KEYS), odd_values))),
        }
        options = [part for option in draw(RUN_OPTIONS) for part in option]
        block = draw(st.sampled_from(["doc", "x"]))
        model = draw(st.sampled_from(MODELS))
        args = ("run", "--pack", ".", "--block", block, *options, "--", *model)
        return Case(args, files, runs=draw(st.sampled_from([1, 2])))

    return case()


# ---------------------------------------------------------------- engine.run's options


ODD_OPTION = st.one_of(
    odd_scalars,
    odd_values,
    st.sampled_from([b"x", ["a"], {"a": 1}, {1: "a"}, {"a": b"x"}, Path("."), object(), str]),
)


CONTEXT_KEYS = ["topic", "n", "xs", "m", "anything", "where"]


def run_options() -> st.SearchStrategy[dict[str, Any]]:
    """Keyword options of ``engine.run``: valid ones and hostile ones of every type."""
    text = st.one_of(st.text(max_size=20), st.sampled_from(ODD_TEXT), ODD_OPTION)
    mapping = st.one_of(
        st.dictionaries(st.text(max_size=5), st.text(max_size=5), max_size=3),
        st.dictionaries(st.sampled_from(["criterion", "a", ""]), ODD_OPTION, max_size=2),
        st.dictionaries(st.sampled_from(CONTEXT_KEYS), ODD_OPTION, max_size=3),
        ODD_OPTION,
    )
    return st.fixed_dictionaries(
        {},
        optional={
            "item": text,
            "prompt": text,
            "nonce": text,
            "model": text,
            "vars": mapping,
            "context": mapping,
            "timeout": st.one_of(st.sampled_from([0.5, 1e308, 2**63, 1e-300]), ODD_OPTION),
            "session": st.one_of(st.sampled_from(["s", "s\x00", "x" * 300, ".", ""]), ODD_OPTION),
        },
    )


TOO_LARGE = "é" * 50_001  # past RUN_PACK's limits.max_output_bytes


def model_answers() -> st.SearchStrategy[Any]:
    """What a model call returns or raises: texts, odd values, exceptions."""
    return st.one_of(
        st.one_of(fenced(), json_documents(), mutated(VERDICT)),
        st.sampled_from(
            [None, b"\xff\xfe", bytearray(b"x"), 1, ["x"], ValueError("boom\x00"), OSError()]
        ),
        st.sampled_from([TOO_LARGE, "x\ud800", memoryview(b"x")]),
        st.text(max_size=30),
    )


def api_cases() -> st.SearchStrategy[tuple[str, dict[str, Any], list[Any], dict[str, Any], bool]]:
    """(block, pack data, the answers of successive calls, options, whether the call is
    async: ``engine.arun``) for ``engine.run``."""
    contract = st.one_of(json_contracts(), text_contracts())
    return st.tuples(
        st.sampled_from(["doc", "x", "nope"]),
        contract.map(lambda c: {**RUN_PACK, "contracts": {**BASE_PACK["contracts"], "x": c}}),
        st.lists(model_answers(), min_size=1, max_size=3),
        run_options(),
        st.booleans(),
    )


def api_pack_files(pack: dict[str, Any]) -> dict[str, str]:
    return {**pack_files(pack), "first.j2": "Write {{ nonce }} {{ topic }} {{ xs }} {{ m }}"}


def guard_cases() -> st.SearchStrategy[Case]:
    """`rules render` warm with a generated guard (the image compiles guards when the block
    is first decided)."""

    def with_guard(expression: str) -> Case:
        pack = _replace(BASE_PACK, ("triggers", "doc", "skip_when", 0, "when"), expression)
        return Case(
            ("render", "--pack", ".", "--block", "doc", "out.txt"),
            {**pack_files(pack), "out.txt": "hi\n"},
            runs=2,
        )

    return expressions().map(with_guard)
