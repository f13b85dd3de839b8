"""A model command as the step of a run (`rules run`): prompt on stdin, its stdout the
output; the loop (evaluate, repair or retry per the pack until its final decision, every
attempt recorded) is ``engine.session.run``.

A command that crashes, exits non-zero or times out is a failed call, never a parse
error: the pack's ``model_calls`` classify it by its exit status and stderr (by default a
timeout is MODEL_TIMEOUT and the openai, anthropic and httpx exceptions named in its
stderr are recognised), else it is EXECUTION_FAILED. A command reports its usage on a
stderr line (``rules-usage: {"tokens_in": 812, "tokens_out": 64}``, the prefix is the
pack's ``model_calls.usage.stderr_prefix``); without one, usage is estimated.

The tail of its stderr (``STDERR_LINES`` lines, at most ``STDERR_BYTES``, secrets
scrubbed) is kept with the attempt and shown to the operator: an API key missing or a
quota spent is said there; it never goes into a prompt.
"""

from __future__ import annotations

import os
import signal
import subprocess
import threading
import time
from collections.abc import Sequence

from engine.core.redaction import scrub_environment
from engine.core.textio import MAX_OUTPUT_BYTES  # what a model command may print on stdout
from engine.pack.compiled import Pack
from engine.policy.calls.replies import reported_usage
from engine.policy.calls.runtime import USAGE_PREFIX, CallFailure, CompiledCalls
from engine.session.evaluation import output_cap
from engine.session.run import (
    REAL_WAITS,
    Execution,
    Progress,
    RunRequest,
    RunResult,
    Waits,
    no_progress,
    run_with,
)
from engine.session.stream import Watch, new_watch

DEFAULT_TIMEOUT = 600.0
GRACE_SECONDS = 2.0
_READ = 64 * 1024
STDERR_LINES = 20
"""The last lines of a model command's stderr kept with its attempt and shown."""
STDERR_BYTES = 4096
"""At most this much of them (the end)."""


def stderr_tail(data: bytes) -> str | None:
    """The last ``STDERR_LINES`` lines of ``data`` (at most ``STDERR_BYTES``, the end), as
    text with secrets scrubbed (the values of secret-named environment variables, the
    passwords of URLs); None when it holds nothing but blanks."""
    lines = data.decode("utf-8", errors="replace").rstrip().splitlines()[-STDERR_LINES:]
    text = "\n".join(line.rstrip() for line in lines)
    if not text.strip():
        return None
    if len(text.encode("utf-8")) > STDERR_BYTES:
        text = text.encode("utf-8")[-STDERR_BYTES:].decode("utf-8", errors="ignore")
        text = "[...]" + text
    return scrub_environment(text, os.environ)  # the command inherits its environment


def _end_group(process: subprocess.Popen[bytes]) -> None:
    """End the command's whole process group: TERM, then KILL after the grace period."""
    if not hasattr(os, "killpg"):  # no process groups here: the command alone
        process.kill()
        return
    for sig, wait in ((signal.SIGTERM, GRACE_SECONDS), (signal.SIGKILL, 0.0)):
        try:
            os.killpg(process.pid, sig)
        except (ProcessLookupError, PermissionError):
            return
        end = time.monotonic() + wait
        while time.monotonic() < end:
            process.poll()  # reaped: a zombie would still count as the group's member
            try:
                os.killpg(process.pid, 0)
            except (ProcessLookupError, PermissionError):
                return
            time.sleep(0.02)


def execute(
    command: Sequence[str],
    prompt: str,
    timeout: float | None = DEFAULT_TIMEOUT,
    max_output: int = MAX_OUTPUT_BYTES,
    usage_prefix: str | None = USAGE_PREFIX,
    watch: Watch | None = None,
) -> Execution:
    """Run ``command`` in its own process group with ``prompt`` on stdin; stdout and stderr
    are read at the same time (stdout kept up to ``max_output``; of stderr its tail,
    ``stderr_tail``, never put in a prompt); on timeout or too much output the whole
    group is ended. The usage the command reports on stderr (a line starting with
    ``usage_prefix``) is read. With ``watch`` stdout is a stream read as it arrives: at its
    first definite failure the group is ended and the output is what came before (`rules
    run --stream`). Never raises for what the command does."""
    try:
        process = subprocess.Popen(
            list(command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
    except OSError as exc:
        return Execution(b"", f"model command could not start: {exc.strerror or exc}")
    assert process.stdin and process.stdout and process.stderr
    stdin, stdout, stderr = process.stdin, process.stdout, process.stderr
    out = bytearray()
    err = bytearray()
    too_much = threading.Event()
    failed = threading.Event()  # the stream failed definitively: the command is ended

    def read_stdout() -> None:
        while chunk := os.read(stdout.fileno(), _READ):
            room = max_output - len(out)
            out.extend(chunk[:room])
            if len(chunk) > room:
                too_much.set()
                return
            if watch is not None and watch.feed(chunk):
                failed.set()
                return

    def read_stderr() -> None:  # drained so the command never blocks on it; its end kept
        while chunk := os.read(stderr.fileno(), _READ):
            err.extend(chunk)
            if len(err) > 4 * _READ:
                del err[: len(err) - 2 * _READ]

    def write_stdin() -> None:
        try:
            stdin.write(prompt.encode("utf-8"))
            stdin.close()
        except OSError:  # the command does not read its stdin: fine
            pass

    threads = [
        threading.Thread(target=f, daemon=True) for f in (read_stdout, read_stderr, write_stdin)
    ]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + timeout if timeout else None
    reason = None
    try:
        while process.poll() is None:
            if too_much.is_set():
                reason = f"model command printed more than {max_output} bytes on stdout"
                break
            if failed.is_set():
                break
            if deadline is not None and time.monotonic() > deadline:
                reason = f"{_TIMED_OUT} after {timeout:g} s"
                break
            time.sleep(0.01)
    finally:  # also when this process is interrupted (Ctrl-C, SIGTERM): the command runs
        # in a session of its own, so nothing else would end it
        _end_group(process)  # also ends children the command left behind
        process.wait()
    for thread in threads:
        thread.join(timeout=GRACE_SECONDS)
    for stream in (stdout, stderr):
        stream.close()
    if reason is None and too_much.is_set():
        reason = f"model command printed more than {max_output} bytes on stdout"
    tail = stderr_tail(bytes(err))
    usage, asked = reported_usage(err.decode("utf-8", errors="replace"), usage_prefix)
    if watch is not None and failed.is_set():  # ended by us: its exit status says nothing
        return Execution(bytes(out), None, tail, usage=usage, stream=watch.end(cut=True))
    if reason is not None:
        failure = CallFailure(stderr=tail or "", timed_out=reason.startswith(_TIMED_OUT))
        return Execution(b"", reason, tail, failure, usage)
    if process.returncode != 0:
        how = (
            f"was killed by signal {-process.returncode}"
            if process.returncode < 0
            else f"exited with status {process.returncode}"
        )
        failure = CallFailure(exit_status=process.returncode, stderr=tail or "", retry_after=asked)
        return Execution(bytes(out), f"model command {how}", tail, failure, usage)
    ended = None if watch is None else watch.end(cut=False)
    return Execution(bytes(out), None, tail, usage=usage, stream=ended)


_TIMED_OUT = "model command timed out"


def run_with_command(
    pack: Pack,
    request: RunRequest,
    command: Sequence[str],
    *,
    timeout: float | None = None,
    max_output_bytes: int | None = None,
    progress: Progress = no_progress,
    stream: bool = False,
    waits: Waits = REAL_WAITS,
) -> RunResult:
    """Run ``command`` until the pack's final decision (``engine.session.run``); each call
    is bounded by ``timeout`` seconds (default: the pack's ``limits.model_timeout``, else
    ``DEFAULT_TIMEOUT``) and ``max_output_bytes`` of stdout (default: the pack's
    ``limits.max_output_bytes``, else the engine's). With ``stream`` each output is read
    as it arrives and the command ended at its first definite failure
    (``engine.session.stream``)."""
    limits = pack.model.limits
    seconds = timeout or limits.model_timeout or DEFAULT_TIMEOUT
    cap = output_cap(pack, max_output_bytes)
    calls: CompiledCalls = pack.section("model_calls")
    # the cap is the command's own bound on stdout (execute): a watch counts none
    watch = (
        new_watch(pack, request.block, request.nonce, request.vars, request.context, None)
        if stream
        else None
    )
    return run_with(
        pack,
        request,
        lambda text: execute(
            command, text, seconds, cap, calls.usage_prefix, None if watch is None else watch()
        ),
        progress,
        waits,
    )
