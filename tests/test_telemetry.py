"""OpenTelemetry spans of evaluations, runs and requests (docs/telemetry.md), read back from
the SDK's in-memory exporter; and nothing of OpenTelemetry imported when nobody asks."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

import pytest

import engine
from conftest import REPO
from engine.core import redaction, telemetry
from engine.core.errors import EngineError
from engine.pack.inputs import OutputInput
from engine.session.recording import Session

sdk_trace = pytest.importorskip("opentelemetry.sdk.trace", reason="the otel extra is not installed")
from opentelemetry import trace  # noqa: E402
from opentelemetry.sdk.trace.export import SimpleSpanProcessor  # noqa: E402
from opentelemetry.sdk.trace.export.in_memory_span_exporter import (  # noqa: E402
    InMemorySpanExporter,
)

VERDICT_ARGS = ["--pack", "sentinel", "--block", "VERDICT", "--nonce", "4F2C9A"]
VERDICT_ARGS += ["--var", "criterion=AC1"]
FAKE_MODEL = str(REPO / "examples" / "fake_model.py")
BAD = (
    b"<<<VERDICT:V1:AC1:NONCE=4F2C9A>>>\nANSWER=MAYBE\nREASON=x\n"
    b"<<<END_VERDICT:AC1:NONCE=4F2C9A>>>\n"
)


class _WhileRecording(SimpleSpanProcessor):
    """Spans reach the exporter only while a test records: the global provider stays set
    for the rest of the worker's tests, which should not fill the exporter."""

    recording = False

    def on_end(self, span: Any) -> None:
        if self.recording:
            super().on_end(span)


_RECORDER: tuple[_WhileRecording, InMemorySpanExporter] | None = None


@pytest.fixture
def spans() -> Iterator[InMemorySpanExporter]:
    """The process's tracer provider (a library user's, set once) with an in-memory
    exporter, recording during the test."""
    global _RECORDER
    if _RECORDER is None:
        exporter = InMemorySpanExporter()
        processor = _WhileRecording(exporter)
        provider = sdk_trace.TracerProvider()
        provider.add_span_processor(processor)
        trace.set_tracer_provider(provider)
        _RECORDER = processor, exporter
    processor, exporter = _RECORDER
    exporter.clear()
    processor.recording = True
    try:
        yield exporter
    finally:
        processor.recording = False
        exporter.clear()


def _driver(args: Sequence[str]) -> str:
    """A process with its own provider and in-memory exporter that runs `rules ARGS` in
    process and prints the spans as JSON on the last line of stdout."""
    return f"""
import json, sys
from opentelemetry import trace
from opentelemetry.sdk.trace import TracerProvider
from opentelemetry.sdk.trace.export import SimpleSpanProcessor
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
exporter = InMemorySpanExporter()
provider = TracerProvider()
provider.add_span_processor(SimpleSpanProcessor(exporter))
trace.set_tracer_provider(provider)
from engine.cli.main import main
sys.argv = ["rules", *{list(args)!r}]
try:
    main()
except SystemExit as exc:
    code = exc.code
spans = [
    {{"name": s.name, "id": s.context.span_id, "trace": s.context.trace_id,
      "parent": s.parent.span_id if s.parent else None, "attributes": dict(s.attributes)}}
    for s in exporter.get_finished_spans()
]
print(json.dumps({{"code": code, "spans": spans}}))
"""


def test_rules_run_is_one_span_with_its_attempts_as_children(tmp_path: Path) -> None:
    (tmp_path / "task.md").write_text("Judge AC1.\n", encoding="utf-8")
    args = ["run", *VERDICT_ARGS, "--model", "fake-1", "--prompt", "task.md"]
    args += ["--", sys.executable, FAKE_MODEL]
    # the driver's provider is the one used: the OTEL_* variables set no other
    env = {**os.environ, "OTEL_TRACES_EXPORTER": "console"}
    done = subprocess.run(
        [sys.executable, "-c", _driver(args)],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env=env,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    assert done.stderr.splitlines() == [  # no console exporter output on stderr
        "rules run: attempt 1: fail PARSE_ERROR (line 2: ANSWER must be unquoted) -> REPAIR",
        "rules run: attempt 2: pass -> PROCEED",
    ]
    result = json.loads(done.stdout.splitlines()[-1])
    assert result["code"] == 0
    (run,) = [s for s in result["spans"] if s["name"] == "rules.run"]
    attempts = [s for s in result["spans"] if s["name"] == "rules.evaluate"]
    assert len(result["spans"]) == 3
    assert all(s["parent"] == run["id"] and s["trace"] == run["trace"] for s in attempts)
    assert run["parent"] is None
    pack = engine.load_pack("sentinel")
    common = {
        "rules.pack.name": "sentinel",
        "rules.pack.version": pack.model.version,
        "rules.block": "VERDICT",
        "gen_ai.request.model": "fake-1",
    }
    if getattr(pack, "revision", None) is not None:
        common["rules.pack.revision"] = pack.revision
    assert run["attributes"] == {
        **common,
        "rules.verdict.status": "pass",
        "gen_ai.evaluation.score.label": "pass",
        "rules.attempt": 2,
        "rules.attempts": 2,
        "rules.decision.action": "PROCEED",
        "rules.decision.final": True,
    }
    first, second = sorted(attempts, key=lambda s: s["attributes"]["rules.attempt"])
    item = first["attributes"]["rules.item"]
    assert json.loads(item)["nonce"] == "4F2C9A"  # the ledger's item: nonce, params, run id
    # the call's tokens, estimated from characters: the fake model reports none
    tokens_in = first["attributes"]["gen_ai.usage.input_tokens"]
    tokens_out = first["attributes"]["gen_ai.usage.output_tokens"]
    assert tokens_in > 0 and tokens_out > 0
    assert first["attributes"] == {
        "rules.attempt.kind": "first",
        "gen_ai.usage.input_tokens": tokens_in,
        "gen_ai.usage.output_tokens": tokens_out,
        "gen_ai.response.model": "fake-1",
        "rules.usage.estimated": True,
        **common,
        "gen_ai.evaluation.name": "sentinel/VERDICT",
        "rules.item": item,
        "rules.verdict.status": "fail",
        "gen_ai.evaluation.score.label": "fail",
        "rules.failure.type": "PARSE_ERROR",
        "rules.attempt": 1,
        "rules.decision.action": "REPAIR",
        "rules.decision.final": False,
    }
    assert second["attributes"]["rules.item"] == item
    assert (
        second["attributes"]["rules.verdict.status"],
        second["attributes"]["rules.attempt"],
    ) == (
        "pass",
        2,
    )
    assert "rules.failure.type" not in second["attributes"]


def test_session_evaluate_is_one_span_per_attempt(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    pack = engine.load_pack("sentinel")
    inputs = {"nonce": "4F2C9A", "vars": {"criterion": "AC1"}, "item": "task-7"}
    with Session(pack, tmp_path / "session") as session:
        session.evaluate(OutputInput("VERDICT", BAD, **inputs))
        session.evaluate(OutputInput(block="VERDICT", output=BAD, model="m-2", **inputs))
    finished = spans.get_finished_spans()
    assert [s.name for s in finished] == ["rules.evaluate", "rules.evaluate"]
    first, second = (dict(s.attributes or {}) for s in finished)
    assert first["rules.item"] == second["rules.item"] == "task-7"
    assert (first["rules.attempt"], second["rules.attempt"]) == (1, 2)
    assert first["rules.verdict.status"] == "fail"
    assert first["rules.failure.type"] == second["rules.failure.type"]
    assert first["rules.failure.type"] not in ("", None)
    assert first["rules.decision.action"] == "REPAIR"
    assert second["rules.decision.action"] == "NEEDS_HUMAN"
    assert second["rules.decision.final"] is True
    assert first["rules.pack.name"] == "sentinel"
    assert first["rules.block"] == second["rules.block"] == "VERDICT"
    assert "gen_ai.request.model" not in first  # no model named: no attribute
    assert second["gen_ai.request.model"] == "m-2"


def test_engine_run_is_one_run_span_with_its_attempts_as_children(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    good = BAD.replace(b"ANSWER=MAYBE", b"ANSWER=YES").decode()
    outputs = iter([BAD.decode(), good])
    result = engine.run(
        engine.load_pack("sentinel"),
        "VERDICT",
        lambda prompt: next(outputs),
        session=tmp_path / "session",
        prompt="Judge AC1.",
        nonce="4F2C9A",
        vars={"criterion": "AC1"},
        model="m-3",
    )
    finished = spans.get_finished_spans()
    run = next(s for s in finished if s.name == "rules.run")
    children = [s for s in finished if s.name == "rules.evaluate"]
    assert len(children) == len(result.attempts) == 2
    assert all(s.parent is not None and s.parent.span_id == run.context.span_id for s in children)
    attributes = dict(run.attributes or {})
    assert attributes["rules.attempts"] == 2
    assert attributes["rules.decision.action"] == result.decision.action
    assert attributes["gen_ai.request.model"] == "m-3"


def test_an_evaluation_that_raises_is_a_failed_span_with_its_error_type(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    pack = engine.load_pack("sentinel")
    with Session(pack, tmp_path / "session") as session, pytest.raises(EngineError):
        session.evaluate(
            OutputInput("VERDICT", BAD, nonce="4F2C9A", vars={"criterion": "AC1"}, item=" ")
        )
    (failed,) = spans.get_finished_spans()
    assert failed.status.status_code == trace.StatusCode.ERROR
    assert (failed.attributes or {})["error.type"] == "engine.core.errors.EngineError"


def test_a_request_span_continues_the_callers_trace(spans: InMemorySpanExporter) -> None:
    caller = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
    with telemetry.request_span("post", "/v1/evaluate", {"traceparent": caller}) as span:
        telemetry.record_response(span, 503)
    (request,) = spans.get_finished_spans()
    assert request.name == "POST /v1/evaluate"
    assert request.kind == trace.SpanKind.SERVER
    assert request.context is not None and request.parent is not None
    assert f"{request.context.trace_id:032x}" == "0af7651916cd43dd8448eb211c80319c"
    assert f"{request.parent.span_id:016x}" == "b7ad6b7169203331"
    assert dict(request.attributes or {}) == {
        "http.request.method": "POST",
        "http.route": "/v1/evaluate",
        "http.response.status_code": 503,
        "error.type": "503",
    }


def _eval_in_process(tmp_path: Path, env: dict[str, str], block_otel: bool) -> dict[str, Any]:
    """`import engine; rules eval` of a failing output in a fresh process: what it printed
    and which opentelemetry modules it imported."""
    output = tmp_path / "bad.txt"
    output.write_bytes(BAD)
    blocker = (
        "import importlib.abc, sys\n"
        "class Absent(importlib.abc.MetaPathFinder):\n"
        "    def find_spec(self, name, path=None, target=None):\n"
        "        if name.split('.')[0] == 'opentelemetry':\n"
        "            raise ModuleNotFoundError(f'No module named {name!r}', name=name)\n"
        "sys.meta_path.insert(0, Absent())\n"
    )
    args = ["eval", *VERDICT_ARGS, "--format", "json", str(output)]
    probe = (blocker if block_otel else "") + (
        "import io, json, sys, contextlib\nimport engine\nfrom engine.cli.main import main\n"
        f"sys.argv = ['rules', *{args!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "print('OTEL', sorted(m for m in sys.modules if m.startswith('opentelemetry')), "
        "file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={k: v for k, v in {**os.environ, **env}.items() if v},
        timeout=60,
    )
    lines = done.stderr.splitlines()
    return {"stdout": done.stdout, "otel": lines[-1], "stderr": lines[:-1]}


def test_without_the_extra_nothing_of_opentelemetry_is_imported(tmp_path: Path) -> None:
    quiet = {"OTEL_TRACES_EXPORTER": "", "OTEL_EXPORTER_OTLP_ENDPOINT": ""}
    plain = _eval_in_process(tmp_path, quiet, block_otel=False)
    assert plain["otel"] == "OTEL []"  # installed, but nobody asked for traces
    assert plain["stderr"] == []
    asked = _eval_in_process(tmp_path, {**quiet, "OTEL_TRACES_EXPORTER": "otlp"}, block_otel=True)
    assert asked["otel"] == "OTEL []"
    assert asked["stdout"] == plain["stdout"]  # the command's output is the same
    assert asked["stderr"] == [
        "rules: warning: the OTEL_* variables ask for traces, but OpenTelemetry is not "
        "installed: pip install 'rules-engine[otel]' (no traces are sent)"
    ]


def test_the_cli_sends_spans_where_the_otel_variables_say(tmp_path: Path) -> None:
    plain = _eval_in_process(tmp_path, {"OTEL_TRACES_EXPORTER": ""}, block_otel=False)
    traced = _eval_in_process(tmp_path, {"OTEL_TRACES_EXPORTER": "console"}, block_otel=False)
    assert traced["stdout"] == plain["stdout"]  # spans go to stderr, never into the output
    assert json.loads(traced["stdout"])["decision"]["action"] == "REPAIR"
    span = json.loads("\n".join(traced["stderr"]))
    assert span["name"] == "rules.evaluate"
    assert span["resource"]["attributes"]["service.name"] == "rules"
    assert span["attributes"]["rules.decision.action"] == "REPAIR"
    assert span["attributes"]["rules.verdict.status"] == "fail"
    assert span["attributes"]["rules.attempt"] == 1


@pytest.mark.heavy
def test_the_library_sets_up_nothing_the_otel_variables_ask_for(tmp_path: Path) -> None:
    probe = (
        "import sys, engine\nfrom engine.pack.inputs import OutputInput\n"
        "from engine.session.recording import Session\n"
        "with Session(engine.load_pack('sentinel'), 'session') as session:\n"
        f"    outcome = session.evaluate(OutputInput('VERDICT', {BAD!r}, nonce='4F2C9A', "
        "vars={'criterion': 'AC1'}))\n"
        "print(outcome.decision.action, sorted(m for m in sys.modules "
        "if m.startswith('opentelemetry')))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        capture_output=True,
        text=True,
        cwd=tmp_path,
        env={**os.environ, "OTEL_TRACES_EXPORTER": "console"},
        timeout=60,
    )
    # only the `rules` command sets up the SDK: a library user's process is theirs
    assert (done.stdout, done.stderr) == ("REPAIR []\n", "")


def test_a_server_request_is_one_span_with_its_evaluation_as_child(
    spans: InMemorySpanExporter, tmp_path: Path
) -> None:
    pytest.importorskip("fastapi", reason="the server extra is not installed")
    from fastapi.testclient import TestClient

    from engine.server.app import create_app
    from engine.server.packs import load_pack_set
    from engine.server.settings import ServerSettings

    settings = ServerSettings(packs=("sentinel",), sessions_dir=str(tmp_path / "sessions"))
    request = {"pack": "sentinel", "block": "VERDICT", "nonce": "4F2C9A", "output": BAD.decode()}
    request["vars"] = {"criterion": "AC1"}
    with TestClient(create_app(settings, load_pack_set(settings.packs))) as client:
        answer = client.post("/v1/sessions/s1/outputs", json={**request, "item": "task-9"})
    assert answer.status_code == 200, answer.text
    finished = spans.get_finished_spans()
    served = [s for s in finished if s.name == "POST /v1/sessions/{session}/outputs"]
    assert len(served) == 1  # one request span: FastAPI's own telemetry is off
    assert [s.name for s in finished if s.parent is None] == [served[0].name]
    evaluation = next(s for s in finished if s.name == "rules.evaluate")
    assert evaluation.parent is not None and evaluation.parent.span_id == served[0].context.span_id
    assert dict(served[0].attributes or {})["http.route"] == "/v1/sessions/{session}/outputs"
    assert dict(served[0].attributes or {})["http.response.status_code"] == 200
    attributes = dict(evaluation.attributes or {})
    assert attributes["rules.item"] == "task-9"
    assert attributes["rules.attempt"] == 1
    assert attributes["rules.decision.action"] == "REPAIR"
    assert attributes["rules.pack.revision"] == answer.json()["pack"]["revision"]


def test_a_span_never_carries_a_registered_secret(spans: InMemorySpanExporter) -> None:
    """Issue 35: spans go through the one redaction: attributes, status and the
    exception's message and stack trace."""
    redaction.register("Span@Secret-Pw77")
    with pytest.raises(RuntimeError), telemetry.span("work", {"rules.item": "Span@Secret-Pw77"}):
        raise RuntimeError("failed to resolve host 'Secret-Pw77@db'")
    (failed,) = spans.get_finished_spans()
    shown = json.dumps(
        {
            "attributes": dict(failed.attributes or {}),
            "status": failed.status.description,
            "events": [dict(e.attributes or {}) for e in failed.events],
        }
    )
    assert "Secret-Pw77" not in shown and "Span@" not in shown
    assert failed.status.status_code == trace.StatusCode.ERROR
    assert "failed to resolve host '***@db'" in shown
