"""Streamed outputs: engine.run and engine.arun around clients that stream (iterators, async
iterators, OpenAI- and Anthropic-shaped chunks), and `rules run --stream` around a command
that prints slowly. A stream is closed at its first definite failure, the repair goes out
with the prefix, and the ledger says where it stopped; a stream that never fails
definitively is evaluated whole, as if it had been returned as one text."""

from __future__ import annotations

import asyncio
import json
import os
import shutil
import subprocess
import sys
import time
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
from sentinel_cases import CASES, build_text, call_args

import engine
from conftest import REPO, run_cli, script
from engine.contracts.kind import EvaluationInput, prefix_reader

NONCE = "4F2C9A"
ARGS: dict[str, Any] = {"nonce": NONCE, "vars": {"criterion": "AC1"}}
GOOD = (REPO / "examples" / "sentinel" / "verdict.txt").read_text(encoding="utf-8")
WRONG_OPENER = "<<<VERDICT:V1:AC1:NONCE=000000>>>\n"  # the right block, another nonce
CHUNKS = 1000
LINE = 'REASON="' + "x" * 1038 + '"\n'  # 1 KiB a chunk: 1 MB in all


class Client:
    """A model client whose first answer is a 1 MB stream with a wrong opener, and whose
    repair is the good block; it counts the chunks it gave and whether its stream was
    closed."""

    def __init__(self) -> None:
        self.prompts: list[str] = []
        self.given = 0
        self.closed = False

    def chunks(self) -> Iterator[str]:
        try:
            for index in range(CHUNKS):
                self.given += 1
                yield (WRONG_OPENER if index == 0 else "") + LINE
        finally:  # run by close(): the provider stops generating
            self.closed = True

    async def achunks(self) -> AsyncIterator[str]:
        try:
            for index in range(CHUNKS):
                self.given += 1
                await asyncio.sleep(0)
                yield (WRONG_OPENER if index == 0 else "") + LINE
        finally:
            self.closed = True

    def call(self, prompt: str) -> Any:
        self.prompts.append(prompt)
        return self.chunks() if len(self.prompts) == 1 else GOOD


def attempts(session: Path) -> list[dict[str, Any]]:
    log = run_cli("log", "--session", str(session), "--format", "jsonl")
    return [json.loads(line) for line in log.output.splitlines()]


def assert_cut_early(client: Client, result: Any, session: Path) -> None:
    assert client.closed
    assert client.given <= CHUNKS * 2 // 100, client.given
    first, second = result.attempts
    assert first.decision.action == "REPAIR"
    assert first.verdict.failures[0].type == "NONCE_MISMATCH"
    assert "nonce mismatch: block=000000, expected=4F2C9A" in client.prompts[1]
    assert WRONG_OPENER in client.prompts[1]  # the prefix goes out with the repair
    assert second.decision.action == "PROCEED"
    rows = attempts(session)
    assert rows[0]["stream_cut"] == 1
    assert rows[0]["streamed_chars"] == len(first.output) < CHUNKS * len(LINE) // 50
    assert rows[0]["output_chars"] == len(first.output)
    assert rows[1]["stream_cut"] is None and rows[1]["streamed_chars"] is None


def test_a_wrong_opener_closes_a_1mb_stream_within_2_percent(tmp_path: Path) -> None:
    client = Client()
    result = engine.run(
        "sentinel", "VERDICT", client.call, session=str(tmp_path / "s"), **ARGS
    )  # fmt: skip
    assert_cut_early(client, result, tmp_path / "s")


def test_the_same_with_an_async_client(tmp_path: Path) -> None:
    client = Client()

    async def call(prompt: str) -> Any:
        client.prompts.append(prompt)
        return client.achunks() if len(client.prompts) == 1 else GOOD

    result = asyncio.run(
        engine.arun("sentinel", "VERDICT", call, session=str(tmp_path / "s"), **ARGS)
    )
    assert_cut_early(client, result, tmp_path / "s")


def test_an_async_generator_function_is_a_client_too(tmp_path: Path) -> None:
    client = Client()

    async def call(prompt: str) -> AsyncIterator[str]:
        client.prompts.append(prompt)
        if len(client.prompts) == 1:
            async for chunk in client.achunks():
                yield chunk
        else:
            yield GOOD

    result = asyncio.run(
        engine.arun("sentinel", "VERDICT", call, session=str(tmp_path / "s"), **ARGS)
    )
    assert client.closed and client.given <= CHUNKS * 2 // 100
    assert [a.decision.action for a in result.attempts] == ["REPAIR", "PROCEED"]


class SdkStream:
    """A stream object as the OpenAI and Anthropic SDKs return one: an iterator of events
    with a close() that ends the HTTP response."""

    def __init__(self, events: list[Any]) -> None:
        self.events = iter(events)
        self.given = 0
        self.closed = False

    def __iter__(self) -> SdkStream:
        return self

    def __next__(self) -> Any:
        self.given += 1
        return next(self.events)

    def close(self) -> None:
        self.closed = True


def openai_chunk(content: str | None) -> Any:
    return SimpleNamespace(choices=[SimpleNamespace(delta=SimpleNamespace(content=content))])


def openai_chunks(text: str, size: int) -> list[Any]:
    pieces = [openai_chunk(text[i : i + size]) for i in range(0, len(text), size)]
    return [openai_chunk(None), *pieces, SimpleNamespace(choices=[])]


def anthropic_events(text: str, size: int) -> list[Any]:
    deltas = [
        {"type": "content_block_delta", "index": 0,
         "delta": {"type": "text_delta", "text": text[i : i + size]}}
        for i in range(0, len(text), size)
    ]  # fmt: skip
    return [{"type": "message_start"}, *deltas, {"type": "message_stop"}]


@pytest.mark.parametrize("shape", [openai_chunks, anthropic_events], ids=["openai", "anthropic"])
def test_sdk_streams_are_read_by_their_shape_and_closed(shape: Any, tmp_path: Path) -> None:
    bad = WRONG_OPENER + LINE * 200
    streams: list[SdkStream] = []

    def call(prompt: str) -> Any:
        text = bad if not streams else GOOD
        streams.append(SdkStream(shape(text, 64)))
        return streams[-1]

    result = engine.run("sentinel", "VERDICT", call, session=str(tmp_path / "s"), **ARGS)
    assert [a.decision.action for a in result.attempts] == ["REPAIR", "PROCEED"]
    assert streams[0].closed and streams[0].given < len(shape(bad, 64)) // 10
    assert not streams[1].closed  # read to its end: nothing to close
    assert result.data["answer"] == "YES"


def test_a_stream_that_passes_is_evaluated_whole_as_a_text(tmp_path: Path) -> None:
    streamed = engine.run(
        "sentinel", "VERDICT", lambda p: iter(GOOD[i : i + 7] for i in range(0, len(GOOD), 7)),
        session=str(tmp_path / "a"), **ARGS,
    )  # fmt: skip
    whole = engine.run("sentinel", "VERDICT", lambda p: GOOD, session=str(tmp_path / "b"), **ARGS)
    assert streamed.verdict == whole.verdict and streamed.decision == whole.decision
    assert streamed.output == GOOD
    row = attempts(tmp_path / "a")[0]
    assert row["stream_cut"] == 0 and row["streamed_chars"] == len(GOOD)


def test_a_failure_that_needs_the_end_is_not_decided_early(tmp_path: Path) -> None:
    """A missing closer is only known at the end: the stream is read whole."""
    text = "<<<VERDICT:V1:AC1:NONCE=4F2C9A>>>\nANSWER=YES\n" + "\n" * 600
    stream = SdkStream(list(text))
    result = engine.run(
        "sentinel", "VERDICT", lambda p: stream, session=str(tmp_path / "s"), **ARGS
    )
    assert not stream.closed and result.attempts[0].output == text
    assert "END_VERDICT" in result.attempts[0].verdict.failures[0].message


def test_a_stream_over_the_output_cap_is_cut_there(tmp_path: Path) -> None:
    prose = SdkStream(["Thinking it over. " * 56 + "\n"] * 1000)  # no block yet: undecided
    result = engine.run(
        "sentinel", "VERDICT", lambda p: prose, session=str(tmp_path / "s"),
        max_output_bytes=50_000, **ARGS,
    )  # fmt: skip
    assert prose.closed and prose.given <= 50
    assert result.attempts[0].verdict.failures[0].type == "EXECUTION_FAILED"
    assert "more than 50000 bytes" in result.attempts[0].verdict.failures[0].message


def test_a_chunk_of_no_known_shape_is_an_execution_failure(tmp_path: Path) -> None:
    result = engine.run(
        "sentinel", "VERDICT", lambda p: iter([1, 2]), session=str(tmp_path / "s"), **ARGS
    )
    failure = result.attempts[0].verdict.failures[0]
    assert failure.type == "EXECUTION_FAILED" and "streamed a int" in failure.message


SLOW_MODEL = """
import os, sys, time
sys.stdin.read()
here = sys.argv[1]
if os.path.exists(os.path.join(here, "first")):
    sys.stdout.write(open(sys.argv[2], encoding="utf-8").read())
    sys.exit(0)
open(os.path.join(here, "first"), "w").close()
print("<<<VERDICT:V1:AC1:NONCE=000000>>>", flush=True)
for i in range(1000):
    print('REASON="' + "x" * 1000 + '"', flush=True)
    time.sleep(0.01)
open(os.path.join(here, "finished"), "w").close()
"""


@pytest.mark.heavy
def test_rules_run_stream_ends_a_slow_command_early(tmp_path: Path) -> None:
    model = tmp_path / "slow_model.py"
    model.write_text(SLOW_MODEL, encoding="utf-8")
    verdict = REPO / "examples" / "sentinel" / "verdict.txt"
    env = {k: v for k, v in os.environ.items() if k != "RULES_LEDGER"}
    started = time.monotonic()
    done = subprocess.run(
        [script("rules"), "run", "--pack", "sentinel", "--block", "VERDICT", "--nonce", NONCE,
         "--var", "criterion=AC1", "--session", str(tmp_path / "s"), "--stream", "--",
         sys.executable, str(model), str(tmp_path), str(verdict)],
        capture_output=True, text=True, timeout=120, env=env, check=False,
    )  # fmt: skip
    elapsed = time.monotonic() - started
    assert done.returncode == 0, done.stderr
    assert "fail NONCE_MISMATCH" in done.stderr and "-> REPAIR" in done.stderr
    assert json.loads(done.stdout)["answer"] == "YES"
    assert not (tmp_path / "finished").exists()  # ended, not left to print 1 MB for 10 s
    assert elapsed < 8, elapsed
    rows = attempts(tmp_path / "s")
    assert [r["stream_cut"] for r in rows] == [1, 0]
    assert 0 < rows[0]["streamed_chars"] < 20_000


@pytest.fixture(scope="module")
def sentinel() -> engine.Pack:
    """The sentinel pack, loaded once for the cases of this module (a load per case was
    most of their time)."""
    return engine.load_pack("sentinel")


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_a_prefix_fails_only_when_the_whole_output_fails(
    case: dict[str, Any], sentinel: engine.Pack
) -> None:
    """Soundness over every sentinel case: no prefix of an output that passes is failed,
    and a failure found on a prefix is a failure of the whole output."""
    pack = sentinel
    text = build_text(case) + "\n"
    args = call_args(case)
    whole = pack.evaluate(case["block"], text, args["nonce"], args["vars"])
    reader = prefix_reader(
        pack.contract(case["block"]), EvaluationInput(None, args["nonce"], args["vars"])
    )
    if reader is None:
        return
    ends = [i + 1 for i, char in enumerate(text) if char == "\n"]
    for end in ends:
        failure = reader.feed(text[:end])
        if failure is not None:
            assert whole.status == "fail", (text[:end], failure)
            break


@pytest.fixture(scope="module")
def json_pack(tmp_path_factory: pytest.TempPathFactory) -> engine.Pack:
    """The documentation's JSON pack with its `task` contract reading the whole output."""
    folder = tmp_path_factory.mktemp("json") / "pack"
    shutil.copytree(REPO / "docs" / "examples" / "json", folder)
    pack_file = folder / "pack.yaml"
    text = pack_file.read_text(encoding="utf-8")
    whole = "schema_file: schemas/task.schema.json\n    extract: whole\n  fenced_task:"
    pack_file.write_text(
        text.replace("schema_file: schemas/task.schema.json\n  fenced_task:", whole, 1), "utf-8"
    )
    return engine.load_pack(str(folder))


def first_failure(pack: engine.Pack, block: str, text: str, step: int = 1) -> Any:
    reader = prefix_reader(pack.contract(block), EvaluationInput(None))
    assert reader is not None
    for end in range(step, len(text) + step, step):
        failure = reader.feed(text[:end])
        if failure is not None:
            return end, failure
    return None


def test_a_json_stream_is_cut_at_a_key_the_schema_forbids(
    json_pack: engine.Pack, tmp_path: Path
) -> None:
    notes = ", ".join(f'"n{i}": "{"x" * 1000}"' for i in range(1000))
    text = '{"id": "T1", "status": "todo", "notes": {' + notes + "}}"
    stream = SdkStream([text[i : i + 1024] for i in range(0, len(text), 1024)])
    answers = iter([stream, '{"id": "T1", "status": "todo"}'])
    result = engine.run(
        json_pack, "task", lambda p: next(answers), session=str(tmp_path / "s"), prompt="A task."
    )
    failure = result.attempts[0].verdict.failures[0]
    assert stream.closed and stream.given <= 20
    assert failure.type == "SCHEMA_ERROR" and "remove `notes`" in failure.message
    assert [a.decision.action for a in result.attempts] == ["REPAIR", "PROCEED"]


def test_a_json_syntax_error_is_decided_where_no_text_can_mend_it(json_pack: engine.Pack) -> None:
    text = '{"id": "T1" "status": "todo"}' + " " * 40
    end, failure = first_failure(json_pack, "task", text)
    assert failure.type == "PARSE_ERROR" and end < 30
    assert failure.message == json_pack.evaluate("task", text).failures[0].message
    assert (
        first_failure(json_pack, "task", '{"id": "T1", "status": "todo", "estimate": 12}') is None
    )
    # a fenced block is found only at the end: nothing of it is decided on a prefix
    assert prefix_reader(json_pack.contract("fenced_task"), EvaluationInput(None)) is None


JSON_DOCUMENTS = [
    '{"id": "T1", "status": "todo", "estimate": 3}',
    '{"id": "T12", "status": "doing", "estimate": -1.5e+3}',
    '{ "status" : "done" , "id" : "T3\\u00e9\\"" }',
    '{"id": "T1", "status": "todo", "estimate": 1, "id2": [1, {"a": [true, null]}]}',
]


@pytest.mark.parametrize("document", JSON_DOCUMENTS)
def test_a_json_prefix_fails_only_when_the_whole_output_fails(
    json_pack: engine.Pack, document: str
) -> None:
    """Soundness: every one-character deletion, duplication or replacement of valid and
    invalid documents; a failure found on a prefix is one of the whole output."""
    variants = {document}
    for index in range(len(document)):
        variants.add(document[:index] + document[index + 1 :])
        variants.add(document[:index] + document[index] + document[index:])
        for char in ',:}]"x1 ':
            variants.add(document[:index] + char + document[index + 1 :])
    for text in sorted(variants):
        found = first_failure(json_pack, "task", text)
        if found is not None:
            assert json_pack.evaluate("task", text).status == "fail", (text, found)


def test_a_kind_that_decides_nothing_on_a_prefix_is_read_whole(tmp_path: Path) -> None:
    """A text contract has no prefix reader: its stream is read to the end and evaluated
    whole, whatever its first lines hold (a TODO may be a failure, but the closing lines
    are what the contract counts)."""
    pack = engine.load_pack(str(REPO / "docs" / "examples" / "text"))
    text = "Summary: TODO\n" + "more\n" * 400
    stream = SdkStream([text[i : i + 16] for i in range(0, len(text), 16)])
    result = engine.run(
        pack, "summary", lambda p: stream, session=str(tmp_path / "s"), prompt="Summarize."
    )
    assert not stream.closed and result.attempts[0].output == text
    assert result.attempts[0].verdict == pack.evaluate("summary", text)
    assert attempts(tmp_path / "s")[0]["stream_cut"] == 0


@pytest.mark.parametrize("case", CASES, ids=[c["name"] for c in CASES])
def test_a_stream_read_by_its_checks_is_evaluated_as_the_whole_text(
    case: dict[str, Any], sentinel: engine.Pack
) -> None:
    """The fields the prefix checks read as the stream arrived are handed to its
    evaluation, which reads only the lines after them: the verdict is the whole text's,
    whatever the chunks and line ends (LF or CRLF)."""
    from engine.session.stream import Watch

    pack = sentinel
    args = call_args(case)
    contract = pack.contract(case["block"])
    inputs = EvaluationInput(None, args["nonce"], args["vars"])
    base = build_text(case) + "\n"
    for text in (base, base.replace("\n", "\r\n"), "notes first\n" * 30 + base):
        whole = pack.evaluate(case["block"], text, args["nonce"], args["vars"])
        for size in (7, 300):
            watch = Watch(None, 1 << 26, lambda: prefix_reader(contract, inputs))
            if any(watch.feed(text[i : i + size]) for i in range(0, len(text), size)):
                assert whole.status == "fail"
                continue
            shared = watch.shared()
            assert watch.output() == text
            streamed = pack.evaluate(
                case["block"], text, args["nonce"], args["vars"], shared=shared
            )
            assert streamed == whole, (size, text)


def test_a_cut_stream_records_the_tokens_it_did_not_generate(tmp_path: Path) -> None:
    """The 1 MB stream closed at its wrong opener: the ledger records what the call could
    still have produced (the output cap in tokens, less what it generated), marked as an
    estimate, and `rules log --view usage` and the session report show it; the repair,
    returned whole, and a stream that passes record none."""
    client = Client()
    session = tmp_path / "s"
    engine.run(
        "sentinel", "VERDICT", client.call, session=str(session), max_output_bytes=2_000_000,
        **ARGS,
    )  # fmt: skip
    first, second = attempts(session)
    assert first["tokens_not_generated"] == 500_000 - -(-first["streamed_chars"] // 4) > 0
    assert first["not_generated_estimated"] is True
    assert second["tokens_not_generated"] is None and second["not_generated_estimated"] is None
    left = first["tokens_not_generated"]
    usage = run_cli("log", "--session", str(session), "--view", "usage").output
    assert f"1 closed early; tokens not generated: at most {left} (estimated" in usage
    figures = json.loads(
        run_cli("log", "--session", str(session), "--view", "usage", "--format", "json").output
    )
    assert figures["streams"] == {
        "streamed": 1, "cut": 1, "tokens_not_generated": left, "estimated": 1,
    }  # fmt: skip
    page = tmp_path / "report.html"
    run_cli("report", "--session", str(session), "-o", str(page))
    assert f'data-figure="streams:tokens not generated">{left}<' in page.read_text("utf-8")

    passed = tmp_path / "passed"
    engine.run(
        "sentinel", "VERDICT", lambda p: iter(GOOD[i : i + 7] for i in range(0, len(GOOD), 7)),
        session=str(passed), **ARGS,
    )  # fmt: skip
    row = attempts(passed)[0]
    assert row["stream_cut"] == 0
    assert row["tokens_not_generated"] is None and row["not_generated_estimated"] is None
    assert "closed early" not in run_cli("log", "--session", str(passed), "--view", "usage").output


def test_a_declared_token_limit_bounds_what_a_cut_stream_did_not_generate(
    tmp_path: Path,
) -> None:
    """With the call's own limit (`max_output_tokens=`, the request's max_tokens) the count
    is that limit less what was generated: still an estimate while the tokens generated
    are counted from characters, exact when they were reported."""
    from engine.session.stream import StreamEnd, not_generated

    client = Client()
    engine.run(
        "sentinel", "VERDICT", client.call, session=str(tmp_path / "s"),
        max_output_tokens=4096, **ARGS,
    )  # fmt: skip
    first = attempts(tmp_path / "s")[0]
    assert first["tokens_not_generated"] == 4096 - -(-first["streamed_chars"] // 4) > 0
    assert first["not_generated_estimated"] is True
    cut = StreamEnd(1000, True, max_tokens=4096)
    assert not_generated(cut, 300, 4) == StreamEnd(1000, True, None, None, 4096, 3796, False)
    assert not_generated(cut, None, 4).estimated
    assert not_generated(StreamEnd(1000, False, max_tokens=4096), 300, 4).not_generated is None
    with pytest.raises(engine.UsageError, match="max_output_tokens= takes a whole number"):
        engine.run("sentinel", "VERDICT", lambda p: GOOD, max_output_tokens=0, **ARGS)
