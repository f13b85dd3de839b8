"""`rules mcp` as a real process, driven by the official `mcp` SDK's stdio client: the tools
listed with their schemas, a failing output answered with its failures and the repair
prompt, a passing one with its data, a session's attempts recorded in its ledger."""

from __future__ import annotations

import json
import os
from collections.abc import AsyncIterator, Awaitable, Callable
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("mcp", reason="the mcp extra is not installed")

from mcp import Client, StdioServerParameters
from sentinel_cases import VERDICT_ARGS

from conftest import REPO, run_cli, run_script, script

BAD = (REPO / "examples" / "sentinel" / "verdict_bad.txt").read_text(encoding="utf-8")
GOOD = (REPO / "examples" / "sentinel" / "verdict.txt").read_text(encoding="utf-8")
ARGS = {"block": "VERDICT", "nonce": "4F2C9A", "vars": {"criterion": "AC1"}}
TOOLS = {"evaluate_output", "repair_prompt", "first_prompt", "explain_block"}


@asynccontextmanager
async def connected(folder: Path, *args: str) -> AsyncIterator[Client]:
    """A client of `rules mcp ARGS` started in ``folder``."""
    env = {k: v for k, v in os.environ.items() if k != "RULES_LEDGER"}
    server = StdioServerParameters(
        command=script("rules"), args=["mcp", *args], cwd=str(folder), env=env
    )
    async with Client(server, read_timeout_seconds=60) as client:
        yield client


def drive(folder: Path, args: tuple[str, ...], steps: Callable[[Client], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        async with connected(folder, *args) as client:
            return await steps(client)

    return anyio.run(main)


@pytest.mark.heavy
def test_the_tools_are_listed_with_their_schemas(tmp_path: Path) -> None:
    async def steps(client: Client) -> Any:
        return (await client.list_tools()).tools

    tools = {tool.name: tool for tool in drive(tmp_path, ("--pack", "sentinel"), steps)}
    assert set(tools) == TOOLS
    for tool in tools.values():
        assert tool.description
        assert tool.input_schema["type"] == "object"
        assert tool.output_schema is not None and tool.output_schema["type"] == "object"
    evaluate = tools["evaluate_output"]
    assert evaluate.input_schema["required"] == ["block", "output"]
    assert {"verdict", "decision", "prompt"} <= set(evaluate.output_schema["required"])
    # the verdict's and decision's schemas are the shipped ones (contracts/)
    shipped = json.loads((REPO / "contracts" / "verdict.schema.json").read_text("utf-8"))
    assert evaluate.output_schema["$defs"]["verdict"]["properties"] == shipped["properties"]


@pytest.mark.heavy
def test_a_failing_output_gets_its_failures_and_the_repair_prompt(tmp_path: Path) -> None:
    async def steps(client: Client) -> Any:
        # the client checks each structuredContent against the tool's outputSchema
        failing = await client.call_tool("evaluate_output", {**ARGS, "output": BAD})
        passing = await client.call_tool("evaluate_output", {**ARGS, "output": GOOD})
        return failing, passing

    failing, passing = drive(tmp_path, ("--pack", "sentinel"), steps)
    assert not failing.is_error and not passing.is_error
    result = failing.structured_content
    assert result["ok"] is False
    assert [f["type"] for f in result["verdict"]["failures"]] == ["PARSE_ERROR"]
    assert result["decision"]["action"] == "REPAIR"
    rendered = run_script(script("rules"), "render", *VERDICT_ARGS, input=BAD.encode())
    assert result["prompt"].encode("utf-8") == rendered.stdout  # what `rules render` prints
    assert result["verdict"]["failures"][0]["message"] in result["prompt"]
    assert json.loads(failing.content[0].text) == result  # the same JSON as text
    good = passing.structured_content
    assert good["ok"] is True and good["prompt"] is None
    assert good["verdict"]["data"]["answer"] == "YES"
    assert good["decision"]["action"] == "PROCEED"


@pytest.mark.heavy
def test_a_session_records_each_attempt_as_the_server_does(tmp_path: Path) -> None:
    async def steps(client: Client) -> Any:
        first = await client.call_tool("evaluate_output", {**ARGS, "output": BAD, "session": "S"})
        second = await client.call_tool("repair_prompt", {**ARGS, "output": BAD, "session": "S"})
        return first.structured_content, second.structured_content

    first, second = drive(tmp_path, ("--pack", "sentinel"), steps)
    assert first["decision"]["action"] == "REPAIR" and first["attempt_id"] is not None
    assert second["decision"]["action"] == "NEEDS_HUMAN" and second["decision"]["final"]
    log = run_cli("log", "--session", str(tmp_path / "sessions" / "S"), "--format", "jsonl")
    rows = [json.loads(line) for line in log.output.splitlines()]
    assert [(r["attempt"], r["action"]) for r in rows] == [(1, "REPAIR"), (2, "NEEDS_HUMAN")]


@pytest.mark.heavy
def test_first_prompt_and_explain(tmp_path: Path) -> None:
    async def steps(client: Client) -> Any:
        prompt = await client.call_tool("first_prompt", ARGS)
        explained = await client.call_tool("explain_block", {"block": "VERDICT"})
        return prompt.structured_content, explained.structured_content

    prompt, explained = drive(tmp_path, ("--pack", "sentinel"), steps)
    expected = run_script(script("rules"), "prompt", *VERDICT_ARGS)
    assert prompt["prompt"].encode("utf-8") == expected.stdout  # what `rules prompt` prints
    assert [row["block"] for row in explained["blocks"]] == ["VERDICT"]
    assert "PARSE_ERROR" in explained["blocks"][0]["repair_on"]


@pytest.mark.heavy
def test_a_refused_call_says_which_argument_and_why(tmp_path: Path) -> None:
    async def steps(client: Client) -> Any:
        return [
            await client.call_tool("evaluate_output", {**ARGS, "block": "NOPE", "output": ""}),
            await client.call_tool("evaluate_output", {**ARGS, "pack": "other", "output": ""}),
            await client.call_tool("evaluate_output", {"block": "VERDICT", "output": 3}),
            await client.call_tool("evaluate_output", {**ARGS, "output": "", "session": "../x"}),
            await client.call_tool("evaluate_output", {"block": "VERDICT", "output": BAD}),
        ]

    results = drive(tmp_path, ("--pack", "sentinel"), steps)
    assert all(result.is_error for result in results)
    said = [result.content[0].text for result in results]
    assert "has no block 'NOPE'" in said[0] and "VERDICT" in said[0]
    assert "no pack 'other' is served (served: sentinel)" in said[1]
    assert said[2].startswith("error: output: 3 is not of type 'string'")
    assert "session '../x'" in said[3]
    assert "needs nonce" in said[4]
    assert not (tmp_path / "x").exists()


@pytest.mark.heavy
def test_a_pack_with_errors_stops_the_start(tmp_path: Path) -> None:
    done = run_script(script("rules"), "mcp", "--pack", str(tmp_path / "missing"), cwd=tmp_path)
    assert done.returncode == 2
    assert b"error:" in done.stderr and b"Traceback" not in done.stderr
    done = run_script(script("rules"), "mcp", cwd=tmp_path)
    assert done.returncode == 2 and b"--pack NAME" in done.stderr
