"""`kind: tool_call` contracts: tool calls in every client's shape (OpenAI chat, OpenAI
Responses, Anthropic, plain), as text or an SDK's object, checked against declared tools;
every failure in one verdict, the repair prompt with the tool's schema (a golden file), and
the pack `rules init --kind tool_call` writes, through `rules eval`, `rules render`,
`rules test`, `engine.run` and the server."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest

import engine
from conftest import FIXTURES, PackMaker, run_cli
from engine.cli.init import scaffold

GOLDEN = FIXTURES / "golden" / "tool_call"

WRONG_ARGUMENTS = {"city": "", "unit": "kelvin"}
THREE_FAILURES = [
    (
        "SCHEMA_ERROR",
        "the call names the tool `get_wether`, which does not exist: did you mean `get_weather`?",
        None,
    ),
    ("SCHEMA_ERROR", "the call (as `get_weather`): `city` is empty: write it", "/city"),
    (
        "SCHEMA_ERROR",
        'the call (as `get_weather`): `unit` is "kelvin": it must be one of "celsius", '
        '"fahrenheit"',
        "/unit",
    ),
]


def openai_chat(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    call = {"name": name, "arguments": json.dumps(arguments)}
    return {
        "role": "assistant",
        "content": None,
        "tool_calls": [{"id": "call_1", "type": "function", "function": call}],
    }


def anthropic(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "content": [
            {"type": "text", "text": "I will look it up."},
            {"type": "tool_use", "id": "toolu_1", "name": name, "input": arguments},
        ],
    }


def responses(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    item = {"type": "function_call", "call_id": "c1", "name": name}
    return {"output": [{**item, "arguments": json.dumps(arguments)}]}


def plain(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


def chat_completion(name: str, arguments: dict[str, Any]) -> dict[str, Any]:
    return {"object": "chat.completion", "choices": [{"message": openai_chat(name, arguments)}]}


SHAPES = [openai_chat, anthropic, responses, plain, chat_completion]


@pytest.fixture(scope="module")
def pack_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The pack `rules init --kind tool_call` writes (its repair template is the shipped
    prompts/tool_call_repair.md.j2)."""
    folder = tmp_path_factory.mktemp("init") / "calls"
    scaffold(folder, "calls", "tool_call")
    return folder


def failures(pack: engine.Pack, output: str, block: str = "ANSWER") -> list[tuple[Any, ...]]:
    verdict = pack.evaluate(block, output)
    return [(f.type, f.message, f.path) for f in verdict.failures]


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: shape.__name__)
def test_a_misspelt_tool_and_two_schema_errors_are_three_failures_in_any_shape(
    pack_dir: Path, shape: Any
) -> None:
    pack = engine.load_pack(pack_dir)
    assert failures(pack, json.dumps(shape("get_wether", WRONG_ARGUMENTS))) == THREE_FAILURES


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: shape.__name__)
def test_a_good_call_passes_in_any_shape_and_is_the_data(pack_dir: Path, shape: Any) -> None:
    pack = engine.load_pack(pack_dir)
    arguments = {"city": "Oslo", "unit": "celsius"}
    verdict = pack.evaluate("ANSWER", json.dumps(shape("get_weather", arguments)))
    assert verdict.status == "pass", verdict.failures
    assert verdict.data == {"calls": [{"name": "get_weather", "arguments": arguments}]}


def test_the_repair_prompt_names_each_failure_with_the_schema(pack_dir: Path) -> None:
    """The golden file is the whole prompt: each error with its pointer, the output, the
    tools with their schemas. The Anthropic block gives the same prompt but for the quoted
    output."""
    output = json.dumps(openai_chat("get_wether", WRONG_ARGUMENTS))
    rendered = run_cli("render", "--pack", str(pack_dir), "--block", "ANSWER", input=output)
    assert rendered.exit_code == 0, rendered.output
    golden = GOLDEN / "repair_openai.md"
    assert rendered.stdout == golden.read_text(encoding="utf-8")
    for _, message, _ in THREE_FAILURES:
        assert f"- {message}" in rendered.stdout
    schema = '{"type": "object", "required": ["city", "unit"], "additionalProperties": false'
    tool = "Tool `get_weather`: The weather forecast for a city.\nArguments (JSON Schema): "
    assert tool + schema in rendered.stdout
    other = json.dumps(anthropic("get_wether", WRONG_ARGUMENTS))
    again = run_cli("render", "--pack", str(pack_dir), "--block", "ANSWER", input=other)
    assert again.stdout.replace(other, output) == rendered.stdout


def test_the_pack_rules_init_writes_checks_and_passes_its_tests(pack_dir: Path) -> None:
    assert run_cli("check", str(pack_dir)).exit_code == 0
    tested = run_cli("test", str(pack_dir), "--format", "json")
    assert tested.exit_code == 0, tested.output
    assert json.loads(tested.stdout)["passed"] == 2


TOOLS = """\
rulepack: tools
version: 1.0.0
extends: [builtin:core]
failure_types:
  BAD_RANGE: {severity: MEDIUM, retriable: true, explain: A range that ends before it starts.}
contracts:
  CALLS:
    kind: tool_call
    min_calls: 1
    max_calls: 2
    tools:
      book:
        schema_file: schemas/book.schema.json
        conditions:
          - {check: "arguments.start <= arguments.end", message: the stay ends before it starts,
             fail: BAD_RANGE}
          - {check: "arguments.guests < 9", message: at most 8 guests}
      cancel:
        parameters: {type: object, required: [id], properties: {id: {type: string}}}
"""
BOOK = {
    "type": "object",
    "required": ["start", "end", "guests"],
    "properties": {
        "start": {"type": "integer"},
        "end": {"type": "integer"},
        "guests": {"type": "integer", "minimum": 1},
    },
}


@pytest.fixture
def tools(make_pack: PackMaker) -> engine.Pack:
    folder = make_pack(TOOLS, files={"schemas/book.schema.json": json.dumps(BOOK)})
    assert run_cli("check", str(folder)).exit_code == 0
    return engine.load_pack(folder)


def call(name: str, arguments: Any) -> dict[str, Any]:
    return {"name": name, "arguments": arguments}


@pytest.mark.parametrize(
    ("output", "expected"),
    [
        (
            [call("book", {"start": 5, "end": 2, "guests": 12})],
            [
                ("BAD_RANGE", "the call (`book`): the stay ends before it starts", None),
                ("SCHEMA_ERROR", "the call (`book`): at most 8 guests", None),
            ],
        ),
        (
            [call("book", {"start": 1, "end": 2, "guests": 1})] * 3,
            [("WRONG_FORMAT", "the output holds 3 tool calls: make at most 2", None)],
        ),
        (
            [],
            [
                (
                    "WRONG_FORMAT",
                    "the output holds 0 tool calls: call at least 1 (tools: `book`, `cancel`)",
                    None,
                )
            ],
        ),
        (
            [call("delete_everything", {}), call("cancel", '{"id": 7')],
            [
                (
                    "SCHEMA_ERROR",
                    "call 1 names the tool `delete_everything`, which does not exist: call one "
                    "of `book`, `cancel`",
                    None,
                ),
                (
                    "PARSE_ERROR",
                    "call 2 (`cancel`): the arguments are not JSON (character 9: Expecting ',' "
                    "delimiter)",
                    None,
                ),
            ],
        ),
        (
            [call("cancel", json.dumps(json.dumps({"id": "b1"})))],
            [
                (
                    "PARSE_ERROR",
                    "the call (`cancel`): the arguments are a JSON string holding JSON (encoded "
                    "twice): write the arguments object once",
                    None,
                )
            ],
        ),
        (
            [call("cancel", 5)],
            [
                (
                    "SCHEMA_ERROR",
                    "the call (`cancel`): the arguments are a number: it must be an object",
                    "",
                )
            ],
        ),
        (
            [call("cancel", {"id": 7}), "cancel"],
            [
                ("PARSE_ERROR", "item 2 is a string, not a tool call (an object)", None),
                (
                    "SCHEMA_ERROR",
                    "the call (`cancel`): `id` is a number: it must be a string",
                    "/id",
                ),
            ],
        ),
        (
            {"arguments": {}},
            [
                ("PARSE_ERROR", "item 1 is not a tool call: it names no tool (`name`)", None),
                (
                    "WRONG_FORMAT",
                    "the output holds 0 tool calls: call at least 1 (tools: `book`, `cancel`)",
                    None,
                ),
            ],
        ),
        (
            "to book it I would call book()",
            [
                (
                    "PARSE_ERROR",
                    "no JSON found: the output is text, with no JSON object or array in it",
                    None,
                )
            ],
        ),
    ],
)
def test_every_way_to_fail_is_a_failure_of_one_verdict(
    tools: engine.Pack, output: Any, expected: list[tuple[Any, ...]]
) -> None:
    text = output if isinstance(output, str) else json.dumps(output)
    assert failures(tools, text, "CALLS") == expected


def test_a_condition_that_cannot_run_says_so_and_two_good_calls_pass(tools: engine.Pack) -> None:
    ok = [call("book", {"start": 1, "end": 2, "guests": 2}), call("cancel", {"id": "b1"})]
    assert tools.evaluate("CALLS", json.dumps(ok)).status == "pass"
    text = "```json\n" + json.dumps(call("book", {"start": 1, "end": "2", "guests": 2})) + "\n```"
    assert failures(tools, text, "CALLS") == [
        ("SCHEMA_ERROR", "the call (`book`): `end` is a string: it must be an integer", "/end")
    ]


@pytest.mark.parametrize(
    ("change", "finding"),
    [
        ("max_calls: 2", "min_calls (3) is over max_calls (2)"),
        ("schema_file: schemas/book.schema.json", "the tool declares `parameters` and"),
        ("{type: object, required: 3}", "parameters: not a valid JSON Schema"),
        ('"arguments.start <= argument.end"', "expression uses unknown variable 'argument'"),
    ],
)
def test_rules_check_finds_what_is_wrong_with_the_tools(
    make_pack: PackMaker, change: str, finding: str
) -> None:
    text = TOOLS
    if change == "max_calls: 2":
        text = text.replace("min_calls: 1", "min_calls: 3")
    elif change.startswith("schema_file"):
        text = text.replace(
            "        parameters: {type",
            "        schema_file: schemas/book.schema.json\n        parameters: {type",
        )
    elif change.startswith("{type"):
        text = text.replace(
            "{type: object, required: [id], properties: {id: {type: string}}}", change
        )
    else:
        text = text.replace('"arguments.start <= arguments.end"', change)
    folder = make_pack(text, files={"schemas/book.schema.json": json.dumps(BOOK)})
    checked = run_cli("check", str(folder))
    assert checked.exit_code == 1
    assert finding in checked.output
    assert "pack.yaml:" in checked.output


class _Function(SimpleNamespace):
    pass


def _openai_completion(name: str, arguments: dict[str, Any]) -> Any:
    """An object shaped as the openai SDK's ChatCompletion (attributes, not a dict)."""
    function = _Function(name=name, arguments=json.dumps(arguments))
    tool_call = SimpleNamespace(id="call_1", type="function", function=function)
    message = SimpleNamespace(role="assistant", content=None, tool_calls=[tool_call])
    return SimpleNamespace(choices=[SimpleNamespace(index=0, message=message)])


def _anthropic_message(name: str, arguments: dict[str, Any]) -> Any:
    """An object shaped as the anthropic SDK's Message."""
    blocks = [
        SimpleNamespace(type="text", text="Checking."),
        SimpleNamespace(type="tool_use", id="toolu_1", name=name, input=arguments),
    ]
    return SimpleNamespace(id="msg_1", type="message", role="assistant", content=blocks)


def _responses(name: str, arguments: dict[str, Any]) -> Any:
    item = SimpleNamespace(
        type="function_call", call_id="c1", name=name, arguments=json.dumps(arguments)
    )
    return SimpleNamespace(output=[SimpleNamespace(type="message", content=[]), item])


@pytest.mark.parametrize("sdk", [_openai_completion, _anthropic_message, _responses])
def test_engine_run_takes_an_sdks_object_and_repairs_it(
    pack_dir: Path, tmp_path: Path, sdk: Any
) -> None:
    prompts: list[str] = []

    def model(prompt: str) -> Any:
        prompts.append(prompt)
        if len(prompts) == 1:
            return sdk("get_wether", WRONG_ARGUMENTS)
        return sdk("get_weather", {"city": "Oslo", "unit": "celsius"})

    result = engine.run(pack_dir, "ANSWER", model, session=tmp_path / "s", prompt="Weather?")
    assert result.decision.action == "PROCEED", result
    assert result.verdict.data == {
        "calls": [{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "celsius"}}]
    }
    for _, message, _ in THREE_FAILURES:
        assert message in prompts[1]


def test_a_response_without_tool_calls_is_too_few_calls(pack_dir: Path, tmp_path: Path) -> None:
    message = SimpleNamespace(role="assistant", content="It is sunny.", tool_calls=None)
    reply = SimpleNamespace(choices=[SimpleNamespace(message=message)])
    result = engine.run(
        pack_dir, "ANSWER", lambda prompt: reply, session=tmp_path / "s", prompt="Weather?"
    )
    # a response that answers in prose calls no tool: its text is the output, read as the
    # kind reads any text (engine.session.returned), and holds no call
    assert result.verdict.failure_type == "PARSE_ERROR", result.verdict.error
    assert result.attempts[0].output == "It is sunny."
    assert "no JSON found" in (result.verdict.error or ""), result.verdict.error


def test_the_server_evaluates_tool_calls_as_rules_eval_does(pack_dir: Path, tmp_path: Path) -> None:
    pytest.importorskip("fastapi", reason="the server extra is not installed")
    from fastapi.testclient import TestClient

    from engine.server.app import create_app
    from engine.server.packs import load_pack_set
    from engine.server.settings import ServerSettings

    config = ServerSettings(packs=(str(pack_dir),), sessions_dir=str(tmp_path / "sessions"))
    output = json.dumps(anthropic("get_wether", WRONG_ARGUMENTS))
    with TestClient(create_app(config, load_pack_set(config.packs))) as http:
        answer = http.post(
            "/v1/evaluate", json={"pack": "calls", "block": "ANSWER", "output": output}
        )
    assert answer.status_code == 200, answer.text
    found = [(f["type"], f["message"], f.get("path")) for f in answer.json()["verdict"]["failures"]]
    assert found == THREE_FAILURES


def test_rules_run_repairs_a_model_command_that_prints_tool_calls(
    pack_dir: Path, tmp_path: Path
) -> None:
    """The command prints a misspelt Anthropic call first, then, asked to repair, a good
    OpenAI one; the loop proceeds with the call's data."""
    bad = json.dumps(anthropic("get_wether", WRONG_ARGUMENTS))
    good = json.dumps(openai_chat("get_weather", {"city": "Oslo", "unit": "celsius"}))
    model = (
        "import sys; prompt = sys.stdin.read(); "
        f"print({good!r} if 'broke their contract' in prompt else {bad!r})"
    )
    ran = run_cli(
        "run",
        "--pack",
        str(pack_dir),
        "--block",
        "ANSWER",
        "--session",
        str(tmp_path / "s"),
        "--",
        sys.executable,
        "-c",
        model,
    )
    assert ran.exit_code == 0, ran.output
    assert "attempt 1: fail SCHEMA_ERROR" in ran.stderr
    assert json.loads(ran.stdout) == {
        "calls": [{"name": "get_weather", "arguments": {"city": "Oslo", "unit": "celsius"}}]
    }
