"""The review page end to end: a real `rules serve` on 127.0.0.1 with a token, a session
that reaches NEEDS_HUMAN through the session route, and headless Chromium driven through
chromedriver (tests/server/webdriver.py) as a person would: signed in through the page's
form, the review opened from the queue, a screenshot kept under the test's folder, the
draft checked and refused, the corrected output typed into the editor, checked, and
submitted from the keyboard. Then: the review resolved, the item's final decision the
edited output, `rules log` (JSON and markdown) naming who resolved it and when, the next
repair prompt of the block carrying the reviewed example, the queue's figures in /metrics.
And the page as a screen reader and a keyboard meet it (the parsed page's landmarks,
headings and labels; the browser's tab order and accessible names), with a model's
`<script>` shown as text."""

from __future__ import annotations

import hashlib
import json
from html.parser import HTMLParser
from pathlib import Path

import httpx
import pytest
from server_process import running_server
from test_reviews import BAD, EDITED, NONCE, make_pack
from webdriver import ENTER, MISSING, TAB, Browser, chromium_browser

from conftest import run_script, script

pytestmark = pytest.mark.slow

BEARER = {"Authorization": "Bearer page-token-Qm4"}
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


def rules_log(folder: Path, *args: str) -> str:
    done = run_script(script("rules"), "log", "--session", "sessions/s1", *args, cwd=folder)
    assert done.returncode == 0, done.stderr
    return done.stdout.decode()


def png_size(png: bytes) -> tuple[int, int]:
    """A PNG's width and height, read from its IHDR chunk (which comes first)."""
    assert png.startswith(b"\x89PNG\r\n\x1a\n") and png[12:16] == b"IHDR"
    return int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")


def tab_order(browser: Browser) -> list[tuple[str, str, str]]:
    """Every stop of the Tab key from the top of the page, once round: each control's id
    (or its button's value, or its tag), its role and its accessible name as the browser's
    accessibility tree computes them."""
    stops: list[tuple[str, str, str]] = []
    for _ in range(40):
        browser.press(TAB)
        focused = browser.focused()
        name = browser.attribute(focused, "id") or browser.attribute(focused, "value") or ""
        stop = (name, browser.role(focused), browser.label(focused))
        if stop in stops:
            return stops
        if stop[1] not in ("none", "generic", "document"):  # the page itself between rounds
            stops.append(stop)
    raise AssertionError(f"the Tab key never came round: {stops}")


@pytest.mark.skipif(MISSING is not None, reason=MISSING or "")
def test_a_person_edits_the_output_in_the_page_and_the_session_learns_it(tmp_path: Path) -> None:
    make_pack(tmp_path, "\nsession:\n  keep_outputs: true\n")
    token = tmp_path / "token"
    token.write_text("page-token-Qm4\n", encoding="utf-8")
    with (
        running_server(tmp_path, "--pack", "./my-pack", "--token-file", str(token)) as server,
        httpx.Client(base_url=server.url, timeout=60, headers=BEARER) as http,
    ):
        first = http.post("/v1/sessions/s1/outputs", json=OUTPUT).json()
        second = http.post("/v1/sessions/s1/outputs", json=OUTPUT).json()
        assert (first["decision"]["action"], first["review"]) == ("REPAIR", None)
        assert second["decision"]["action"] == "NEEDS_HUMAN"
        assert second["review"] == {"id": 1, "state": "open", "url": "/v1/reviews/s1/1"}
        assert http.get("/v1/reviews/s1/1").json()["state"] == "open"
        assert [r["id"] for r in http.get("/v1/reviews").json()["reviews"]] == [1]

        with chromium_browser(tmp_path) as browser:
            # a browser sends no bearer header: the page asks it to sign in, and it does
            browser.go(f"{server.url}/review/s1/1")
            assert "sign in at /review/sign-in" in browser.source
            browser.go(f"{server.url}/review/sign-in")
            field = browser.find("#token")
            assert (browser.role(field), browser.label(field)) == (
                "textbox",
                "Server token (the contents of the server's --token-file)",
            )
            browser.type(field, "page-token-Qm4")
            browser.click_to_load(browser.find("button[type=submit]"))
            assert browser.url == f"{server.url}/review"  # the queue, signed in
            check_accessible(Page(browser.source))
            browser.click_to_load(browser.find('a[href="/review/s1/1"]'))  # "Review 1" in the queue
            assert browser.url == f"{server.url}/review/s1/1"

            # the page as Chromium draws it (kept in tmp_path) and as it parsed it
            png = browser.screenshot(tmp_path / "review.png")
            width, height = png_size(png)
            assert width >= 800 and height >= 600 and len(png) > 20_000, (width, height)
            dom = browser.source
            page = Page(dom)
            check_accessible(page)
            assert "<script>alert(1)</script>" not in dom  # escaped: never an element
            assert sum("<script>alert(1)</script>" in text for text in page.pre) == 2  # as text
            assert [a.get("name") for a in page.named("textarea")] == ["output"]
            [form] = page.named("form")
            assert (form["method"], form["action"]) == ("post", "/review/s1/1")

            # by keyboard alone: a skip link first, then the form's controls in reading
            # order, each with the role and name a screen reader announces
            stops = tab_order(browser)
            assert stops[0] == ("", "link", "Skip to the review"), stops
            form_stops = [s for s in stops if s[1] != "link"]
            assert form_stops == [
                ("by", "textbox", "Your name (recorded with the decision)"),
                ("output", "textbox", "Corrected output (checked against the contract of "
                 "block ANSWER before it is accepted)"),
                ("reason", "textbox", "Reason (needed to reject; optional otherwise)"),
                ("check", "button", "Check against the contract"),
                ("edit", "button", "Submit the edited output"),
                ("approve", "button", "Approve the last output"),
                ("reject", "button", "Reject"),
                ("claim", "button", "Claim it"),
            ]  # fmt: skip

            # the editor holds the failing output; checked, then submitted: both refused
            editor = browser.find("#output")
            assert browser.value(editor) == BAD
            browser.type(browser.find("#by"), "rita")
            browser.click_to_load(browser.find('button[value="check"]'))
            verdict = browser.text_at('[data-figure="review:check"]')
            assert verdict.startswith("The text fails the contract: PARSE_ERROR"), verdict
            browser.click_to_load(browser.find('button[value="edit"]'))
            refused = browser.text_at("p[role=status]")
            assert "does not pass the contract of block ANSWER" in refused, refused
            assert http.get("/v1/reviews/s1/1").json()["state"] == "open"

            # the corrected output typed into the editor and checked: it passes
            editor = browser.find("#output")
            browser.clear(editor)
            browser.type(editor, EDITED)
            browser.click_to_load(browser.find('button[value="check"]'))
            verdict = browser.text_at('[data-figure="review:check"]')
            assert verdict == "The text passes the contract (pass).", verdict
            assert browser.value(browser.find("#output")) == EDITED  # the draft kept
            assert browser.value(browser.find("#by")) == "rita"

            # and submitted from the keyboard: Tab to the button, Enter
            for _ in range(len(stops)):
                if browser.attribute(browser.focused(), "value") == "edit":
                    break
                browser.press(TAB)
            assert browser.label(browser.focused()) == "Submit the edited output"
            browser.press_to_load(ENTER)
            assert browser.url == f"{server.url}/review/s1/1"  # redirected once resolved
            state = browser.text_at('[data-figure="review:state"]')
            assert state.startswith("resolved (edited by rita at "), state
            assert "Submit the edited output" not in browser.source
            browser.screenshot(tmp_path / "resolved.png")

        resolved = http.get("/v1/reviews/s1/1").json()
        assert (resolved["state"], resolved["resolution"], resolved["resolved_by"]) == (
            "resolved",
            "edited",
            "rita",
        )
        assert resolved["output"] == EDITED

        # the item's final decision is the edited output, and the log says who and when
        rows = json.loads(rules_log(tmp_path, "--format", "json"))
        final = rows[-1]
        assert (final["action"], final["rule"], final["status"], final["final"]) == (
            "PROCEED",
            "review:edited",
            "pass",
            True,
        )
        said = f"edited by rita at {resolved['resolved_at']} (review 1)"
        assert final["reason"] == said
        assert final["output_sha256"] == hashlib.sha256(EDITED.encode()).hexdigest()
        assert f"- **ANSWER:** PROCEED: {said}" in rules_log(tmp_path)  # the markdown view

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
