"""benchmarks/serve.py runs end to end (a short run: the figures are docs/performance.md's):
every route it compares answers, and it reports what the targets are judged on."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest.importorskip("fastapi", reason="the server extra is not installed")

from conftest import REPO

pytestmark = pytest.mark.slow


def test_a_short_benchmark_run_reports_every_route() -> None:
    done = subprocess.run(
        [sys.executable, str(REPO / "benchmarks" / "serve.py"), "--requests", "40",
         "--clients", "1,8", "--subprocesses", "2", "--format", "json"],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    report = json.loads(done.stdout)
    assert sorted(report["server"]) == ["1", "8"]
    assert report["server"]["8"]["count"] == 40
    for row in [*report["server"].values(), report["in_process"], *report["subprocess"].values()]:
        assert row["decisions_per_s"] > 0
        assert 0 < row["p50_ms"] <= row["p99_ms"]
    assert report["subprocess"]["1"]["count"] == 2
    shadow = report["shadow"]  # live p99 without and with a candidate 15 times slower
    assert shadow["candidate_slowdown"] >= 15
    assert shadow["p99_ms_without"] > 0 and shadow["p99_ms_with"] > 0
    assert set(shadow) >= {"ratio", "met", "dropped"}
    assert set(report["targets"]) == {
        "p99_ms_at_8_clients", "p99_met", "ratio_to_subprocess_at_8_clients", "ratio_met",
    }  # fmt: skip
