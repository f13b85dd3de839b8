"""The fuzzing harness of issue 24 (item 6): runs `rules` on generated inputs under a time and
memory bound and says what went wrong, if anything.

A case is a command line and the files it reads, written to a fresh folder. It runs either
in this process (click's runner: fast, with a watchdog timer and an address-space limit of
what the process holds plus 1 GiB) or as a real `rules` process (1 GiB of address space,
10 s). ``problem`` names what is wrong with the run: an exception the command did not turn
into a message (what the CLI prints as "internal error"), a traceback, an exit status the
commands do not document, a run over 10 s, memory past 1 GiB. Found cases are kept as YAML
files in ``corpus/`` and replayed by ``test_corpus.py``.
"""

from __future__ import annotations

import contextlib
import json
import os
import resource
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml
from click.testing import CliRunner

from conftest import script

SECONDS = 10.0
GIB = 1024 * 1024 * 1024
EXIT_CODES = frozenset({0, 1, 2, 3})  # documented by `rules --help` (3: a repair is due)
CORPUS = Path(__file__).parent / "corpus"


@dataclass(frozen=True)
class Case:
    """``rules ARGS`` in a folder holding ``files`` (name -> text)."""

    args: tuple[str, ...]
    files: Mapping[str, str] = field(default_factory=dict)
    runs: int = 1
    """How many times the command runs in the same folder, with a cache folder of its own:
    the first run loads the pack and writes its cache entries, the next ones read them."""
    own_exits: bool = False
    """The pack declares actions with exit statuses of their own (0 to 125)."""

    def to_yaml(self, note: str = "") -> str:
        data: dict[str, Any] = {"args": list(self.args), "files": dict(self.files)}
        if self.runs != 1:
            data["runs"] = self.runs
        if self.own_exits:
            data["own_exits"] = True
        if note:
            data = {"note": note, **data}
        return yaml.safe_dump(data, allow_unicode=True, sort_keys=False, width=100)


class Overrun(Exception):
    """The watchdog: the run took more than SECONDS."""


def _write(case: Case, folder: Path) -> None:
    for name, text in case.files.items():
        path = folder / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8", errors="surrogatepass")


def _vm_bytes() -> int:
    """The address space this process uses now (Linux)."""
    return int(Path("/proc/self/statm").read_text().split()[0]) * resource.getpagesize()


@contextlib.contextmanager
def _bounded(seconds: float = SECONDS) -> Iterator[None]:
    """``seconds`` of wall time (SIGALRM) and 1 GiB more address space than held now."""

    def overrun(signum: int, frame: Any) -> None:
        raise Overrun(f"over {seconds:g} s")

    soft, hard = resource.getrlimit(resource.RLIMIT_AS)
    limit = _vm_bytes() + GIB
    resource.setrlimit(resource.RLIMIT_AS, (limit if hard < 0 else min(limit, hard), hard))
    previous = signal.signal(signal.SIGALRM, overrun)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    digits = sys.get_int_max_str_digits()
    sys.set_int_max_str_digits(0)  # as `rules` runs (engine.cli.main)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)
        resource.setrlimit(resource.RLIMIT_AS, (soft, hard))
        sys.set_int_max_str_digits(digits)


# The commands whose runs say the same whether the pack comes from its cache entry or not
# (`rules run` and the session commands count attempts across runs).
SAME_WARM = frozenset({"parse", "eval", "render", "gate", "check", "test", "prompt"})


def run_in_process(case: Case) -> str | None:
    """Run ``case`` through the CLI in this process (``case.runs`` times, in one folder and
    with one cache folder); what is wrong with it, or None. A run from the cache that says
    otherwise than the first run is wrong too."""
    from engine.cli.main import cli

    with tempfile.TemporaryDirectory() as temp, tempfile.TemporaryDirectory() as cache:
        folder = Path(temp) / "case"
        folder.mkdir()
        _write(case, folder)
        cwd = os.getcwd()
        previous = os.environ.get("RULES_CACHE_DIR")
        os.chdir(folder)
        os.environ["RULES_CACHE_DIR"] = cache
        said: list[tuple[int, str]] = []
        try:
            for _ in range(case.runs):
                with _bounded():
                    result = CliRunner().invoke(cli, list(case.args), catch_exceptions=True)
                problem = _problem(result, case.own_exits)
                if problem is not None:
                    return problem if not said else f"on a warm run: {problem}"
                said.append((result.exit_code, result.output))
        except Overrun as exc:  # raised outside the command (its result not yet returned)
            return str(exc) if not said else f"on a warm run: {exc}"
        finally:
            os.chdir(cwd)
            if previous is None:
                os.environ.pop("RULES_CACHE_DIR", None)
            else:
                os.environ["RULES_CACHE_DIR"] = previous
    if case.args and case.args[0] in SAME_WARM:
        for code, output in said[1:]:
            if (code, output) != said[0]:
                return (
                    f"a warm run said otherwise: exit {said[0][0]} then {code}\n"
                    f"--- cold:\n{said[0][1][-400:]}\n--- warm:\n{output[-400:]}"
                )
    return None


def _problem(result: Any, own_exits: bool = False) -> str | None:
    if result.exception is not None and not isinstance(result.exception, SystemExit):
        exc = result.exception
        if isinstance(exc, Overrun):
            return str(exc)
        if isinstance(exc, MemoryError):
            return "over 1 GiB (MemoryError)"
        return f"internal error: {type(exc).__name__}: {str(exc)[:300]}"
    return _judge(result.exit_code, result.output, own_exits)


def run_process(case: Case) -> str | None:
    """Run ``case`` as a real `rules` process (1 GiB, 10 s); what is wrong, or None."""

    def limit() -> None:
        resource.setrlimit(resource.RLIMIT_AS, (GIB, GIB))

    with tempfile.TemporaryDirectory() as temp, tempfile.TemporaryDirectory() as cache:
        folder = Path(temp) / "case"
        folder.mkdir()
        _write(case, folder)
        for run in range(case.runs):
            warm = "on a warm run: " if run else ""
            start = time.monotonic()
            try:
                done = subprocess.run(
                    [script("rules"), *case.args],
                    cwd=folder,
                    capture_output=True,
                    timeout=SECONDS,
                    preexec_fn=limit,
                    check=False,
                    env={**os.environ, "RULES_CACHE_DIR": cache},
                )
            except subprocess.TimeoutExpired:
                return f"{warm}over {SECONDS:g} s"
            if time.monotonic() - start > SECONDS:
                return f"{warm}over {SECONDS:g} s"
            output = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
            if "MemoryError" in output:
                return f"{warm}over 1 GiB (MemoryError)"
            problem = _judge(done.returncode, output, case.own_exits)
            if problem is not None:
                return warm + problem
    return None


def _judge(code: int, output: str, own_exits: bool = False) -> str | None:
    if "internal error" in output or "Traceback (most recent call last)" in output:
        return f"internal error: {output[-400:]}"
    if code not in EXIT_CODES and not (own_exits and 0 <= code <= 125):
        return f"exit status {code}: {output[-400:]}"
    return None


def known_problems() -> tuple[str, ...]:
    """How the known failures of the corpus begin (their ``problem``): a fuzz run that meets
    one again goes on, so it can find the next."""
    found = []
    for path in sorted(CORPUS.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        if data.get("known_failure") and data.get("problem"):
            found.append(str(data["problem"]))
    return tuple(found)


def corpus_cases() -> Sequence[tuple[str, Case, str | None]]:
    """(file name, case, the reason it is a known failure or None) of each corpus file."""
    found = []
    for path in sorted(CORPUS.glob("*.yaml")):
        data = yaml.safe_load(path.read_text(encoding="utf-8"))
        files = dict(data.get("files") or {})
        args = tuple(str(a) for a in data["args"])
        case = Case(args, files, int(data.get("runs", 1)), bool(data.get("own_exits")))
        found.append((path.name, case, data.get("known_failure")))
    return found


def run_api(
    files: Mapping[str, str],
    block: Any,
    answers: Sequence[Any],
    options: Any,
    asynchronous: bool = False,
) -> str | None:
    """``engine.run(".", block, call, **options)`` (or ``engine.arun`` with an async
    ``call``) in a folder holding ``files``, ``call`` returning (or raising) ``answers`` in
    turn; what is wrong with it, or None. Only an ``EngineError`` (a usage error naming
    the option) may come out of it."""
    import asyncio

    import engine
    from engine.core.errors import EngineError

    answers = list(answers)

    def call(prompt: str) -> Any:
        answer = answers[0] if len(answers) == 1 else answers.pop(0)
        if isinstance(answer, BaseException):
            raise answer
        return answer

    async def acall(prompt: str) -> Any:
        return call(prompt)

    with tempfile.TemporaryDirectory() as temp:
        folder = Path(temp)
        _write(Case((), files), folder)
        cwd = os.getcwd()
        os.chdir(folder)
        try:
            with _bounded():
                if asynchronous:
                    result = asyncio.run(engine.arun(".", block, acall, **options))
                else:
                    result = engine.run(".", block, call, **options)
        except EngineError:
            return None
        except Overrun as exc:
            return str(exc)
        except MemoryError:
            return "over 1 GiB (MemoryError)"
        except Exception as exc:  # what the harness looks for
            return f"internal error: {type(exc).__name__}: {str(exc)[:300]}"
        finally:
            os.chdir(cwd)
    try:
        json.dumps(result.data, allow_nan=False)
    except (TypeError, ValueError) as exc:
        return f"the run's data is not JSON: {exc}"
    return None
