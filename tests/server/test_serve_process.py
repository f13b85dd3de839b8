"""`rules serve` as a real process on a free loopback port (slow tests): the repair loop of
a session, reloads, the refusals at start, and generated requests against its OpenAPI
document."""

from __future__ import annotations

import collections
import json
import os
import shutil
import signal
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the server extra is not installed")

import httpx
from sentinel_cases import VERDICT_ARGS
from server_process import running_server

from conftest import REPO, run_cli, run_script, script

pytestmark = pytest.mark.slow

BAD = (REPO / "examples" / "sentinel" / "verdict_bad.txt").read_text(encoding="utf-8")
GOOD = (REPO / "examples" / "sentinel" / "verdict.txt").read_text(encoding="utf-8")
REQUEST = {"pack": "sentinel", "block": "VERDICT", "nonce": "4F2C9A", "vars": {"criterion": "AC1"}}


def test_a_session_repair_loop_against_a_real_server(tmp_path: Path) -> None:
    with running_server(tmp_path, "--pack", "sentinel") as server:
        first = httpx.post(f"{server.url}/v1/sessions/S/outputs", json={**REQUEST, "output": BAD})
        second = httpx.post(f"{server.url}/v1/sessions/S/outputs", json={**REQUEST, "output": BAD})
    assert first.status_code == 200, first.text
    rendered = run_script(
        script("rules"), "render", *VERDICT_ARGS, input=BAD.encode(),
    )  # fmt: skip
    assert first.json()["decision"]["action"] == "REPAIR"
    assert first.json()["prompt"].encode("utf-8") == rendered.stdout
    assert second.json()["decision"]["action"] == "NEEDS_HUMAN"
    assert second.json()["decision"]["final"] is True
    log = run_cli("log", "--session", str(tmp_path / "sessions" / "S"), "--format", "jsonl")
    rows = [json.loads(line) for line in log.output.splitlines()]
    assert [(r["attempt"], r["action"]) for r in rows] == [(1, "REPAIR"), (2, "NEEDS_HUMAN")]


def test_a_reload_by_sighup_with_a_failing_pack_keeps_the_old_revision(tmp_path: Path) -> None:
    folder = tmp_path / "live"
    shutil.copytree(REPO / "rules" / "sentinel", folder)
    pack_file = folder / "pack.yaml"
    good = pack_file.read_text(encoding="utf-8")
    with running_server(tmp_path, "--pack", str(folder)) as server:
        before = httpx.get(f"{server.url}/v1/packs").json()["packs"][0]["revision"]
        pack_file.write_text(good + "\nno_such_key: 1\n", encoding="utf-8")
        os.kill(server.process.pid, signal.SIGHUP)
        time.sleep(1.5)
        refused = httpx.post(f"{server.url}/v1/admin/reload")
        kept = httpx.post(f"{server.url}/v1/evaluate", json={**REQUEST, "output": GOOD})
        pack_file.write_text(good + "\n# a new revision\n", encoding="utf-8")
        os.kill(server.process.pid, signal.SIGHUP)
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            after = httpx.get(f"{server.url}/v1/packs").json()["packs"][0]["revision"]
            if after != before:
                break
            time.sleep(0.2)
        assert server.process.poll() is None
    assert refused.status_code == 422 and refused.json()["packs"][0]["findings"]
    assert kept.json()["pack"]["revision"] == before
    assert after != before
    assert "reload refused" in server.output()


def test_the_server_refuses_to_start_on_a_public_address_or_with_a_broken_pack(
    tmp_path: Path,
) -> None:
    public = run_script(script("rules"), "serve", "--pack", "sentinel", "--host", "0.0.0.0")
    assert public.returncode == 2
    assert b"--token-file" in public.stderr
    broken = tmp_path / "broken"
    shutil.copytree(REPO / "rules" / "sentinel", broken)
    (broken / "pack.yaml").write_text(
        (broken / "pack.yaml").read_text(encoding="utf-8") + "\nno_such_key: 1\n",
        encoding="utf-8",
    )
    refused = run_script(script("rules"), "serve", "--pack", str(broken), "--port", "0")
    assert refused.returncode == 2
    assert b"no_such_key" in refused.stderr and b"did not start" in refused.stderr


def test_a_token_is_needed_off_loopback_and_workers_share_the_sessions(tmp_path: Path) -> None:
    (tmp_path / "token").write_text("a-long-random-token\n", encoding="utf-8")
    auth = {"Authorization": "Bearer a-long-random-token"}
    with running_server(
        tmp_path, "--pack", "sentinel", "--token-file", str(tmp_path / "token"), "--workers", "2"
    ) as server:
        refused = httpx.get(f"{server.url}/v1/packs")
        answers = [
            httpx.post(
                f"{server.url}/v1/sessions/W/outputs",
                json={**REQUEST, "output": BAD},
                headers=auth,
            ).json()["decision"]["attempt"]
            for _ in range(4)
        ]
        metrics = httpx.get(f"{server.url}/metrics").text

        def one(_: int) -> int:
            answer = httpx.post(
                f"{server.url}/v1/sessions/C/outputs",
                json={**REQUEST, "output": BAD},
                headers=auth,
                timeout=60,
            )
            attempt: int = answer.json()["decision"]["attempt"]
            return attempt

        with ThreadPoolExecutor(max_workers=8) as pool:
            concurrent = sorted(pool.map(one, range(16)))
        reloaded = httpx.post(f"{server.url}/v1/admin/reload", headers=auth)
        time.sleep(1)  # the supervisor replaces the workers one by one
        deadline = time.monotonic() + 60
        while server.output().count("Started server process") < 4:
            assert time.monotonic() < deadline, server.output()
            time.sleep(0.2)
        after = httpx.post(
            f"{server.url}/v1/sessions/W/outputs", json={**REQUEST, "output": BAD}, headers=auth
        )
    assert refused.status_code == 401
    assert (reloaded.status_code, reloaded.json()["workers"]) == (200, "restarting")
    # a run of this item is a repair and its final action: each ends at attempt 2, and the
    # next output starts the item's next run
    assert after.json()["decision"]["attempt"] == 1
    assert answers == [1, 2, 1, 2]
    # eight runs of two attempts: no attempt counted twice or lost across the workers
    assert concurrent == [1] * 8 + [2] * 8
    assert "a-long-random-token" not in server.output()
    # the four sequential outputs are two runs, each with one repair
    assert 'rules_decisions_total{action="REPAIR",block="VERDICT",pack="sentinel"} 2.0' in metrics


def with_served_names(document: dict[str, Any], url: str) -> dict[str, Any]:
    """The server's document with the served pack and block names as the only values of the
    fields that name them, so that generated requests also reach evaluation, rendering,
    the ledger and the gates (the document itself leaves them open: packs are reloaded)."""
    packs = httpx.get(f"{url}/v1/packs").json()["packs"]
    names = sorted(p["name"] for p in packs)
    blocks = sorted({b for p in packs for b in p["blocks"]})
    for model in document["components"]["schemas"].values():
        properties = model.get("properties", {})
        if "pack" in properties and properties["pack"].get("type") == "string":
            properties["pack"]["enum"] = names
        if "block" in properties and properties["block"].get("type") == "string":
            properties["block"]["enum"] = blocks
    parameters = document["paths"]["/v1/packs/{name}"]["get"]["parameters"]
    next(p for p in parameters if p["name"] == "name")["schema"]["enum"] = names
    return document


def test_generated_requests_get_no_5xx_and_conform_to_the_openapi_document(
    tmp_path: Path,
) -> None:
    """schemathesis: every operation of the running server's document, at least 500
    requests in all, schema-valid and not; every answer below 500 and conforming (status,
    content type, schema, headers). Not checked: that schema-valid data is accepted, since
    which pack and block names exist and which block needs a nonce are the served packs',
    not the schema's (a 422 problem answers them, as documented)."""
    import schemathesis
    from hypothesis import HealthCheck, given, settings
    from schemathesis import GenerationMode, checks

    conformance = [
        checks.not_a_server_error,
        checks.status_code_conformance,
        checks.content_type_conformance,
        checks.response_schema_conformance,
        checks.response_headers_conformance,
    ]

    calls: list[int] = []
    packs = ("--pack", "sentinel", "--pack", "quality-gate", "--shadow", "sentinel=sentinel")
    with running_server(tmp_path, *packs) as server:
        document = httpx.get(f"{server.url}/openapi.json").json()
        schema = schemathesis.openapi.from_dict(with_served_names(document, server.url))
        operations = [result.ok() for result in schema.get_all_operations()]
        assert len(operations) == 20  # budgets 1, reviews 8 among them
        for operation in operations:
            takes_input = bool(operation.body or operation.path_parameters or operation.query)
            modes = [GenerationMode.POSITIVE] + [GenerationMode.NEGATIVE] * takes_input
            for mode in modes:

                @settings(
                    max_examples=70,
                    deadline=None,
                    database=None,
                    suppress_health_check=list(HealthCheck),
                )
                @given(case=operation.as_strategy(mode))
                def check(case: Any) -> None:
                    response = case.call_and_validate(
                        base_url=server.url,
                        checks=conformance,
                        excluded_checks=[checks.positive_data_acceptance],
                    )
                    calls.append(response.status_code)
                    assert response.status_code < 500 or response.status_code == 503

                check()
    print("schemathesis statuses:", sorted(collections.Counter(calls).items()))
    assert len(calls) >= 500, len(calls)
    assert 200 in calls
    assert 503 not in calls
