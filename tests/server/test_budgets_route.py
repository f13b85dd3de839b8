"""GET /v1/budgets: a served pack's budgets and breakers, the same document `rules budgets
--format json` prints; token-protected like every route; in the OpenAPI document; and
the refusals a budget or breaker causes counted in /metrics."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the server extra is not installed")

from fastapi.testclient import TestClient

from conftest import run_cli
from engine.server.app import create_app
from engine.server.packs import load_pack_set
from engine.server.settings import ServerSettings

BAD = "this output holds no VERDICT block at all, and it is longer than fifty characters"
PACK = """rulepack: budgeted
version: 1.0.0
extends: [builtin:sentinel]
triggers:
  VERDICT:
    on: [PARSE_ERROR]
    max_attempts: 1
    after_failure: NEEDS_HUMAN
budgets:
  verdict-repairs:
    counts: repairs
    limit: 1
    window: 1h
    blocks: [VERDICT]
    action: DEGRADE
breakers:
  verdict-breaker:
    blocks: [VERDICT]
    last: 2
    min_success: 0.5
    cooldown: 60s
    action: NEEDS_HUMAN
"""
REQUEST = {"pack": "budgeted", "block": "VERDICT", "nonce": "4F2C9A", "vars": {"criterion": "AC1"}}


def client(tmp_path: Path, pack: str = PACK, **settings: Any) -> TestClient:
    (tmp_path / "pack").mkdir(exist_ok=True)
    (tmp_path / "pack" / "pack.yaml").write_text(pack, encoding="utf-8")
    config = ServerSettings(
        packs=(str(tmp_path / "pack"),), sessions_dir=str(tmp_path / "sessions"), **settings
    )
    return TestClient(create_app(config, load_pack_set(config.packs)), client=("127.0.0.1", 5000))


def test_the_route_answers_what_rules_budgets_prints(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1800000000")
    ledger = str(tmp_path / "ledger.db")
    with client(tmp_path, ledger=ledger) as http:
        outputs = [
            http.post(f"/v1/sessions/s{n}/outputs", json={**REQUEST, "output": BAD}).json()
            for n in range(2)
        ]
        answer = http.get("/v1/budgets", params={"pack": "budgeted", "session": "s0"})
        metrics = http.get("/metrics").text
    assert [o["decision"]["action"] for o in outputs] == ["REPAIR", "DEGRADE"]
    assert outputs[1]["decision"]["rule"] == "budget:verdict-repairs"
    assert answer.status_code == 200
    document = answer.json()
    [budget] = document["budgets"]
    assert (budget["spent"], budget["left"], budget["limit"]) == (1, 0, 1)
    assert budget["allows"] == "1 repairs per hour across the fleet"
    [breaker] = document["breakers"]
    assert (breaker["state"], breaker["recent_repairs"]) == ("closed", 0)
    printed = run_cli(
        "budgets", "--pack", str(tmp_path / "pack"), "--ledger", ledger, "--session", "s0",
        "--format", "json",
    )  # fmt: skip
    assert json.loads(printed.output) == document
    assert (
        'rules_spending_refusals_total{block="VERDICT",pack="budgeted",'
        'rule="budget:verdict-repairs"} 1.0'
    ) in metrics


def test_the_route_needs_the_token_a_served_pack_and_a_session_without_a_ledger(
    tmp_path: Path,
) -> None:
    with client(tmp_path, token="t0k3n") as http:
        assert http.get("/v1/budgets", params={"pack": "budgeted"}).status_code == 401
        auth = {"Authorization": "Bearer t0k3n"}
        unknown = http.get("/v1/budgets", params={"pack": "nope"}, headers=auth)
        folders = http.get("/v1/budgets", params={"pack": "budgeted"}, headers=auth)
        named = http.get(
            "/v1/budgets", params={"pack": "budgeted", "session": "fresh"}, headers=auth
        )
    assert unknown.status_code == 422 and unknown.json()["fields"] == ["pack"]
    assert folders.status_code == 422 and "?session=NAME" in folders.json()["detail"]
    assert named.status_code == 200  # a session without a ledger yet has spent nothing
    assert named.json()["budgets"][0]["spent"] == 0


def test_openapi_describes_the_budgets_route() -> None:
    document = json.loads(run_cli("serve", "--print-openapi").output)
    route = document["paths"]["/v1/budgets"]["get"]
    assert {p["name"] for p in route["parameters"]} == {"pack", "session"}
    assert "401" in route["responses"] and "200" in route["responses"]


def test_metrics_show_each_breakers_state_from_the_ledger(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("SOURCE_DATE_EPOCH", "1800000000")
    # no budget, and a breaker that opens on one failed repair
    pack = PACK.split("budgets:")[0] + "breakers:" + PACK.split("breakers:")[1]
    pack = pack.replace("last: 2", "last: 1")
    gauge = 'rules_breaker_state{{breaker="verdict-breaker",pack="budgeted",state="{}"}} {}'
    (tmp_path / "shared").mkdir()
    (tmp_path / "folders").mkdir()
    for ledger in (str(tmp_path / "shared" / "ledger.db"), None):
        folder = tmp_path / ("folders" if ledger is None else "shared")
        with client(folder, pack, ledger=ledger) as http:
            before = http.get("/metrics").text
            for _ in range(2):  # a repair asked for, and it failed: the breaker opens
                http.post("/v1/sessions/s/outputs", json={**REQUEST, "output": BAD})
            after = http.get("/metrics").text
            answer = http.get("/v1/budgets", params={"pack": "budgeted", "session": "s"})
        assert answer.json()["breakers"][0]["state"] == "open"
        closed_before = 1.0 if ledger is not None else 0.0  # no session folder yet
        assert gauge.format("closed", closed_before) in before
        assert gauge.format("open", "0.0") in before
        assert gauge.format("open", "1.0") in after
        assert gauge.format("closed", "0.0") in after
        assert gauge.format("half_open", "0.0") in after
