"""Issue 35, secrets at the server: a token anywhere but the ``Authorization`` header is
refused with a problem saying where it goes, and the access log is the server's own
(method, path without the query string, status, time): no token, no query string, no body
is ever logged."""

from __future__ import annotations

import logging
from pathlib import Path

import pytest

pytest.importorskip("fastapi", reason="the server extra is not installed")

import httpx
from fastapi.testclient import TestClient
from server_process import running_server

from engine.server.app import create_app
from engine.server.packs import load_pack_set
from engine.server.settings import ServerSettings

TOKEN = "Tk-7vQ2mX9pL4sW8"
PROBLEM = "application/problem+json"
MISPLACED = "urn:rules-engine:problem:token-misplaced"


def client(tmp_path: Path, token: str | None = TOKEN) -> TestClient:
    settings = ServerSettings(packs=("sentinel",), sessions_dir=str(tmp_path), token=token)
    return TestClient(create_app(settings, load_pack_set(settings.packs)))


@pytest.mark.parametrize(
    ("url", "headers"),
    [
        (f"/v1/packs?access_token={TOKEN}", {}),
        ("/v1/packs?access_token=anything", {"Authorization": f"Bearer {TOKEN}"}),
        (f"/v1/packs?token={TOKEN}", {}),
        (f"/v1/packs?api_key={TOKEN}", {}),
        (f"/v1/packs?t={TOKEN}", {}),  # the token's value, under any name
        ("/v1/packs", {"X-Api-Key": TOKEN}),
        ("/v1/packs", {"X-Forwarded-Auth": f"Bearer {TOKEN}"}),
        (f"/healthz?access_token={TOKEN}", {}),  # on the open routes too
    ],
)
def test_a_token_outside_the_authorization_header_is_refused(
    tmp_path: Path, url: str, headers: dict[str, str]
) -> None:
    with client(tmp_path) as http:
        answer = http.get(url, headers=headers)
    assert (answer.status_code, answer.headers["content-type"]) == (400, PROBLEM)
    document = answer.json()
    assert document["type"] == MISPLACED
    assert "`Authorization: Bearer <token>`" in document["detail"]
    assert TOKEN not in answer.text


def test_a_server_without_a_token_refuses_one_in_the_query_too(tmp_path: Path) -> None:
    with client(tmp_path, token=None) as http:
        answer = http.get("/v1/packs?access_token=whatever")
        plain = http.get("/v1/packs/sentinel?block=VERDICT")
    assert answer.json()["type"] == MISPLACED
    assert plain.status_code == 200, plain.text


def test_every_operation_documents_the_misplaced_token_answer(tmp_path: Path) -> None:
    """The refusal comes from middleware before any route, so any operation can answer it:
    schemathesis found `GET /v1/packs/{name}?secret=...` answered 400 where the OpenAPI
    document listed only 200, 401, 404 and 422."""
    with client(tmp_path) as http:
        document = http.get("/openapi.json").json()
        answer = http.get(
            "/v1/packs/sentinel?secret=x", headers={"Authorization": f"Bearer {TOKEN}"}
        )
    assert (answer.status_code, answer.json()["type"]) == (400, MISPLACED)
    operations = [
        (path, method, operation)
        for path, item in document["paths"].items()
        for method, operation in item.items()
    ]
    assert len(operations) >= 20
    for path, method, operation in operations:
        documented = operation["responses"].get("400")
        assert documented, (method, path)
        assert "The token goes in the Authorization header" in documented["description"]
        schema = documented["content"]["application/problem+json"]["schema"]
        assert schema == {"$ref": "#/components/schemas/Problem"}, (method, path)


def test_the_access_log_line_has_no_query_string(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="rules.serve.access")
    with client(tmp_path) as http:
        http.get("/v1/packs/sentinel?block=VERDICT&x=secret-value")
        http.get(f"/v1/packs?access_token={TOKEN}")
    lines = [r.getMessage() for r in caplog.records if r.name == "rules.serve.access"]
    assert [line.rsplit(" ", 2)[0] for line in lines] == [
        "GET /v1/packs/sentinel 401",
        "GET /v1/packs 400",
    ]
    assert all(line.endswith(" ms") for line in lines)


@pytest.mark.heavy
def test_a_real_server_never_logs_the_token(tmp_path: Path) -> None:
    """The row: ``GET /v1/packs?access_token=TOKEN`` on a server with ``--token-file``."""
    (tmp_path / "token").write_text(TOKEN + "\n", encoding="utf-8")
    auth = {"Authorization": f"Bearer {TOKEN}"}
    with running_server(tmp_path, "--pack", "sentinel", "--token-file", "token") as server:
        query = httpx.get(f"{server.url}/v1/packs?access_token={TOKEN}")
        in_path = httpx.get(f"{server.url}/v1/packs/{TOKEN}", headers=auth)
        good = httpx.get(f"{server.url}/v1/packs?pack=sentinel", headers=auth)
    assert (query.status_code, in_path.status_code, good.status_code) == (400, 404, 200)
    log = server.output()
    assert "GET /v1/packs 400" in log and "GET /v1/packs 200" in log
    assert "GET /v1/packs/*** 404" in log  # the token in a path is scrubbed
    assert TOKEN not in log and TOKEN[:8] not in log
    assert "?" not in log and "access_token" not in log
