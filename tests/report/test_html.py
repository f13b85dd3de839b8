"""`rules report` and `rules backtest --format html`: self-contained pages, checked in a
headless Chromium when one is installed."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest
from chromium import CHROMIUM, HEADLESS

from conftest import run_cli

REPO = Path(__file__).resolve().parents[2]
FAKE_MODEL = REPO / "examples" / "fake_model.py"
FIGURE = re.compile(r'data-figure="([^"]+)">([^<]*)<')


@pytest.fixture
def session(tmp_path: Path) -> Path:
    folder = tmp_path / "session"
    for nonce, criterion in [("4F2C9A", "AC1"), ("4F2C9B", "AC2"), ("4F2C9C", "AC3")]:
        result = run_cli(
            "run",
            "--pack",
            "sentinel",
            "--block",
            "VERDICT",
            "--nonce",
            nonce,
            "--var",
            f"criterion={criterion}",
            "--prompt",
            str(Path(__file__).parents[1] / "fixtures" / "models" / "prompt.txt"),
            "--session",
            str(folder),
            "--",
            sys.executable,
            str(FAKE_MODEL),
        )
        assert result.exit_code == 0, result.output
    return folder


def _expected(session: Path) -> dict[str, str]:
    """The page's figures, computed here from `rules log --format json`."""
    rows = json.loads(run_cli("log", "--session", str(session), "--format", "json").stdout)
    figures = {
        "session:attempts:value": str(len(rows)),
        "session:items:value": str(len({(r["block"], r["item"]) for r in rows})),
    }
    attempts = Counter(r["attempt"] for r in rows)
    accepted = Counter(r["attempt"] for r in rows if r["status"] in ("pass", "warn"))
    for n in attempts:
        figures[f"by_attempt:{n}:attempts"] = str(attempts[n])
        figures[f"by_attempt:{n}:accepted"] = str(accepted[n])
    for failure, count in Counter(r["failure_type"] for r in rows if r["failure_type"]).items():
        figures[f"failures:{failure}:attempts"] = str(count)
    for n, row in enumerate(rows):
        if row["example_tier"]:
            tier = row["example_tier"]
            used = f"tiers:{tier}:used"
            figures[used] = str(int(figures.get(used, "0")) + 1)
            following = [
                r for r in rows[n + 1 :] if (r["block"], r["item"]) == (row["block"], row["item"])
            ]
            won = f"tiers:{tier}:succeeded"
            accepted_next = bool(following) and following[0]["status"] in ("pass", "warn")
            figures[won] = str(int(figures.get(won, "0")) + accepted_next)
    runs: dict[tuple[str, str, int], list[dict[str, object]]] = {}
    for r in rows:
        runs.setdefault((r["block"], r["item"], r["run"]), []).append(r)
    figures["session:runs:value"] = str(len(runs))
    for action, count in Counter(
        found[-1]["action"] if found[-1]["final"] else "open" for found in runs.values()
    ).items():
        figures[f"outcomes:{action}:runs"] = str(count)
    for n, count in Counter(len(found) for found in runs.values()).items():
        figures[f"attempts_per_run:{n}:runs"] = str(count)
    accepted = [f for f in runs.values() if f[-1]["final"] and f[-1]["action"] == "PROCEED"]
    figures["cost:repair and retry attempts:value"] = str(len(rows) - len(runs))
    figures["cost:runs accepted after a failure:value"] = str(
        sum(1 for f in accepted if any(r["failure_type"] for r in f))
    )
    figures["cost:example tokens in repair prompts:value"] = str(
        sum(int(r["example_tokens"] or 0) for r in rows)
    )
    figures["cost:attempts per accepted run"] = (
        f"{sum(len(f) for f in accepted) / len(accepted):.2f}" if accepted else "-"
    )
    # `rules run` records each call's tokens (estimated here: the fake model reports none)
    for kind in {str(r["kind"]) for r in rows}:
        of = [r for r in rows if r["kind"] == kind]
        figures[f"usage:{kind}:attempts"] = str(len(of))
        figures[f"usage:{kind}:tokens in"] = str(sum(int(r["tokens_in"] or 0) for r in of))
        figures[f"usage:{kind}:tokens out"] = str(sum(int(r["tokens_out"] or 0) for r in of))
        figures[f"usage:{kind}:estimated"] = str(sum(bool(r["tokens_estimated"]) for r in of))
        figures[f"usage:{kind}:cost"] = f"{sum(float(r['cost'] or 0) for r in of):.6f}"
    return figures


def test_session_page_is_self_contained_and_shows_the_log_figures(
    session: Path, tmp_path: Path
) -> None:
    target = tmp_path / "report.html"
    result = run_cli("report", "--session", str(session), "-o", str(target))
    assert result.exit_code == 0, result.output
    html = target.read_text(encoding="utf-8")
    # repair prompts now carry an example, so the page also shows example tiers (issue 36);
    # their figures come from the ledger's prompt log, not from `rules log` rows
    shown = {k: v for k, v in FIGURE.findall(html) if not k.startswith("tiers:")}
    assert shown == {k: v for k, v in _expected(session).items() if not k.startswith("tiers:")}
    assert (
        "<script" not in html
        and "http://" not in html.replace('xmlns="http://www.w3.org/2000/svg"', "")
        and "https://" not in html
    )
    assert html.count('class="a fail"') == 3 and "#2 pass &rarr; PROCEED" in html


def _rows(count: int, items: int, seed: int) -> list[dict[str, object]]:
    """Ledger-like attempt rows, items interleaved, some with example tiers."""
    import random

    chance = random.Random(seed)
    attempts: Counter[str] = Counter()
    rows = []
    for n in range(count):
        item = f"i{chance.randrange(items)}"
        attempts[item] += 1
        status = chance.choice(["pass", "warn", "fail", "fail"])
        rows.append(
            {
                "id": n + 1,
                "block": chance.choice(["A", "B"]),
                "item": item,
                "attempt": attempts[item],
                "status": status,
                "failure_type": "PARSE_ERROR" if status == "fail" else None,
                "example_tier": chance.choice([None, None, "full", "minimal"]),
                "error": None,
                "action": "PROCEED",
            }
        )
    return rows


def test_tier_success_is_the_next_attempt_of_the_item_accepted() -> None:
    from engine.session.summary import session_summary

    for seed in range(20):
        rows = _rows(300, 25, seed)
        used: Counter[str] = Counter()
        succeeded: Counter[str] = Counter()
        for n, row in enumerate(rows):
            tier = row["example_tier"]
            if not isinstance(tier, str):
                continue
            used[tier] += 1
            following = [
                r for r in rows[n + 1 :] if (r["block"], r["item"]) == (row["block"], row["item"])
            ]
            succeeded[tier] += bool(following and following[0]["status"] in ("pass", "warn"))
        tiers = session_summary(rows).figures["tiers"]
        assert tiers == {t: {"used": used[t], "succeeded": succeeded[t]} for t in used}


def test_a_large_session_draws_the_first_items_and_counts_them_all() -> None:
    from engine.report.html import session as session_page
    from engine.session.summary import TIMELINE_ATTEMPTS, TIMELINE_ITEMS

    rows = _rows(4 * TIMELINE_ITEMS, 2 * TIMELINE_ITEMS, 1)
    one_item = [dict(rows[0], attempt=n + 1, id=n + 1) for n in range(TIMELINE_ATTEMPTS + 7)]
    html = session_page(iter(rows), "big")
    figures = dict(FIGURE.findall(html))
    items = {(r["block"], r["item"]) for r in rows}
    assert figures["session:attempts:value"] == str(len(rows))
    assert figures["session:items:value"] == str(len(items))
    assert html.count('<div class="tl">') == TIMELINE_ITEMS
    assert f"The first {TIMELINE_ITEMS} of {len(items)} runs are drawn" in html
    long = session_page(one_item, "one item")
    assert long.count('class="a ') == TIMELINE_ATTEMPTS and "and 7 more" in long


def test_backtest_html_has_the_flip_matrix(tmp_path: Path) -> None:
    records = tmp_path / "r.jsonl"
    line = {
        "id": 1,
        "block": "VERDICT",
        "nonce": "4F2C9A",
        "vars": {"criterion": "AC1"},
        "text": '<<<VERDICT:V1:AC1:NONCE=4F2C9A>>>\nANSWER=YES\nREASON="ok"\n'
        "<<<END_VERDICT:AC1:NONCE=4F2C9A>>>",
    }
    records.write_text(json.dumps(line) + "\n")
    strict = tmp_path / "strict"
    shutil.copytree(REPO / "rules" / "sentinel", strict)
    pack_file = strict / "pack.yaml"
    pack_file.write_text(
        pack_file.read_text().replace(
            "{check: non_empty, field: REASON}",
            "{check: pattern, field: REASON, pattern: '^.{5,}$', message: REASON too short}",
        )
    )
    out = tmp_path / "flips.html"
    result = run_cli(
        "backtest",
        "--pack",
        str(strict),
        "--baseline",
        "sentinel",
        "--format",
        "html",
        "-o",
        str(out),
        str(records),
    )
    assert result.exit_code == 0, result.output
    html = out.read_text()
    assert '<span data-figure="total">1</span>' in html
    assert "<h2>Verdict flips</h2>" in html and "<h2>Flipped records: 1</h2>" in html
    assert "REASON too short" in html


def test_report_of_a_folder_without_ledger_is_a_usage_error(tmp_path: Path) -> None:
    result = run_cli("report", "--session", str(tmp_path))
    assert result.exit_code == 2 and "not a session folder" in result.stderr


@pytest.mark.slow
@pytest.mark.skipif(
    CHROMIUM is None,
    reason="Chromium is not installed (apt-get install -y "
    "chromium); the page is checked without it by the other tests",
)
def test_session_page_renders_in_chromium(session: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    run_cli("report", "--session", str(session), "-o", str(page))
    base = [
        str(CHROMIUM),
        *HEADLESS,
        f"--user-data-dir={tmp_path / 'profile'}",
        "--enable-logging=stderr",
        "--v=0",
    ]
    shot = tmp_path / "report.png"
    screenshot = subprocess.run(
        [*base, f"--screenshot={shot}", "--window-size=1200,1600", page.as_uri()],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert screenshot.returncode == 0, screenshot.stderr
    assert shot.stat().st_size > 10_000
    console = [
        line for line in screenshot.stderr.splitlines() if "CONSOLE" in line or "Uncaught" in line
    ]
    assert console == []
    dom = subprocess.run(
        [*base, "--dump-dom", page.as_uri()], capture_output=True, text=True, timeout=120
    )
    assert dom.returncode == 0, dom.stderr
    assert dict(FIGURE.findall(dom.stdout)) == _expected(session)
