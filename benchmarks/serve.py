"""Benchmark of `rules serve`: decisions per second and latency of a failing 4 KB VERDICT
through ``POST /v1/evaluate`` on loopback, at 1, 8 and 32 concurrent clients.

    python benchmarks/serve.py [--requests N] [--clients 1,8,32] [--workers N]
                               [--subprocesses N] [--format text|json]

Three routes to the same decision (the VERDICT quotes ANSWER: a PARSE_ERROR the sentinel
pack repairs, the input of ``benchmarks/bench.py``'s pipeline latency):

- **server**: a real `rules serve --pack sentinel` process on a free loopback port (ended
  by its PID afterwards); the clients are asyncio connections of this process, each one
  keep-alive HTTP/1.1 connection sending the same prepared request and reading the whole
  answer before the next. ``--requests`` per concurrency level, after a warm-up.
- **in-process** (the limit): the work of the route without HTTP, in one thread:
  ``evaluate`` (the route's use case) with the pack loaded once, the documents made JSON.
- **subprocess**: `rules eval --format json` started per output, the way a non-Python
  orchestrator calls the engine without a server; ``--subprocesses`` runs (bounded: each
  costs a process start), one at a time and 8 at a time.

- **shadow**: the server at 8 clients without `--shadow` and with `--shadow
  sentinel=CANDIDATE`, alternated twice in the same run, where CANDIDATE is the sentinel
  pack made ``--shadow-slowdown`` times slower to judge this output (guards that search the
  output and never match, added until the in-process cost is that many times the live
  decision's): the live p99 with the slow candidate against the live p99 without it
  (target: within 1.2x), and the outputs the shadow dropped.

It prints decisions per second and p50/p99 latency for each, the server's CPU time per
decision (from /proc: what a decision costs whatever else the machine runs; latency on a
shared machine is not the server's alone), and the issue's targets as
met or missed (p99 at most 10 ms with 8 clients; at least 50 times the subprocess route's
decisions per second). It measures; it exits 0 unless a run fails.
"""

from __future__ import annotations

import argparse
import asyncio
import concurrent.futures
import importlib.util
import json
import os
import platform
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent

P99_TARGET_MS = 10.0
RATIO_TARGET = 50.0
SHADOW_TARGET = 1.2


def _bench_module() -> Any:
    spec = importlib.util.spec_from_file_location("bench_inputs", REPO / "benchmarks" / "bench.py")
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules["bench_inputs"] = module
    spec.loader.exec_module(module)
    return module


BENCH = _bench_module()
OUTPUT: str = BENCH.failing_verdict_4k()
REQUEST = {
    "pack": "sentinel",
    "block": "VERDICT",
    "nonce": BENCH.NONCE,
    "vars": {"criterion": BENCH.CRITERION},
    "output": OUTPUT,
}


def percentile(values: list[float], share: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(share * (len(ordered) - 1)))]


def summary(latencies: list[float], wall: float) -> dict[str, float]:
    return {
        "decisions_per_s": len(latencies) / wall,
        "p50_ms": percentile(latencies, 0.50) * 1e3,
        "p99_ms": percentile(latencies, 0.99) * 1e3,
        "count": len(latencies),
    }


# ------------------------------------------------------------------------------ the server


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port: int = probe.getsockname()[1]
        return port


def start_server(folder: Path, workers: int, *extra: str) -> tuple[subprocess.Popen[bytes], int]:
    port = _free_port()
    log = open(folder / "server.log", "wb")  # noqa: SIM115 - the server's lifetime
    process = subprocess.Popen(
        [sys.executable, "-m", "engine", "serve", "--pack", "sentinel", "--port", str(port),
         "--sessions-dir", str(folder / "sessions"), "--workers", str(workers), *extra],
        stdout=log,
        stderr=subprocess.STDOUT,
        cwd=folder,
    )  # fmt: skip
    deadline = time.monotonic() + 60
    while True:
        if process.poll() is not None:
            raise SystemExit(f"rules serve ended: {(folder / 'server.log').read_text()}")
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2):
                return process, port
        except OSError:
            if time.monotonic() > deadline:
                stop_server(process)
                raise SystemExit("rules serve did not answer in 60 s") from None
            time.sleep(0.1)


def stop_server(process: subprocess.Popen[bytes]) -> None:
    if process.poll() is None:
        os.kill(process.pid, signal.SIGTERM)
        try:
            process.wait(timeout=20)
        except subprocess.TimeoutExpired:
            os.kill(process.pid, signal.SIGKILL)
            process.wait(timeout=20)


def _prepared_request(port: int) -> bytes:
    body = json.dumps(REQUEST).encode()
    head = (
        f"POST /v1/evaluate HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        f"Content-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n"
    )
    return head.encode() + body


async def _client(port: int, request: bytes, count: int, latencies: list[float]) -> None:
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        for _ in range(count):
            started = time.perf_counter()
            writer.write(request)
            status = await reader.readline()
            length = 0
            while True:
                line = await reader.readline()
                if line in (b"\r\n", b""):
                    break
                name, _, value = line.partition(b":")
                if name.strip().lower() == b"content-length":
                    length = int(value)
            body = await reader.readexactly(length)
            latencies.append(time.perf_counter() - started)
            if b" 200 " not in status:
                raise SystemExit(f"the server answered {status!r}: {body[:300]!r}")
    finally:
        writer.close()


def cpu_seconds(pid: int) -> float | None:
    """The CPU time (user + system) process ``pid`` has used; None off Linux."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return None
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


async def _level(port: int, clients: int, total: int, pid: int = 0) -> dict[str, float]:
    request = _prepared_request(port)
    each = max(1, total // clients)
    warm: list[float] = []
    await asyncio.gather(*(_client(port, request, 20, warm) for _ in range(clients)))
    latencies: list[float] = []
    cpu_before = cpu_seconds(pid)
    started = time.perf_counter()
    await asyncio.gather(*(_client(port, request, each, latencies) for _ in range(clients)))
    result = summary(latencies, time.perf_counter() - started)
    cpu_after = cpu_seconds(pid)
    if cpu_before is not None and cpu_after is not None:
        # what a decision costs the server, whatever else the machine runs meanwhile
        result["server_cpu_ms"] = (cpu_after - cpu_before) / len(latencies) * 1e3
    return result


def check_answer(port: int) -> str:
    request = urllib.request.Request(
        f"http://127.0.0.1:{port}/v1/evaluate",
        data=json.dumps(REQUEST).encode(),
        headers={"content-type": "application/json"},
    )
    with urllib.request.urlopen(request, timeout=30) as answer:
        action: str = json.load(answer)["decision"]["action"]
    if action != "REPAIR":
        raise SystemExit(f"the failing 4 KB VERDICT was decided {action}, expected REPAIR")
    return action


# -------------------------------------------------------------------------------- shadow


def _live_and_candidate_costs(candidate_folder: Path) -> float:
    """How many times the live decision's in-process cost judging this output under the
    candidate costs (the shadow process's work per output)."""
    from engine.backtest.shadow import LiveOutput, judge_candidate
    from engine.pack.inputs import OutputInput
    from engine.pack.loaded import load_pack
    from engine.session.evaluation import EvaluationRequest, evaluate

    live, candidate = load_pack("sentinel"), load_pack(candidate_folder)
    variables, context = live.split_inputs("VERDICT", {}, REQUEST["vars"])
    given = OutputInput("VERDICT", OUTPUT.encode(), BENCH.NONCE, variables, context)
    decided = evaluate(live, EvaluationRequest(given))
    output = LiveOutput(given, 1, (), decided.verdict, decided.decision)

    def timed(work: Any, runs: int = 200) -> float:
        for _ in range(20):
            work()
        started = time.perf_counter()
        for _ in range(runs):
            work()
        return (time.perf_counter() - started) / runs

    return timed(lambda: judge_candidate(candidate, output)) / timed(
        lambda: evaluate(live, EvaluationRequest(given))
    )


def slow_candidate(folder: Path, slowdown: float) -> tuple[Path, float]:
    """The sentinel pack with VERDICT guards that search the output and never match, as
    many as make judging this output ``slowdown`` times the live decision's cost; the
    candidate's folder and its measured slowdown."""
    import shutil

    guards = 16
    while True:
        target = folder / f"sentinel-slow-{guards}"
        shutil.copytree(REPO / "rules" / "sentinel", target)
        pack_file = target / "pack.yaml"
        text = pack_file.read_text(encoding="utf-8")
        anchor = "  VERDICT:\n    on: [PARSE_ERROR, NONCE_MISMATCH, EMPTY_OUTPUT, NOT_TEXT]\n"
        start = text.index(anchor)
        at = text.index("    skip_when:\n", start) + len("    skip_when:\n")
        added = "".join(
            f"      - {{name: never_{n}, when: \"output is search('q{n}z[0-9]{{3}}x$')\", "
            f"reason: never}}\n"
            for n in range(guards)
        )
        pack_file.write_text(text[:at] + added + text[at:], encoding="utf-8")
        measured = _live_and_candidate_costs(target)
        if measured >= slowdown or guards >= 4096:
            return target, measured
        guards = max(guards * 2, int(guards * slowdown / max(measured, 1.0)) + 1)


def dropped_by_shadow(port: int) -> float:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/metrics", timeout=30) as answer:
        text = answer.read().decode()
    return sum(
        float(line.rsplit(" ", 1)[1])
        for line in text.splitlines()
        if line.startswith("rules_shadow_dropped_total{")
    )


def shadow_rows(folder: Path, workers: int, total: int, slowdown: float) -> dict[str, Any]:
    """Live p99 at 8 clients without and with the slow candidate, alternated twice."""
    candidate, measured = slow_candidate(folder, slowdown)
    runs: dict[str, list[dict[str, float]]] = {"without": [], "with": []}
    dropped = 0.0
    for _ in range(2):
        for side in ("without", "with"):
            extra = ("--shadow", f"sentinel={candidate}") if side == "with" else ()
            process, port = start_server(folder, workers, *extra)
            try:
                check_answer(port)
                runs[side].append(asyncio.run(_level(port, 8, total, process.pid)))
                if side == "with":
                    dropped += dropped_by_shadow(port)
            finally:
                stop_server(process)
    without = sum(r["p99_ms"] for r in runs["without"]) / len(runs["without"])
    with_shadow = sum(r["p99_ms"] for r in runs["with"]) / len(runs["with"])
    return {
        "candidate_slowdown": measured,
        "p99_ms_without": without,
        "p99_ms_with": with_shadow,
        "decisions_per_s_without": sum(r["decisions_per_s"] for r in runs["without"]) / 2,
        "decisions_per_s_with": sum(r["decisions_per_s"] for r in runs["with"]) / 2,
        "ratio": with_shadow / without,
        "met": with_shadow / without <= SHADOW_TARGET,
        "dropped": dropped,
    }


# ---------------------------------------------------------------------- the other routes


def in_process(total: int) -> dict[str, float]:
    """The route's work without HTTP: evaluate, decide, the documents as JSON."""
    from engine.pack.inputs import OutputInput
    from engine.pack.loaded import load_pack
    from engine.session.evaluation import EvaluationRequest, evaluate

    pack = load_pack("sentinel")
    data = OUTPUT.encode()

    def once() -> bytes:
        given = OutputInput("VERDICT", data, BENCH.NONCE, REQUEST["vars"])
        evaluated = evaluate(pack, EvaluationRequest(given))
        document = {
            "verdict": evaluated.verdict.to_json(),
            "decision": evaluated.decision.to_json(),
        }
        return json.dumps(document).encode()

    for _ in range(50):
        once()
    latencies = []
    started = time.perf_counter()
    for _ in range(total):
        began = time.perf_counter()
        once()
        latencies.append(time.perf_counter() - began)
    return summary(latencies, time.perf_counter() - started)


def _eval_once(folder: Path) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        [sys.executable, "-m", "engine", "eval", "--pack", "sentinel", "--block", "VERDICT",
         "--nonce", BENCH.NONCE, "--var", f"criterion={BENCH.CRITERION}", "--format", "json"],
        input=OUTPUT.encode(),
        capture_output=True,
        cwd=folder,
        check=False,
    )  # fmt: skip
    elapsed = time.perf_counter() - started
    if done.returncode != 3:  # 3: a repair is due
        raise SystemExit(f"rules eval exited {done.returncode}: {done.stderr.decode()[:300]}")
    return elapsed


def subprocesses(folder: Path, runs: int, parallel: int) -> dict[str, float]:
    _eval_once(folder)  # warm the parse cache
    started = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(parallel) as pool:
        latencies = list(pool.map(lambda _: _eval_once(folder), range(runs)))
    return summary(latencies, time.perf_counter() - started)


# ------------------------------------------------------------------------------------ main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--requests", type=int, default=2000, help="per concurrency level")
    parser.add_argument("--clients", default="1,8,32")
    parser.add_argument("--workers", type=int, default=1, help="rules serve --workers")
    parser.add_argument("--subprocesses", type=int, default=20, help="rules eval runs")
    parser.add_argument(
        "--shadow-slowdown", type=float, default=15.0, help="the candidate's cost, times live"
    )
    parser.add_argument("--no-shadow", action="store_true", help="skip the shadow rows")
    parser.add_argument("--format", choices=["text", "json"], default="text")
    args = parser.parse_args()
    levels = [int(n) for n in args.clients.split(",")]
    results: dict[str, Any] = {
        "python": platform.python_version(),
        "cores": os.cpu_count(),
        "workers": args.workers,
        "server": {},
    }
    with tempfile.TemporaryDirectory(prefix="rules-serve-bench-") as tmp:
        folder = Path(tmp)
        process, port = start_server(folder, args.workers)
        try:
            check_answer(port)
            for clients in levels:
                level = _level(port, clients, args.requests, process.pid)
                results["server"][str(clients)] = asyncio.run(level)
        finally:
            stop_server(process)
        if not args.no_shadow:
            results["shadow"] = shadow_rows(
                folder, args.workers, args.requests, args.shadow_slowdown
            )
        results["in_process"] = in_process(args.requests)
        results["subprocess"] = {
            "1": subprocesses(folder, args.subprocesses, 1),
            "8": subprocesses(folder, args.subprocesses, 8),
        }
    best_subprocess = max(r["decisions_per_s"] for r in results["subprocess"].values())
    eight = results["server"].get("8")
    results["targets"] = {}
    if eight is not None:
        ratio = eight["decisions_per_s"] / best_subprocess
        results["targets"] = {
            "p99_ms_at_8_clients": eight["p99_ms"],
            "p99_met": eight["p99_ms"] <= P99_TARGET_MS,
            "ratio_to_subprocess_at_8_clients": ratio,
            "ratio_met": ratio >= RATIO_TARGET,
        }
    if args.format == "json":
        print(json.dumps(results, indent=2))
        return 0
    print(
        f"failing 4 KB VERDICT, POST /v1/evaluate on loopback; Python {results['python']}, "
        f"{results['cores']} cores, rules serve --workers {args.workers}"
    )
    print(f"{'route':<28}{'decisions/s':>12}{'p50 ms':>9}{'p99 ms':>9}{'server CPU ms':>15}")
    for clients, r in results["server"].items():
        cpu = f"{r['server_cpu_ms']:>15.3f}" if "server_cpu_ms" in r else ""
        print(f"{'server, ' + clients + ' clients':<28}{r['decisions_per_s']:>12.0f}"
              f"{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}{cpu}")  # fmt: skip
    r = results["in_process"]
    print(f"{'in-process (the limit)':<28}{r['decisions_per_s']:>12.0f}"
          f"{r['p50_ms']:>9.2f}{r['p99_ms']:>9.2f}")  # fmt: skip
    for parallel, r in results["subprocess"].items():
        label = f"rules eval, {parallel} at a time"
        print(f"{label:<28}{r['decisions_per_s']:>12.1f}{r['p50_ms']:>9.1f}{r['p99_ms']:>9.1f}")
    shadow = results.get("shadow")
    if shadow:
        for side, label in (("without", "without shadow"), ("with", "with a slow shadow")):
            print(f"{'server, 8, ' + label:<28}{shadow['decisions_per_s_' + side]:>12.0f}"
                  f"{'':>9}{shadow['p99_ms_' + side]:>9.2f}")  # fmt: skip
        print(
            f"shadow: a candidate {shadow['candidate_slowdown']:.1f}x slower than the live "
            f"decision; live p99 with it / without {shadow['ratio']:.2f} (<= {SHADOW_TARGET:g}: "
            f"{'met' if shadow['met'] else 'missed'}); {shadow['dropped']:.0f} outputs dropped "
            "by the shadow"
        )
    targets = results["targets"]
    if targets:
        print(
            f"targets: p99 at 8 clients {targets['p99_ms_at_8_clients']:.2f} ms (<= "
            f"{P99_TARGET_MS:g}: {'met' if targets['p99_met'] else 'missed'}); server at 8 "
            f"clients / best subprocess route {targets['ratio_to_subprocess_at_8_clients']:.0f}x "
            f"(>= {RATIO_TARGET:g}: {'met' if targets['ratio_met'] else 'missed'})"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
