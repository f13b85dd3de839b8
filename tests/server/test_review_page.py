"""The review page end to end: a real `rules serve` on 127.0.0.1, a session that reaches
NEEDS_HUMAN through the session route, the page drawn by headless Chromium (its DOM read
back with --dump-dom and a screenshot kept under the test's folder), then the edited output
submitted with the page's own form fields (an HTTP form POST: Chromium's command line
cannot type into a form) and checked: the review resolved, the item's final decision the
edited output, `rules log` naming who resolved it, the next repair prompt of the block
carrying the reviewed example, the queue's figures in /metrics. And the page as a screen
reader and a keyboard meet it, with a model's `<script>` shown as text."""

from __future__ import annotations

import json
import shutil
import subprocess
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

import httpx
import pytest
from server_process import running_server
from test_reviews import BAD, EDITED, NONCE, make_pack

from conftest import run_script, script

pytestmark = pytest.mark.slow

CHROMIUM = shutil.which("chromium") or shutil.which("chromium-browser")
OUTPUT = {
    "pack": "my-pack",
    "block": "ANSWER",
    "output": BAD,
    "nonce": NONCE,
    "vars": {"question": "Q1"},
}


class Page(HTMLParser):
    """What a screen reader and a keyboard meet on a page: its headings in order, its
    landmarks, its controls and their labels, scripts, and the text of <pre> blocks."""

    def __init__(self, html: str) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str]]] = []
        self.headings: list[int] = []
        self.labels: dict[str, str] = {}
        self.buttons: list[str] = []
        self.pre: list[str] = []
        self._label: str | None = None
        self._button: list[str] | None = None
        self._pre: list[str] | None = None
        self.feed(html)

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = {k: v or "" for k, v in attrs}
        self.tags.append((tag, found))
        if len(tag) == 2 and tag[0] == "h" and tag[1].isdigit():
            self.headings.append(int(tag[1]))
        if tag == "label":
            self._label = found.get("for", "")
            self.labels[self._label] = ""
        if tag == "button":
            self._button = []
        if tag == "pre":
            self._pre = []

    def handle_endtag(self, tag: str) -> None:
        if tag == "label":
            self._label = None
        if tag == "button" and self._button is not None:
            self.buttons.append("".join(self._button).strip())
            self._button = None
        if tag == "pre" and self._pre is not None:
            self.pre.append("".join(self._pre))
            self._pre = None

    def handle_data(self, data: str) -> None:
        if self._label is not None:
            self.labels[self._label] += data
        if self._button is not None:
            self._button.append(data)
        if self._pre is not None:
            self._pre.append(data)

    def named(self, tag: str) -> list[dict[str, str]]:
        return [attrs for name, attrs in self.tags if name == tag]


def check_accessible(page: Page) -> None:
    """Landmarks, one h1 and no heading level skipped, every control labelled."""
    tags = {name for name, _ in page.tags}
    assert {"header", "nav", "main"} <= tags
    assert page.headings[0] == 1 and page.headings.count(1) == 1
    for before, after in zip(page.headings, page.headings[1:], strict=False):
        assert after <= before + 1, page.headings  # never a level skipped going down
    controls = [
        attrs
        for name, attrs in page.tags
        if name in ("input", "textarea", "select") and attrs.get("type") != "hidden"
    ]
    for attrs in controls:
        assert attrs.get("id") in page.labels and page.labels[attrs["id"]].strip(), attrs
    assert all(page.buttons), page.buttons  # each button says what it does
    assert "script" not in tags and "iframe" not in tags
    for name, attrs in page.tags:  # nothing loaded from the network
        assert not any(v.startswith(("http:", "https:", "//")) for v in attrs.values()), name


def chromium(url: str, folder: Path, *mode: str) -> subprocess.CompletedProcess[str]:
    assert CHROMIUM is not None
    return subprocess.run(
        [
            CHROMIUM,
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            "--no-first-run",
            f"--user-data-dir={folder / 'profile'}",
            "--window-size=1200,1600",
            *mode,
            url,
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )


def rules_log(folder: Path) -> list[dict[str, Any]]:
    done = run_script(
        script("rules"), "log", "--session", "sessions/s1", "--format", "json", cwd=folder
    )
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, Any]] = json.loads(done.stdout)
    return rows


@pytest.mark.skipif(CHROMIUM is None, reason="Chromium is not installed (apt-get install chromium)")
def test_a_person_edits_the_output_in_the_page_and_the_session_learns_it(tmp_path: Path) -> None:
    make_pack(tmp_path, "\nsession:\n  keep_outputs: true\n")
    with (
        running_server(tmp_path, "--pack", "./my-pack") as server,
        httpx.Client(base_url=server.url, timeout=60) as http,
    ):
        first = http.post("/v1/sessions/s1/outputs", json=OUTPUT).json()
        second = http.post("/v1/sessions/s1/outputs", json=OUTPUT).json()
        assert (first["decision"]["action"], first["review"]) == ("REPAIR", None)
        assert second["decision"]["action"] == "NEEDS_HUMAN"
        assert second["review"] == {"id": 1, "state": "open", "url": "/v1/reviews/s1/1"}
        assert http.get("/v1/reviews/s1/1").json()["state"] == "open"
        assert [r["id"] for r in http.get("/v1/reviews").json()["reviews"]] == [1]

        # the page as Chromium draws it, and its DOM as Chromium parsed it
        url = f"{server.url}/review/s1/1"
        shot = tmp_path / "review.png"
        drawn = chromium(url, tmp_path, f"--screenshot={shot}")
        assert drawn.returncode == 0, drawn.stderr
        png = shot.read_bytes()
        assert png.startswith(b"\x89PNG\r\n\x1a\n") and len(png) > 20_000  # kept in tmp_path
        dom = chromium(url, tmp_path, "--dump-dom")
        assert dom.returncode == 0, dom.stderr
        page = Page(dom.stdout)
        check_accessible(page)
        assert "<script>alert(1)</script>" not in dom.stdout  # escaped: never an element
        assert sum("<script>alert(1)</script>" in text for text in page.pre) == 2  # as text
        assert [a.get("name") for a in page.named("textarea")] == ["output"]
        [form] = page.named("form")
        assert (form["method"], form["action"]) == ("post", "/review/s1/1")
        assert {b.get("value") for b in page.named("button")} == {
            "check", "edit", "approve", "reject", "claim"
        }  # fmt: skip
        queue = Page(http.get("/review").text)
        check_accessible(queue)

        # the editor checks a draft against the contract before an edit is taken
        checked = http.post("/review/s1/1", data={"action": "check", "by": "rita", "output": BAD})
        assert checked.status_code == 200
        assert "The text fails the contract: PARSE_ERROR" in checked.text
        refused = http.post("/review/s1/1", data={"action": "edit", "by": "rita", "output": BAD})
        assert refused.status_code == 422
        assert http.get("/v1/reviews/s1/1").json()["state"] == "open"
        passed = http.post("/review/s1/1", data={"action": "check", "by": "rita", "output": EDITED})
        assert "The text passes the contract (pass)." in passed.text

        # submitted with the page's form fields, as the browser would post them
        fields = {"action": "edit", "by": "rita", "output": EDITED.replace("\n", "\r\n")}
        sent = http.post("/review/s1/1", data=fields)
        assert (sent.status_code, sent.headers["location"]) == (303, "/review/s1/1")
        resolved = http.get("/v1/reviews/s1/1").json()
        assert (resolved["state"], resolved["resolution"], resolved["resolved_by"]) == (
            "resolved",
            "edited",
            "rita",
        )
        assert resolved["output"] == EDITED
        after = chromium(url, tmp_path, "--dump-dom")
        assert "edited by rita" in after.stdout and "Submit the edited output" not in after.stdout

        # the item's final decision is the edited output, and the log says who
        rows = rules_log(tmp_path)
        final = rows[-1]
        assert (final["action"], final["rule"], final["status"]) == (
            "PROCEED",
            "review:edited",
            "pass",
        )
        assert final["reason"].startswith("edited by rita at ")
        assert final["output_sha256"] == resolved_sha(EDITED)
        md = run_script(script("rules"), "log", "--session", "sessions/s1", cwd=tmp_path)
        assert md.returncode == 0

        # the next repair prompt of the block in the session carries the reviewed example
        other = http.post("/v1/sessions/s1/outputs", json={**OUTPUT, "nonce": "5B3D1E"}).json()
        assert other["decision"]["action"] == "REPAIR"
        assert "A corrected output a person accepted (review 1, by rita):" in other["prompt"]
        assert "DECISION=YES" in other["prompt"]

        metrics = http.get("/metrics").text
        assert (
            'rules_reviews_resolved{block="ANSWER",pack="my-pack",resolution="edited"} 1.0'
            in metrics
        )
        assert 'rules_reviews_open{block="ANSWER",pack="my-pack"} 0.0' in metrics
        assert 'rules_reviews_edit_share{block="ANSWER",pack="my-pack"} 1.0' in metrics
        forged = http.post(
            "/review/s1/1",
            data={"action": "claim", "by": "x"},
            headers={"Origin": "http://evil.test"},
        )
        assert forged.status_code == 403


def resolved_sha(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def test_the_page_and_the_routes_need_the_token_as_the_api_does(tmp_path: Path) -> None:
    make_pack(tmp_path)
    token = tmp_path / "token"
    token.write_text("review-token-Xy7\n", encoding="utf-8")
    with running_server(tmp_path, "--pack", "./my-pack", "--token-file", str(token)) as server:
        for path in ("/review", "/review/s1/1", "/v1/reviews", "/v1/reviews/s1/1"):
            assert httpx.get(server.url + path).status_code == 401, path
        bearer = {"Authorization": "Bearer review-token-Xy7"}
        assert httpx.get(server.url + "/review", headers=bearer).status_code == 200
        assert httpx.get(server.url + "/v1/reviews/s1/1", headers=bearer).status_code == 404
        spec = httpx.get(server.url + "/openapi.json", headers=bearer).json()
        assert {
            "/v1/reviews",
            "/v1/reviews/{session}/{review}",
            "/v1/reviews/{session}/{review}/claim",
            "/v1/reviews/{session}/{review}/edit",
        } <= set(spec["paths"])
        assert "/review" not in spec["paths"]  # the page is not part of the API
