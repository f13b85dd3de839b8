"""`rules report` as the page a team shares: items by their names (not their keys' raw
JSON), the pack and its revision, when, how each run ended (runs by final action),
attempts per run and what repairs cost; drawn by a headless Chromium to a PNG, with nothing
on the page that could load from the network."""

from __future__ import annotations

import html as markup
import json
import re
import subprocess
from collections import Counter
from pathlib import Path
from typing import Any

import pytest
from chromium import CHROMIUM, HEADLESS

from conftest import run_script, script

FIGURE = re.compile(r'data-figure="([^"]+)">([^<]*)<')
BAD = (
    '<<<ANSWER:V1:Q1:NONCE=4F2C9A>>>\nDECISION="YES"\nREASON="it holds"\n'
    "<<<END_ANSWER:Q1:NONCE=4F2C9A>>>\n"
)
REPAIRED = (
    "if grep -q 'broke its contract'; then cat my-pack/tests/ANSWER/good.txt; else cat out.txt; fi"
)
ANSWER = ("--pack", "./my-pack", "--block", "ANSWER", "--var", "question=Q1")


def rules(folder: Path, *args: str) -> int:
    return run_script(script("rules"), *args, cwd=folder).returncode


@pytest.fixture
def session(tmp_path: Path) -> Path:
    """A session of 4 runs over 3 items: an item run twice (each repaired once), an item
    named by the caller, and a run whose model command failed (its stderr kept)."""
    assert rules(tmp_path, "init", "my-pack") == 0
    (tmp_path / "out.txt").write_text(BAD)
    nonce = ("--nonce", "4F2C9A")
    for _ in range(2):
        assert rules(tmp_path, "run", *ANSWER, *nonce, "--", "sh", "-c", REPAIRED) == 0
    assert (
        rules(tmp_path, "run", *ANSWER, *nonce, "--item", "ticket-42", "--", "sh", "-c", REPAIRED)
        == 0
    )
    failing = 'echo "ERROR: OPENAI_API_KEY not set" >&2; exit 1'
    assert rules(tmp_path, "run", *ANSWER, "--nonce", "5B3D1E", "--", "sh", "-c", failing) == 1
    return tmp_path


def logged(folder: Path) -> list[dict[str, Any]]:
    done = run_script(script("rules"), "log", "--format", "json", cwd=folder)
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, Any]] = json.loads(done.stdout)
    return rows


def page(folder: Path) -> str:
    done = run_script(script("rules"), "report", "-o", "report.html", cwd=folder)
    assert done.returncode == 0, done.stderr
    return (folder / "report.html").read_text(encoding="utf-8")


def visible(html: str) -> str:
    """The page's text as a reader sees it (tags dropped, entities read)."""
    return markup.unescape(re.sub(r"<[^>]+>", " ", html))


@pytest.mark.heavy
def test_the_page_names_items_packs_times_and_how_runs_ended(session: Path) -> None:
    rows = logged(session)
    html = page(session)
    text = visible(html)
    # items by their names, never their keys' raw JSON
    assert '"nonce"' not in text and '{"item"' not in text and "&#34;" not in html
    for name in ("nonce 4F2C9A, question=Q1", "ticket-42", "nonce 5B3D1E, question=Q1"):
        assert name in text
    # the pack, its version and revision; when the session ran
    assert {r["revision"] for r in rows} == {rows[0]["revision"]}
    assert f"my-pack 0.1.0 {rows[0]['revision']} {len(rows)}" in " ".join(text.split())
    assert rows[0]["ts"] in text and rows[-1]["ts"] in text
    # the runs apart, each with how it ended
    assert "ANSWER, run 1, started" in text and "ANSWER, run 2, started" in text
    runs: dict[tuple[str, int], list[dict[str, Any]]] = {}
    for row in rows:
        runs.setdefault((row["item"], row["run"]), []).append(row)
    outcomes = Counter(attempts[-1]["action"] for attempts in runs.values())
    per_run = Counter(len(attempts) for attempts in runs.values())
    figures = dict(FIGURE.findall(html))
    assert figures["session:runs:value"] == str(len(runs)) == "4"
    assert figures["session:items:value"] == "3"
    assert (
        {k: v for k, v in figures.items() if k.startswith("outcomes:")}
        == {f"outcomes:{action}:runs": str(n) for action, n in outcomes.items()}
        == {"outcomes:PROCEED:runs": "3", "outcomes:NEEDS_HUMAN:runs": "1"}
    )
    assert {k: v for k, v in figures.items() if k.startswith("attempts_per_run:")} == {
        f"attempts_per_run:{n}:runs": str(count) for n, count in per_run.items()
    }
    # what repairs cost: attempts after the first of a run, runs they rescued
    assert figures["cost:repair and retry attempts:value"] == str(len(rows) - len(runs)) == "3"
    assert figures["cost:runs accepted after a failure:value"] == "3"
    assert figures["cost:attempts per accepted run"] == "2.00"
    # the failed command's stderr is on its attempt
    assert "stderr: ERROR: OPENAI_API_KEY not set" in markup.unescape(html)  # its title


@pytest.mark.heavy
def test_the_page_loads_nothing_from_the_network(session: Path) -> None:
    html = page(session)
    without_namespace = html.replace('xmlns="http://www.w3.org/2000/svg"', "")
    assert (
        re.search(
            r"(?i)https?:|//[a-z0-9.-]+\.[a-z]{2,}|\bsrc=|\bhref=|url\(|@import", without_namespace
        )
        is None
    )
    assert "<script" not in html and "<link" not in html and "<img" not in html


@pytest.mark.skipif(
    CHROMIUM is None,
    reason="Chromium is not installed (apt-get install -y chromium; .ci/run installs it): "
    "the page's content is checked without it by the other tests",
)
@pytest.mark.heavy
def test_the_page_renders_in_headless_chromium(session: Path, tmp_path: Path) -> None:
    page(session)
    shot = tmp_path / "report.png"
    done = subprocess.run(
        [
            str(CHROMIUM),
            *HEADLESS,
            f"--user-data-dir={tmp_path / 'profile'}",
            f"--screenshot={shot}",
            "--window-size=1200,1600",
            (session / "report.html").as_uri(),
        ],
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    png = shot.read_bytes()
    assert png.startswith(b"\x89PNG\r\n\x1a\n")
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) == (1200, 1600)
    assert len(png) > 20_000  # a drawn page, not a blank one
