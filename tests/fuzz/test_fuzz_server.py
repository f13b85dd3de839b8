"""The fuzzing harness on the server (issue 35, item 7): a stateful run through the
server's own OpenAPI document. One application (the real one, in this process) with a
token serves a sequence of requests generated from the document (schema-valid and not,
with the token and without it, on a few session names so that sessions carry state from
one request to the next: repair loops, conflicts, reloads). Every answer is below 500 but
the documented 503, conforms to the document, and an error is a well-formed problem
document that never echoes the token."""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the server extra is not installed")
pytest.importorskip("schemathesis", reason="the dev extra is not installed")

import schemathesis
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, rule, run_state_machine_as_test
from schemathesis import GenerationMode, checks

from engine.server.app import create_app
from engine.server.packs import load_pack_set
from engine.server.settings import ServerSettings

EXPLORE = bool(os.environ.get("RULES_FUZZ_EXPLORE"))
TOKEN = "fuzz-Token-7c1e9b04d2"
SESSIONS = ["s1", "s2", "a.b-c_d"]
PACKS = ("sentinel", "quality-gate")
CONFORMANCE = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_schema_conformance,
]
PROBLEM_KEYS = {"type", "title", "status", "detail"}


def _served(document: dict[str, Any]) -> dict[str, Any]:
    """The document with the served pack, block and session names as the only values of
    the fields naming them, so that generated requests reach evaluation and the ledger."""
    names = list(PACKS)
    blocks = ["VERDICT", "IMPLEMENT", "PLAN", "nope"]
    for model in document["components"]["schemas"].values():
        properties = model.get("properties", {})
        if properties.get("pack", {}).get("type") == "string":
            properties["pack"]["enum"] = names
        if properties.get("block", {}).get("type") == "string":
            properties["block"]["enum"] = blocks
    for path in document["paths"].values():
        for operation in path.values():
            for parameter in operation.get("parameters", []):
                if parameter["name"] == "session":
                    parameter["schema"] = {"type": "string", "enum": SESSIONS}
                if parameter["name"] in ("name", "pack") and parameter["in"] != "header":
                    parameter["schema"] = {"type": "string", "enum": names}
    return document


def _judge(response: Any) -> str | None:
    code = response.status_code
    text = response.text
    if code >= 500 and code != 503:
        return f"status {code}: {text[:400]}"
    if TOKEN in text or TOKEN in str(response.headers):
        return f"the token is echoed (status {code})"
    if code >= 400:
        if "Traceback" in text:
            return f"a traceback (status {code}): {text[:400]}"
        kind = ",".join(response.headers.get("content-type", []))
        if not kind.startswith("application/problem+json"):
            return f"status {code} with {kind!r}, not a problem document: {text[:200]}"
        body = response.json()
        if not isinstance(body, dict) or not set(body) >= PROBLEM_KEYS:
            return f"status {code}: a problem document without {PROBLEM_KEYS}: {text[:200]}"
        if "internal error" in str(body["detail"]).lower():
            return f"an internal error (status {code}): {text[:400]}"
        if body["status"] != code or not isinstance(body["detail"], str):
            return f"status {code}: problem document says {body!r:.200}"
    return None


def _machine(tmp_path: Path) -> type[RuleBasedStateMachine]:
    config = ServerSettings(packs=PACKS, sessions_dir=str(tmp_path / "sessions"), token=TOKEN)
    app = create_app(config, load_pack_set(config.packs))
    schema = schemathesis.openapi.from_asgi("/openapi.json", app)
    schema = schemathesis.openapi.from_dict(_served(schema.raw_schema))
    schema.app = app  # requests go to the application in this process
    operations = [result.ok() for result in schema.get_all_operations()]
    strategies = st.one_of(*(op.as_strategy(mode) for op in operations for mode in GenerationMode))
    authorization = st.sampled_from(
        [f"Bearer {TOKEN}"] * 4 + ["", "Bearer x", f"bearer {TOKEN}", f"Basic {TOKEN}"]
    )

    class Server(RuleBasedStateMachine):
        @rule(case=strategies, auth=authorization)
        def request(self, case: Any, auth: str) -> None:
            headers = {"Authorization": auth} if auth else {}
            response = case.call_and_validate(
                headers=headers,
                checks=CONFORMANCE,
                excluded_checks=[checks.positive_data_acceptance],
            )
            problem = _judge(response)
            assert problem is None, f"{problem}\n{case.method} {case.formatted_path}"

    return Server


def _run(tmp_path: Path, examples: int, steps: int) -> None:
    machine = _machine(tmp_path)
    run_state_machine_as_test(
        machine,
        settings=settings(
            max_examples=examples,
            stateful_step_count=steps,
            derandomize=not EXPLORE,
            deadline=None,
            database=None,
            suppress_health_check=list(HealthCheck),
        ),
    )


@pytest.mark.heavy
def test_fuzz_server_smoke(tmp_path: Path) -> None:
    _run(tmp_path, examples=2, steps=6)


@pytest.mark.slow
def test_fuzz_server(tmp_path: Path) -> None:
    examples = int(os.environ.get("RULES_FUZZ_EXAMPLES", "20")) if EXPLORE else 20
    _run(tmp_path, examples=examples, steps=20)
