"""What the spans cost: a failing 4 KB VERDICT evaluated and decided, without and with traces.

    python benchmarks/telemetry.py [--rounds N]

Each mode runs in a child process, through the code `rules eval` runs (``evaluate``,
no session), N times after a warm-up; it prints microseconds per evaluation:

- ``off``: nothing of OpenTelemetry imported (no extra, or nobody asked for traces): a span is
  one dictionary look-up;
- ``api, no provider``: the API imported but no tracer provider set (spans are non-recording);
- ``sdk, no exporter``: an SDK provider recording every span, exporting nowhere;
- ``sdk, in memory``: an SDK provider and an in-memory exporter (the spans are kept).

Then the wall time of `rules eval` of the same output as a command, without and with
``OTEL_TRACES_EXPORTER=console`` (its SDK set-up and import included), best of five.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
REASON = "the tests pass on CI and the criterion holds " * 90  # about 4 KB
OUTPUT = f'<<<VERDICT:V1:AC1:NONCE=4F2C9A>>>\nANSWER="YES"\nREASON="{REASON}"\n'
OUTPUT += "<<<END_VERDICT:AC1:NONCE=4F2C9A>>>\n"

SETUP = {
    "off": "",
    "api, no provider": "import opentelemetry.trace\n",
    "sdk, no exporter": (
        "from opentelemetry import trace\nfrom opentelemetry.sdk.trace import TracerProvider\n"
        "trace.set_tracer_provider(TracerProvider())\n"
    ),
    "sdk, in memory": (
        "from opentelemetry import trace\nfrom opentelemetry.sdk.trace import TracerProvider\n"
        "from opentelemetry.sdk.trace.export import SimpleSpanProcessor\n"
        "from opentelemetry.sdk.trace.export.in_memory_span_exporter import "
        "InMemorySpanExporter\n"
        "provider = TracerProvider()\n"
        "provider.add_span_processor(SimpleSpanProcessor(InMemorySpanExporter()))\n"
        "trace.set_tracer_provider(provider)\n"
    ),
}

LOOP = """
import time
import engine
from engine.pack.inputs import OutputInput
from engine.session.evaluation import EvaluationRequest, evaluate
pack = engine.load_pack("sentinel")
output = {output!r}.encode()
request = EvaluationRequest(OutputInput("VERDICT", output, "4F2C9A", {{"criterion": "AC1"}}))
def once():
    done = evaluate(pack, request)
    assert done.verdict.status == "fail", done.verdict
for _ in range(200):
    once()
start = time.perf_counter()
for _ in range({rounds}):
    once()
print((time.perf_counter() - start) / {rounds} * 1e6)
"""


def per_evaluation(mode: str, rounds: int) -> float:
    code = SETUP[mode] + LOOP.format(output=OUTPUT, rounds=rounds)
    done = subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, check=True, cwd=ROOT
    )
    return float(done.stdout)


def command_seconds(path: Path, env: dict[str, str]) -> float:
    rules = Path(sys.executable).parent / "rules"
    args = [str(rules), "eval", "--pack", "sentinel", "--block", "VERDICT"]
    args += ["--nonce", "4F2C9A", "--var", "criterion=AC1", str(path)]
    best = float("inf")
    for _ in range(5):
        start = time.perf_counter()
        subprocess.run(args, capture_output=True, env=env, check=False)
        best = min(best, time.perf_counter() - start)
    return best


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=5000)
    rounds = parser.parse_args().rounds
    for mode in SETUP:
        print(f"{mode:18} {per_evaluation(mode, rounds):8.1f} us per evaluation")
    quiet = {k: v for k, v in os.environ.items() if not k.startswith("OTEL_")}
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "verdict.txt"
        path.write_text(OUTPUT, encoding="utf-8")
        plain = command_seconds(path, quiet)
        traced = command_seconds(path, {**quiet, "OTEL_TRACES_EXPORTER": "console"})
    print(f"rules eval          {plain * 1000:8.1f} ms")
    print(f"rules eval, console {traced * 1000:8.1f} ms (OTEL_TRACES_EXPORTER=console)")


if __name__ == "__main__":
    main()
