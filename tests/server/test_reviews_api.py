"""The review routes and page against the real application (FastAPI's TestClient): the
session route names the review its decision opened; claims, edits and rejections answer
their documents or problems; the page is accessible, escapes a model's `<script>`, checks
a draft before an edit is taken, and needs the token as the API does."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("fastapi", reason="the server extra is not installed")

from fastapi.testclient import TestClient
from test_review_page import Page, check_accessible
from test_reviews import BAD, EDITED, NONCE, make_pack

from engine.server.app import create_app
from engine.server.packs import load_pack_set
from engine.server.settings import ServerSettings

OUTPUT = {"pack": "my-pack", "block": "ANSWER", "output": BAD, "nonce": NONCE}
OUTPUT["vars"] = {"question": "Q1"}  # type: ignore[assignment]
PROBLEM = "application/problem+json"


def client(folder: Path, token: str | None = None, ledger: str | None = None) -> TestClient:
    make_pack(folder)
    config = ServerSettings(
        packs=(str(folder / "my-pack"),),
        sessions_dir=str(folder / "sessions"),
        token=token,
        ledger=ledger,
    )
    return TestClient(create_app(config, load_pack_set(config.packs)), client=("127.0.0.1", 5))


def reach_review(http: TestClient, session: str = "s1") -> dict[str, Any]:
    http.post(f"/v1/sessions/{session}/outputs", json=OUTPUT)
    answer: dict[str, Any] = http.post(f"/v1/sessions/{session}/outputs", json=OUTPUT).json()
    assert answer["decision"]["action"] == "NEEDS_HUMAN"
    return answer


@pytest.mark.heavy
@pytest.mark.parametrize("ledger", [None, "ledger.db"], ids=["session folders", "one ledger"])
def test_the_api_claims_once_and_takes_an_edit_only_when_it_passes(
    tmp_path: Path, ledger: str | None
) -> None:
    url = None if ledger is None else str(tmp_path / ledger)
    with client(tmp_path, ledger=url) as http:
        reach_review(http, "other")  # another session's review: listed, never confused
        answer = reach_review(http)
        first = 1 if ledger is None else 2  # one ledger numbers every session's reviews
        assert answer["review"] == {"id": first, "state": "open", "url": f"/v1/reviews/s1/{first}"}
        listed = http.get("/v1/reviews").json()["reviews"]
        assert [(r["session"], r["id"]) for r in listed] == [("other", 1), ("s1", first)]
        one = f"/v1/reviews/s1/{first}"
        if ledger is not None:
            assert http.get("/v1/reviews/s1/1").status_code == 404  # session other's review
        shown = http.get(one).json()
        assert [a["output"] for a in shown["attempts"]] == [None, BAD]  # the first not kept
        claimed = http.post(f"{one}/claim", json={"by": "ann"})
        assert (claimed.status_code, claimed.json()["claimed_by"]) == (200, "ann")
        taken = http.post(f"{one}/claim", json={"by": "ben"})
        assert taken.status_code == 409 and taken.headers["content-type"] == PROBLEM
        assert taken.json()["type"].endswith(":review-taken")
        check = http.post(f"{one}/check", json={"output": BAD}).json()
        assert check["verdict"]["status"] == "fail"
        refused = http.post(f"{one}/edit", json={"by": "ann", "output": BAD})
        assert refused.status_code == 422
        assert refused.json()["verdict"]["failures"][0]["type"] == "PARSE_ERROR"
        done = http.post(f"{one}/edit", json={"by": "ann", "output": EDITED}).json()
        assert (done["state"], done["resolution"], done["output"]) == ("resolved", "edited", EDITED)
        assert done["session"] == "s1"
        again = http.post(f"{one}/reject", json={"by": "ben", "reason": "late"})
        assert again.status_code == 409 and "resolved already" in again.json()["detail"]
        assert http.get("/v1/reviews/s9/1").status_code == 404
        assert http.get("/v1/reviews/s1/99").json()["type"].endswith(":review-not-found")
        [resolved] = http.get("/v1/reviews?state=resolved").json()["reviews"]
        assert (resolved["session"], resolved["resolved_by"]) == ("s1", "ann")
        assert [r["session"] for r in http.get("/v1/reviews").json()["reviews"]] == ["other"]
        paths = set(http.get("/openapi.json").json()["paths"])
        assert {
            "/v1/reviews/{session}/{review}/approve",
            "/v1/reviews/{session}/{review}/reject",
        } <= paths


@pytest.mark.heavy
def test_the_page_escapes_model_text_and_labels_every_control(tmp_path: Path) -> None:
    with client(tmp_path) as http:
        reach_review(http)
        page = http.get("/review/s1/1")
        assert page.status_code == 200
        assert "default-src 'none'" in page.headers["content-security-policy"]
        assert "<script>" not in page.text and "&lt;script&gt;alert(1)&lt;/script&gt;" in page.text
        parsed = Page(page.text)
        check_accessible(parsed)
        assert any("<script>alert(1)</script>" in text for text in parsed.pre)
        queue = http.get("/review")
        check_accessible(Page(queue.text))
        assert "Review 1" in queue.text and "nonce 4F2C9A, question=Q1" in queue.text
        failing = http.post("/review/s1/1", data={"action": "edit", "by": "cy", "output": BAD})
        assert failing.status_code == 422 and "The text fails the contract" in failing.text
        unnamed = http.post("/review/s1/1", data={"action": "approve", "by": " ", "output": ""})
        assert unnamed.status_code == 422 and "say who you are" in unnamed.text
        approved = http.post(
            "/review/s1/1", data={"action": "approve", "by": "cy"}, follow_redirects=False
        )
        assert approved.status_code == 303
        assert http.get("/v1/reviews/s1/1").json()["resolution"] == "approved"


def test_the_page_and_routes_need_the_token(tmp_path: Path) -> None:
    with client(tmp_path, token="t0ken-for-reviews") as http:
        for path in ("/review", "/review/s1/1", "/v1/reviews"):
            assert http.get(path).status_code == 401, path
        assert http.post("/review/s1/1", data={"action": "claim", "by": "x"}).status_code == 401
        bearer = {"Authorization": "Bearer t0ken-for-reviews"}
        assert http.get("/review", headers=bearer).status_code == 200


@pytest.mark.heavy
def test_a_person_signs_in_once_in_the_browser_and_the_pages_take_the_cookie(
    tmp_path: Path,
) -> None:
    """A browser sends no bearer header: the sign-in form takes the token once and sets a
    cookie that opens the pages (and only the pages), never holding the token itself."""
    token = "t0ken-for-reviews"
    with client(tmp_path, token=token) as http:
        http.headers["Authorization"] = f"Bearer {token}"  # the pipeline, as the API's client
        reach_review(http, "s1")
        del http.headers["Authorization"]  # the person, in a browser
        form = http.get("/review/sign-in")
        assert form.status_code == 200
        assert '<label for="token">' in form.text and 'type="password" id="token"' in form.text
        wrong = http.post("/review/sign-in", data={"token": "guess"}, follow_redirects=False)
        assert wrong.status_code == 401 and 'aria-live="assertive"' in wrong.text
        assert "set-cookie" not in wrong.headers
        signed = http.post("/review/sign-in", data={"token": token}, follow_redirects=False)
        assert signed.status_code == 303 and signed.headers["location"] == "/review"
        cookie = signed.headers["set-cookie"]
        assert "HttpOnly" in cookie and "SameSite=strict" in cookie and "Path=/review" in cookie
        assert token not in cookie
        assert http.get("/review").status_code == 200  # the client keeps the cookie
        assert http.get("/review/s1/1").status_code == 200
        assert http.get("/v1/reviews?session=s1").status_code == 401  # the API: bearer only
        http.cookies.set("rules_review", "0" * 64)
        assert http.get("/review").status_code == 401


@pytest.mark.heavy
def test_without_a_token_the_sign_in_page_leads_to_the_queue(tmp_path: Path) -> None:
    with client(tmp_path) as http:
        answer = http.get("/review/sign-in", follow_redirects=False)
        assert answer.status_code == 303 and answer.headers["location"] == "/review"
