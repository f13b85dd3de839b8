"""`rules serve`'s application against real packs (FastAPI's TestClient: the real app in
this process): the documents equal the command line's, errors are problem documents, the
token, the body limit, reload."""

from __future__ import annotations

import json
import shutil
import socket
import sys
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the server extra is not installed")

from fastapi.testclient import TestClient

from conftest import REPO, run_cli
from engine.pack.loaded import load_pack
from engine.server.app import create_app
from engine.server.packs import load_pack_set
from engine.server.settings import ServerSettings

GOOD = (REPO / "examples" / "sentinel" / "verdict.txt").read_text(encoding="utf-8")
BAD = (REPO / "examples" / "sentinel" / "verdict_bad.txt").read_text(encoding="utf-8")
SENTINEL_ARGS = ("--pack", "sentinel", "--block", "VERDICT", "--nonce", "4F2C9A")
REQUEST = {"pack": "sentinel", "block": "VERDICT", "nonce": "4F2C9A", "vars": {"criterion": "AC1"}}
PROBLEM = "application/problem+json"


def client(
    tmp_path: Path,
    *refs: str,
    token: str | None = None,
    address: str = "127.0.0.1",
    **settings: Any,
) -> TestClient:
    config = ServerSettings(
        packs=refs or ("sentinel",),
        sessions_dir=str(tmp_path / "sessions"),
        token=token,
        **settings,
    )
    return TestClient(create_app(config, load_pack_set(config.packs)), client=(address, 50000))


def cli_json(*args: str, input: str) -> dict[str, Any]:
    result = run_cli(*args, input=input)
    document: dict[str, Any] = json.loads(result.output)
    return document


def without_revision(document: dict[str, Any]) -> dict[str, Any]:
    pack = {k: v for k, v in document["pack"].items() if k != "revision"}
    return {**document, "pack": pack}


@pytest.mark.parametrize("output", [GOOD, BAD], ids=["pass", "fail"])
def test_evaluate_answers_the_document_of_rules_eval(tmp_path: Path, output: str) -> None:
    with client(tmp_path) as http:
        answer = http.post("/v1/evaluate", json={**REQUEST, "output": output})
    assert answer.status_code == 200
    expected = cli_json(
        "eval", *SENTINEL_ARGS, "--var", "criterion=AC1", "--format", "json", input=output
    )
    assert without_revision(answer.json()) == expected
    assert answer.json()["pack"]["revision"] == load_pack("sentinel").revision


def test_render_answers_the_prompt_of_rules_render_byte_for_byte(tmp_path: Path) -> None:
    with client(tmp_path) as http:
        answer = http.post("/v1/render", json={**REQUEST, "output": BAD}).json()
        passed = http.post("/v1/render", json={**REQUEST, "output": GOOD}).json()
    printed = run_cli("render", *SENTINEL_ARGS, "--var", "criterion=AC1", input=BAD).output
    assert answer["prompt"] == printed
    assert answer["decision"]["action"] == "REPAIR"
    assert (passed["prompt"], passed["decision"]["action"]) == (None, "PROCEED")


def test_a_session_repairs_then_needs_a_human_and_its_log_shows_both(tmp_path: Path) -> None:
    with client(tmp_path) as http:
        first = http.post("/v1/sessions/s1/outputs", json={**REQUEST, "output": BAD}).json()
        second = http.post("/v1/sessions/s1/outputs", json={**REQUEST, "output": BAD}).json()
    assert (first["decision"]["action"], first["attempt"]) == ("REPAIR", 1)
    assert (
        first["prompt"]
        == run_cli("render", *SENTINEL_ARGS, "--var", "criterion=AC1", input=BAD).output
    )
    assert (second["decision"]["action"], second["attempt"]) == ("NEEDS_HUMAN", 2)
    assert second["prompt"] is None
    log = run_cli("log", "--session", str(tmp_path / "sessions" / "s1"), "--format", "jsonl")
    rows = [json.loads(line) for line in log.output.splitlines()]
    assert [(r["attempt"], r["action"]) for r in rows] == [(1, "REPAIR"), (2, "NEEDS_HUMAN")]


def test_a_session_records_what_rendering_its_prompt_warned_as_rules_render_does(
    tmp_path: Path,
) -> None:
    context = {
        "known_gaps": ["GAP-FLOW-001"],
        "round": 2,
        "spec_path": str(tmp_path / "gone.md"),
        "original_prompt": "Do the work.",
    }
    body = {"pack": "gap-review", "block": "engineer", "output": "", "context": context}
    with client(tmp_path, "gap-review") as http:
        answer = http.post("/v1/sessions/s1/outputs", json=body)
    assert answer.status_code == 200, answer.text
    assert any("gone.md" in w for w in answer.json()["warnings"])
    folder = tmp_path / "by-cli"
    (tmp_path / "ctx.json").write_text(json.dumps(context), encoding="utf-8")
    (tmp_path / "out.md").write_text("", encoding="utf-8")
    shown = run_cli(
        "render",
        *("--pack", "gap-review", "--block", "engineer", "--context", str(tmp_path / "ctx.json")),
        *("--session", str(folder), str(tmp_path / "out.md")),
    )
    assert shown.exit_code == 0, shown.output
    recorded = [
        json.loads(run_cli("log", "--session", str(where), "--format", "json").stdout)
        for where in (tmp_path / "sessions" / "s1", folder)
    ]
    assert [[row["warnings"] for row in rows] for rows in recorded] == [
        [answer.json()["warnings"]]
    ] * 2


@pytest.mark.parametrize("ledger_url", ["sqlite", "postgresql"], indirect=True)
def test_sessions_by_name_in_one_ledger_that_rules_log_reads(
    tmp_path: Path, ledger_url: str
) -> None:
    with client(tmp_path, ledger=ledger_url) as http:
        assert http.get("/readyz").status_code == 200
        for session in ("s1", "s2", "s1"):
            answer = http.post(f"/v1/sessions/{session}/outputs", json={**REQUEST, "output": BAD})
            assert answer.status_code == 200, answer.text
    assert not (tmp_path / "sessions").exists()  # nothing in folders: all in the ledger
    log = run_cli("log", "--ledger", ledger_url, "--session", "s1", "--format", "jsonl")
    rows = [json.loads(line) for line in log.output.splitlines()]
    assert [(r["attempt"], r["action"]) for r in rows] == [(1, "REPAIR"), (2, "NEEDS_HUMAN")]
    # each recorded decision names the policy that was live, as the response did
    live = answer.json()["pack"]
    assert {(r["pack"], r["pack_version"], r["revision"]) for r in rows} == {
        (live["name"], live["version"], live["revision"])
    }
    assert live["revision"] == load_pack("sentinel").revision
    log = run_cli("log", "--ledger", ledger_url, "--session", "s2", "--format", "jsonl")
    assert [json.loads(line)["attempt"] for line in log.output.splitlines()] == [1]


def test_an_unreachable_ledger_is_not_ready_and_a_503_naming_it_redacted(tmp_path: Path) -> None:
    url = "postgresql://rules:s3cret@127.0.0.1:1/rules?connect_timeout=1"
    pytest.importorskip("psycopg", reason="the postgres extra is not installed")
    with client(tmp_path, ledger=url) as http:
        ready = http.get("/readyz")
        answer = http.post("/v1/sessions/s1/outputs", json={**REQUEST, "output": BAD})
    assert ready.status_code == 503 and ready.headers["content-type"] == PROBLEM
    assert answer.status_code == 503 and answer.headers["content-type"] == PROBLEM
    assert answer.json()["type"].endswith("ledger-unavailable")
    assert "s3cret" not in ready.text + answer.text and "127.0.0.1:1" in answer.text


def test_gate_answers_the_document_of_rules_gate(tmp_path: Path) -> None:
    todo = json.loads((REPO / "rules/quality-gate/examples/todo.json").read_text())
    (tmp_path / "todo.json").write_text(json.dumps(todo), encoding="utf-8")
    now = "2026-01-04T06:30:00Z"
    with client(tmp_path, "quality-gate") as http:
        answer = http.post(
            "/v1/gate",
            json={"pack": "quality-gate", "stage": "IMPLEMENT", "outputs": [todo], "now": now},
        )
    assert answer.status_code == 200
    expected = json.loads(
        run_cli(
            "gate", "--pack", "quality-gate", "--stage", "IMPLEMENT", "--now", now,
            "--format", "json", str(tmp_path / "todo.json"),
        ).output
    )  # fmt: skip
    assert without_revision(answer.json()) == {"pack": {"name": "quality-gate",
        "version": answer.json()["pack"]["version"]}, **expected}  # fmt: skip


def test_packs_and_their_tables(tmp_path: Path) -> None:
    with client(tmp_path) as http:
        listed = http.get("/v1/packs").json()
        tables = http.get("/v1/packs/sentinel").json()
        one = http.get("/v1/packs/sentinel", params={"block": "VERDICT"}).json()
        missing = http.get("/v1/packs/nope")
        no_block = http.get("/v1/packs/sentinel", params={"block": "NOPE"})
    pack = load_pack("sentinel")
    assert listed["packs"] == [
        {"name": "sentinel", "version": pack.model.version, "revision": pack.revision,
         "blocks": pack.blocks}
    ]  # fmt: skip
    assert [row["block"] for row in tables["blocks"]] == pack.blocks
    assert [row["block"] for row in one["blocks"]] == ["VERDICT"]
    explained = run_cli("explain", "--pack", "sentinel", "--format", "md").output
    for row in tables["blocks"]:
        assert f"| {row['block']} " in explained
        assert ", ".join(row["repair_on"]) in explained
    for failure_type in tables["failure_types"]:
        assert f"| {failure_type['name']} " in explained
    assert missing.status_code == 404 and missing.headers["content-type"] == PROBLEM
    assert no_block.status_code == 422
    assert no_block.json()["type"] == "urn:rules-engine:problem:unknown-block"
    assert no_block.json()["detail"] == (
        f"pack 'sentinel' has no block 'NOPE' (blocks: {', '.join(pack.model.contracts)})"
    )
    assert no_block.json()["fields"] == ["block"]


@pytest.mark.parametrize(
    ("body", "status", "kind", "fields"),
    [
        ({**REQUEST, "pack": "nope", "output": BAD}, 422, "unknown-pack", ["pack"]),
        ({**REQUEST, "block": "NOPE", "output": BAD}, 422, "unknown-block", ["block"]),
        ({**REQUEST, "nonce": None, "output": BAD}, 422, "missing-input", ["nonce"]),
        ({**REQUEST, "vars": {}, "output": BAD}, 422, "missing-input", ["vars.criterion"]),
        ({**REQUEST, "output": 42}, 422, "invalid-request", ["output"]),
        ({**REQUEST}, 422, "invalid-request", ["output"]),
        ({**REQUEST, "output": BAD, "attempt": 0}, 422, "invalid-request", ["attempt"]),
        ({**REQUEST, "output": BAD, "surprise": 1}, 422, "invalid-request", ["surprise"]),
        ({**REQUEST, "output": "x", "error": "e", "failure_type": "NO"}, 422, "engine-refused", []),
    ],
)
def test_bad_requests_are_problem_documents(
    tmp_path: Path, body: dict[str, Any], status: int, kind: str, fields: list[str]
) -> None:
    with client(tmp_path) as http:
        answer = http.post("/v1/evaluate", json=body)
    assert answer.status_code == status
    assert answer.headers["content-type"] == PROBLEM
    problem = answer.json()
    assert problem["type"] == f"urn:rules-engine:problem:{kind}"
    assert problem["status"] == status and problem["title"] and problem["detail"]
    assert problem.get("fields", []) == fields


def test_missing_inputs_are_one_refusal_each_front_door_words_its_own_way(
    tmp_path: Path,
) -> None:
    body = {"pack": "sentinel", "block": "VERDICT", "output": BAD}
    with client(tmp_path) as http:
        answer = http.post("/v1/evaluate", json=body).json()
    printed = run_cli("eval", "--pack", "sentinel", "--block", "VERDICT", input=BAD)
    end = "(a caller's input, not the model's: nothing was evaluated)"
    assert answer["fields"] == ["nonce", "vars.criterion"]
    assert answer["detail"] == f"block 'VERDICT' needs nonce and vars.criterion {end}"
    assert printed.exit_code == 2
    assert printed.stderr == (
        f"error: block 'VERDICT' needs --nonce and --var criterion=... {end}\n"
    )


def test_malformed_json_404_405_and_a_bad_session_name(tmp_path: Path) -> None:
    with client(tmp_path) as http:
        broken = http.post(
            "/v1/evaluate", content=b"{not json", headers={"content-type": "application/json"}
        )
        unknown = http.get("/v1/nothing")
        wrong_method = http.get("/v1/evaluate")
        bad_name = http.post("/v1/sessions/..evil/outputs", json={**REQUEST, "output": BAD})
    assert (broken.status_code, broken.json()["type"]) == (
        400,
        "urn:rules-engine:problem:malformed-json",
    )
    assert (unknown.status_code, unknown.headers["content-type"]) == (404, PROBLEM)
    assert (wrong_method.status_code, wrong_method.headers["content-type"]) == (405, PROBLEM)
    assert (bad_name.status_code, bad_name.json()["fields"]) == (422, ["session"])
    assert not (tmp_path / "sessions").exists() or not any((tmp_path / "sessions").iterdir())


def test_a_body_over_the_limit_is_413(make_pack: Any, tmp_path: Path) -> None:
    folder = tmp_path / "small"
    shutil.copytree(REPO / "rules" / "sentinel", folder)
    text = (folder / "pack.yaml").read_text(encoding="utf-8")
    # the pack's own `limits:` (its prompt budget) gets the cap beside it
    limited = text.replace("\nlimits: {", "\nlimits: {max_output_bytes: 1000, ", 1)
    assert limited != text
    (folder / "pack.yaml").write_text(limited, encoding="utf-8")
    with client(tmp_path, str(folder)) as http:
        limit = 2 * 1000 + (1 << 20)
        huge = http.post("/v1/evaluate", json={**REQUEST, "output": "x" * (limit + 10)})
        large = http.post("/v1/evaluate", json={**REQUEST, "output": "x" * 5000})
    assert (huge.status_code, huge.json()["type"]) == (
        413,
        "urn:rules-engine:problem:body-too-large",
    )
    assert large.status_code == 200
    assert large.json()["verdict"]["failures"][0]["type"] == "OUTPUT_TOO_LARGE"


def test_a_token_guards_every_v1_route_but_not_healthz(tmp_path: Path) -> None:
    with client(tmp_path, token="s3cret-token") as http:
        missing = http.get("/v1/packs")
        wrong = http.get("/v1/packs", headers={"Authorization": "Bearer nope"})
        right = http.get("/v1/packs", headers={"Authorization": "Bearer s3cret-token"})
        health = http.get("/healthz")
    assert (missing.status_code, missing.headers["content-type"]) == (401, PROBLEM)
    assert missing.headers["www-authenticate"].startswith("Bearer")
    assert "s3cret-token" not in missing.text + wrong.text
    assert (wrong.status_code, right.status_code, health.status_code) == (401, 200, 200)


def test_a_reload_with_a_failing_pack_keeps_the_old_revision(tmp_path: Path) -> None:
    folder = tmp_path / "live"
    shutil.copytree(REPO / "rules" / "sentinel", folder)
    with client(tmp_path, str(folder)) as http:
        before = http.get("/v1/packs").json()["packs"][0]["revision"]
        pack_file = folder / "pack.yaml"
        good = pack_file.read_text(encoding="utf-8")
        pack_file.write_text(good + "\nno_such_key: 1\n", encoding="utf-8")
        refused = http.post("/v1/admin/reload")
        still = http.get("/v1/packs").json()["packs"][0]["revision"]
        served = http.post("/v1/evaluate", json={**REQUEST, "output": GOOD})
        pack_file.write_text(good + "\n# edited\n", encoding="utf-8")
        done = http.post("/v1/admin/reload")
        after = http.get("/v1/packs").json()["packs"][0]["revision"]
    assert refused.status_code == 422
    assert refused.json()["type"] == "urn:rules-engine:problem:pack-check-failed"
    assert refused.json()["packs"][0]["findings"]
    assert still == before and served.json()["pack"]["revision"] == before
    assert done.status_code == 200 and after != before
    assert done.json()["packs"][0]["revision"] == after


def test_without_a_token_reload_answers_loopback_clients_only(tmp_path: Path) -> None:
    with client(tmp_path, address="203.0.113.5") as http:
        far = http.post("/v1/admin/reload")
    with client(tmp_path, token="t0ken", address="203.0.113.5") as http:
        tokened = http.post("/v1/admin/reload", headers={"Authorization": "Bearer t0ken"})
    assert (far.status_code, far.headers["content-type"]) == (403, PROBLEM)
    assert tokened.status_code == 200


def test_metrics_count_decisions_and_failures(tmp_path: Path) -> None:
    with client(tmp_path) as http:
        http.post("/v1/evaluate", json={**REQUEST, "output": BAD})
        text = http.get("/metrics").text
        ready = http.get("/readyz")
    assert 'rules_decisions_total{action="REPAIR",block="VERDICT",pack="sentinel"}' in text
    assert 'rules_failures_total{block="VERDICT",failure_type=' in text
    assert "rules_request_seconds_bucket" in text
    assert ready.status_code == 200


def test_the_revision_is_stable_and_follows_every_file(tmp_path: Path) -> None:
    folder = tmp_path / "rev"
    shutil.copytree(REPO / "rules" / "sentinel", folder)
    first = load_pack(folder).revision
    assert load_pack(folder).revision == first
    template = next((folder / "templates").iterdir())
    template.write_text(template.read_text(encoding="utf-8") + "\n", encoding="utf-8")
    assert load_pack(folder).revision != first


def test_serve_refuses_a_public_bind_without_a_token() -> None:
    result = run_cli("serve", "--pack", "sentinel", "--host", "0.0.0.0")
    assert result.exit_code == 2
    assert "--token-file" in result.output


def test_serve_without_the_extra_names_it(monkeypatch: pytest.MonkeyPatch) -> None:
    # the server's modules and the CLI's module that starts them, as if never imported
    for name in [
        m for m in sys.modules if m.startswith("engine.server") or m == "engine.cli.serving"
    ]:
        monkeypatch.delitem(sys.modules, name)
    monkeypatch.setitem(sys.modules, "fastapi", None)
    result = run_cli("serve", "--pack", "sentinel")
    assert result.exit_code == 2
    assert "rules-engine[server]" in result.output


def test_print_openapi_describes_every_route() -> None:
    document = json.loads(run_cli("serve", "--print-openapi").output)
    assert {"/v1/evaluate", "/v1/render", "/v1/sessions/{session}/outputs", "/v1/gate",
            "/v1/packs", "/v1/packs/{name}", "/v1/admin/reload", "/healthz", "/readyz",
            "/metrics"} <= set(document["paths"])  # fmt: skip


def test_a_lone_surrogate_or_a_body_nested_too_deep_is_no_server_error(tmp_path: Path) -> None:
    lone = json.dumps({**REQUEST, "nonce": "\ud800", "output": BAD}).encode()
    headers = {"content-type": "application/json"}
    with client(tmp_path) as http:
        rendered = http.post("/v1/render", content=lone, headers=headers)
        deep = http.post("/v1/evaluate", content=b"[" * 100_000 + b"]" * 100_000, headers=headers)
        recorded = http.post("/v1/sessions/s1/outputs", content=lone, headers=headers)
    assert rendered.status_code == 200
    # a session records the nonce as UTF-8 text: it refuses one it cannot (was a 500)
    assert (recorded.status_code, recorded.json()["detail"]) == (
        422,
        "nonce: must be text (it holds a lone surrogate, not UTF-8)",
    )
    assert rendered.json()["decision"]["carry"]["nonce"] == "\ud800"
    assert (deep.status_code, deep.json()["type"]) == (
        400,
        "urn:rules-engine:problem:malformed-json",
    )


def test_a_request_over_its_time_limit_is_503(tmp_path: Path) -> None:
    with client(tmp_path, timeout=1e-9) as http:
        late = http.post("/v1/evaluate", json={**REQUEST, "output": BAD * 1000})
    assert (late.status_code, late.headers["content-type"]) == (503, PROBLEM)
    assert late.json()["type"] == "urn:rules-engine:problem:timeout"


def test_serve_says_when_its_port_is_taken() -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        result = run_cli("serve", "--pack", "sentinel", "--port", str(port))
    assert result.exit_code == 2
    assert f"cannot listen on 127.0.0.1:{port}" in result.output
