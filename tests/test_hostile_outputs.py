"""Hostile model outputs: the classics through every shipped block, every shipped pattern
and the real CLI, each with a verdict or a usage error, an exit code, and a bound on time
and peak memory (issue 13's corpus). Nothing here may raise or print "internal error"."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

import engine
from conftest import REPO, script
from engine.core.patterns import compile_pattern
from engine.format import model
from engine.format.semantics import walk_references

VERDICT = (REPO / "examples" / "sentinel" / "verdict.txt").read_text(encoding="utf-8")

CORPUS: dict[str, bytes] = {
    "empty": b"",
    "whitespace": b" \t\n" * 1000,
    "invalid utf-8": b"\xff\xfe\xfa\xc3\x28" * 2000,
    "nul bytes": VERDICT.replace("ANSWER=YES", "ANSWER=YES\x00").encode() + b"\x00" * 1000,
    "crlf": VERDICT.replace("\n", "\r\n").encode(),
    "lone cr": VERDICT.replace("\n", "\r").encode(),
    "bom": b"\xef\xbb\xbf" + VERDICT.encode(),
    "utf-16": VERDICT.encode("utf-16"),
    "nested fences": ("```markdown\n" * 3000 + "## Gap Resolution: GAP-AB-001\n").encode(),
    "deep brackets": b"[" * 100_000,
    "deep braces": b'{"a":' * 50_000,
    "one long line": b"A" * 2_000_000,
    "many lines": b"x\n" * 500_000,
    "many openers": ("<<<VERDICT:V1:AC1:NONCE=4F2C9A>>>\n" * 20_000).encode(),
    "many headings": ("## Gap Resolution: GAP-AB-001\n" * 20_000).encode(),
    "redos a": b"a" * 100_000 + b"!",
    "redos spaces": b" " * 100_000 + b"x",
    "redos dashes": b"GAP-" * 30_000 + b"!",
    "redos stars": b"**" * 50_000,
    "redos hashes": b"#" * 100_000,
}

CALL_SECONDS = 5.0  # generous: each call here takes milliseconds on a quiet machine
PEAK_BYTES = 1024**3  # issue 13: within 1 GB


def _inputs(pack: engine.Pack, block: str) -> tuple[str | None, dict[str, str]]:
    contract = pack.model.contracts[block]
    params = getattr(contract, "params", {}) or {}
    nonce = "4F2C9A" if contract.kind == "sentinel" else None
    return nonce, {name: "AC1" for name in params}


CONTEXTS = {"gap-review": {"known_gaps": ["GAP-AB-001"], "round": 2, "original_prompt": "Do."}}
PACKS = ["sentinel", "gap-review"]


@pytest.mark.parametrize("pack_name", PACKS)
def test_every_block_gives_a_verdict_a_decision_and_a_prompt(pack_name: str) -> None:
    pack = engine.load_pack(pack_name)
    context = CONTEXTS.get(pack_name, {})
    for block in pack.blocks:
        nonce, params = _inputs(pack, block)
        for name, output in CORPUS.items():
            started = time.perf_counter()
            verdict = pack.evaluate(block, output, nonce=nonce, vars=params, context=context)
            assert verdict.status in ("pass", "warn", "fail"), (block, name)
            decision = pack.decide(verdict, output=output, nonce=nonce, context=context)
            if decision.template is not None:
                prompt = pack.render(
                    verdict, decision, output=output, nonce=nonce, vars=params, context=context
                )
                assert prompt.strip(), (block, name)
            elapsed = time.perf_counter() - started
            assert elapsed < CALL_SECONDS, f"{pack_name}/{block} on {name}: {elapsed:.1f} s"


def _shipped_patterns() -> list[tuple[str, str, str]]:
    found = []
    for pack_dir in sorted((REPO / "rules").iterdir()):
        if not (pack_dir / "pack.yaml").is_file():
            continue
        rulepack = engine.load_pack(pack_dir).model
        for ref in walk_references(rulepack, model.Rulepack, (), ()):
            if ref.kind is model.Ref.PATTERN:
                where = ".".join(str(p) for p in ref.path)
                found.append((pack_dir.name, where, ref.value))
    return found


PATTERNS = _shipped_patterns()


def test_the_shipped_packs_have_patterns_to_attack() -> None:
    assert len(PATTERNS) > 20
    assert {pack for pack, _, _ in PATTERNS} >= {"sentinel", "gap-review"}


@pytest.mark.parametrize("where,pattern", [(f"{p}:{w}", v) for p, w, v in PATTERNS])
def test_no_shipped_pattern_backtracks_on_hostile_text(where: str, pattern: str) -> None:
    compiled = compile_pattern(pattern)
    # the pattern's own literal characters, repeated: the classic catastrophic inputs
    letters = sorted({c for c in pattern if c.isprintable() and c not in "\\^$()[]{}?*+|."})
    attacks = [text.decode("latin-1") for name, text in CORPUS.items() if name.startswith("redos")]
    attacks += [("".join(letters) or "a") * 20_000 + "\n!", "\n".join(letters * 5_000)]
    for text in attacks:
        started = time.perf_counter()
        compiled.search(text)
        elapsed = time.perf_counter() - started
        assert elapsed < 1.0, f"{where}: {pattern!r} took {elapsed:.2f} s"


# ------------------------------------------------------------------ the real CLI, measured


def _measured(args: list[str]) -> tuple[int, str, float, int]:
    """Exit status, stdout+stderr, seconds and peak RSS in bytes of one CLI run (the
    child's own rusage, from wait4; killed after 60 s)."""
    started = time.perf_counter()
    child = subprocess.Popen(
        args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT
    )
    chunks: list[bytes] = []
    assert child.stdout is not None
    reader = threading.Thread(target=lambda: chunks.append(child.stdout.read()))  # type: ignore[union-attr]
    reader.start()
    killer = threading.Timer(60, child.kill)
    killer.start()
    _, status, usage = os.wait4(child.pid, 0)
    killer.cancel()
    reader.join()
    child.stdout.close()
    child.returncode = os.waitstatus_to_exitcode(status)  # reaped here, not by Popen
    elapsed = time.perf_counter() - started
    return (
        child.returncode,
        b"".join(chunks).decode("utf-8", "replace"),
        elapsed,
        usage.ru_maxrss * 1024,
    )


SENTINEL = ["--pack", "sentinel", "--block", "VERDICT", "--nonce", "4F2C9A"]
CRITERION = ["--var", "criterion=AC1"]


@pytest.mark.slow
@pytest.mark.parametrize(
    "name,expected",
    [
        ("empty", {"parse": 1, "eval": 1, "render": 1}),  # too short to repair: no prompt
        ("invalid utf-8", {"parse": 1, "eval": 3, "render": 0}),
        ("nul bytes", {"parse": 1, "eval": 3, "render": 0}),
        ("crlf", {"parse": 0, "eval": 0, "render": 1}),
        ("lone cr", {"parse": 1, "eval": 3, "render": 0}),
        ("bom", {"parse": 0, "eval": 0, "render": 1}),
        ("deep brackets", {"parse": 1, "eval": 3, "render": 0}),
        ("one long line", {"parse": 1, "eval": 3, "render": 0}),
    ],
)
def test_parse_eval_render_give_an_exit_code_within_bounds(
    name: str, expected: dict[str, int], tmp_path: Path
) -> None:
    output = tmp_path / "out.txt"
    output.write_bytes(CORPUS[name])
    rules = script("rules")
    for command, code in expected.items():
        status, shown, seconds, peak = _measured(
            [rules, command, *SENTINEL, *CRITERION, str(output)]
        )
        assert "internal error" not in shown and "Traceback" not in shown, shown[-2000:]
        assert status == code, f"{command} on {name}: exit {status}\n{shown[-2000:]}"
        assert seconds < 10, f"{command} on {name}: {seconds:.1f} s"
        assert peak < PEAK_BYTES, f"{command} on {name}: {peak / 2**20:.0f} MiB"


@pytest.mark.slow
def test_run_with_a_model_printing_hostile_bytes(tmp_path: Path) -> None:
    model_file = tmp_path / "model.py"
    model_file.write_text(
        "import sys\nsys.stdin.read()\n"
        "sys.stdout.buffer.write(b'\\xef\\xbb\\xbf' + b'\\xff\\x00\\r' * 100000)\n"
    )
    status, shown, seconds, peak = _measured(
        [
            script("rules"),
            "run",
            *SENTINEL,
            *CRITERION,
            "--prompt",
            str(REPO / "tests" / "fixtures" / "models" / "prompt.txt"),
            "--session",
            str(tmp_path / "s"),
            "--",
            sys.executable,
            str(model_file),
        ]
    )
    assert status == 1, shown  # repaired once, then NEEDS_HUMAN
    assert shown.count("fail NOT_TEXT") == 2 and "NEEDS_HUMAN" in shown  # not text: NUL bytes
    assert "Traceback" not in shown and "internal error" not in shown
    assert seconds < 30 and peak < PEAK_BYTES


@pytest.mark.slow
def test_a_50_mb_one_line_output_is_a_verdict_within_bounds(tmp_path: Path) -> None:
    output = tmp_path / "big.txt"
    with output.open("wb") as stream:
        for _ in range(50):
            stream.write(b"A" * 2**20)
    for command, code in (("parse", 1), ("eval", 3)):
        status, shown, seconds, peak = _measured(
            [script("rules"), command, *SENTINEL, *CRITERION, str(output)]
        )
        assert status == code, shown[-2000:]
        assert "Traceback" not in shown
        assert seconds < 30 and peak < PEAK_BYTES, (seconds, peak)
