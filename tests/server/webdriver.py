"""Headless Chromium driven through chromedriver's W3C WebDriver protocol (plain HTTP and
JSON, spoken here with httpx), so a slow test can have a browser sign in, type into a form
and submit it as a person would, with no browser-automation package to install.
chromedriver listens on a free loopback port and is ended by its PID."""

from __future__ import annotations

import base64
import contextlib
import shutil
import subprocess
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import httpx
from chromium import CHROMIUM, HEADLESS
from server_process import end_process, free_port

CHROMEDRIVER = shutil.which("chromedriver")
MISSING = (
    None
    if CHROMIUM and CHROMEDRIVER
    else " and ".join(
        n for n, f in (("chromium", CHROMIUM), ("chromedriver", CHROMEDRIVER)) if not f
    )
    + " not installed (apt-get install chromium chromium-driver)"
)
"""Why a browser test cannot run here, or None when it can."""

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"
"""The key under which the W3C protocol returns an element's reference."""
TAB, ENTER = "\ue004", "\ue007"
"""The protocol's codes of the Tab and Enter keys."""

READY = "return document.readyState"
"""The script that says whether the page has finished loading."""

ARGS = [*HEADLESS, "--window-size=1200,1600"]


class WebDriverFailed(AssertionError):
    """chromedriver refused a command: the command and its error, for the test's report."""


class Browser:
    """One WebDriver session: navigation, elements found by CSS selector, typing, clicks,
    keys sent to whatever has the focus, and what the browser shows."""

    def __init__(self, http: httpx.Client, session: str) -> None:
        self.http = http
        self.session = session

    def _call(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        answer = self.http.request(method, f"/session/{self.session}{path}", json=body)
        value = answer.json().get("value")
        if answer.status_code != 200:
            raise WebDriverFailed(f"{method} {path}: {value}")
        return value

    def go(self, url: str) -> None:
        self._call("POST", "/url", {"url": url})

    @property
    def url(self) -> str:
        return str(self._call("GET", "/url"))

    @property
    def source(self) -> str:
        """The document as the browser parsed it."""
        return str(self._call("GET", "/source"))

    def find(self, css: str) -> str:
        found = self._call("POST", "/element", {"using": "css selector", "value": css})
        return str(found[ELEMENT])

    def text(self, element: str) -> str:
        return str(self._call("GET", f"/element/{element}/text"))

    def text_at(self, css: str) -> str:
        return self.text(self.find(css))

    def value(self, element: str) -> str:
        return str(self._call("GET", f"/element/{element}/property/value"))

    def attribute(self, element: str, name: str) -> str | None:
        found = self._call("GET", f"/element/{element}/attribute/{name}")
        return None if found is None else str(found)

    def label(self, element: str) -> str:
        """The element's accessible name, as the browser's accessibility tree computes it."""
        return str(self._call("GET", f"/element/{element}/computedlabel"))

    def role(self, element: str) -> str:
        return str(self._call("GET", f"/element/{element}/computedrole"))

    def clear(self, element: str) -> None:
        self._call("POST", f"/element/{element}/clear", {})

    def type(self, element: str, text: str) -> None:
        """Keys typed into the element (a newline is the Enter key)."""
        self._call("POST", f"/element/{element}/value", {"text": text})

    def click(self, element: str) -> None:
        self._call("POST", f"/element/{element}/click", {})

    def click_to_load(self, element: str, timeout: float = 20) -> None:
        """A click on a link or a submit button, returning once the page it loads is
        there. chromedriver may answer the click before the navigation starts, so a
        find right after it could read the old page."""
        self._load(lambda: self.click(element), timeout)

    def press_to_load(self, key: str, timeout: float = 20) -> None:
        """A key (Enter on a submit button) that loads a page, as ``click_to_load``."""
        self._load(lambda: self.press(key), timeout)

    def _load(self, action: Callable[[], None], timeout: float) -> None:
        old = self.find("html")
        action()
        deadline = time.monotonic() + timeout
        while self._still_there(old):
            if time.monotonic() > deadline:
                raise WebDriverFailed(f"no page loaded within {timeout} s of the action")
            time.sleep(0.05)
        while not self._loaded():
            if time.monotonic() > deadline:
                raise WebDriverFailed(f"the page did not finish loading within {timeout} s")
            time.sleep(0.05)

    def _still_there(self, element: str) -> bool:
        """Whether ``element`` still belongs to the page shown. Mid-navigation chromedriver
        says so in more than one way (a stale element, a node that "does not belong to the
        document"): any refusal to read it means the old document is gone."""
        try:
            self._call("GET", f"/element/{element}/name")
        except WebDriverFailed:
            return False
        return True

    def _loaded(self) -> bool:
        """Whether the page shown has finished loading (a script may fail mid-navigation)."""
        try:
            return bool(
                self._call("POST", "/execute/sync", {"script": READY, "args": []}) == "complete"
            )
        except WebDriverFailed:
            return False

    def focused(self) -> str:
        return str(self._call("GET", "/element/active")[ELEMENT])

    def press(self, key: str) -> None:
        """One key pressed and released on whatever has the focus, as a keyboard does."""
        keys = [{"type": "keyDown", "value": key}, {"type": "keyUp", "value": key}]
        self._call("POST", "/actions", {"actions": [{"type": "key", "id": "kb", "actions": keys}]})

    def screenshot(self, where: Path) -> bytes:
        png = base64.b64decode(self._call("GET", "/screenshot"))
        where.write_bytes(png)
        return png


@contextmanager
def chromium_browser(folder: Path, timeout: float = 60) -> Iterator[Browser]:
    """chromedriver on a free loopback port and one headless Chromium session (a profile
    of its own in a temporary folder); the session ended, then chromedriver by its PID."""
    assert CHROMIUM is not None and CHROMEDRIVER is not None, MISSING
    port = free_port()
    log = folder / f"chromedriver-{port}.log"
    with open(log, "wb") as sink:
        process = subprocess.Popen(
            [CHROMEDRIVER, f"--port={port}"],
            stdout=sink,
            stderr=subprocess.STDOUT,
        )
    profile = tempfile.mkdtemp(prefix="chromium-profile-", dir=folder)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=timeout) as http:
            _wait_ready(http, process, log, timeout)
            options = {"binary": CHROMIUM, "args": [*ARGS, f"--user-data-dir={profile}"]}
            capabilities = {"browserName": "chrome", "goog:chromeOptions": options}
            made = http.post("/session", json={"capabilities": {"alwaysMatch": capabilities}})
            if made.status_code != 200:
                raise WebDriverFailed(f"no browser session: {made.text}")
            session = made.json()["value"]["sessionId"]
            try:
                yield Browser(http, session)
            finally:
                with contextlib.suppress(httpx.TransportError):  # chromedriver ended: killed below
                    http.delete(f"/session/{session}")  # Chromium ends with its session
    finally:
        end_process(process)
        shutil.rmtree(profile, ignore_errors=True)


def _wait_ready(
    http: httpx.Client, process: subprocess.Popen[bytes], log: Path, timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while True:
        if process.poll() is not None:
            raise AssertionError(f"chromedriver ended ({process.returncode}):\n{log.read_text()}")
        try:
            if http.get("/status", timeout=2).json()["value"]["ready"]:
                return
        except (httpx.TransportError, ValueError, KeyError):
            pass
        if time.monotonic() > deadline:
            raise AssertionError(f"chromedriver did not answer in {timeout} s:\n{log.read_text()}")
        time.sleep(0.1)
