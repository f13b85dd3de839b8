"""Starting the server: one uvicorn process, or N workers behind uvicorn's supervisor."""

from __future__ import annotations

import os
import signal
import socket
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager

import uvicorn
from fastapi import FastAPI

from engine.core.telemetry import configure_from_environment
from engine.server.access import log_config
from engine.server.app import create_app
from engine.server.metrics import MULTIPROCESS_ENV
from engine.server.packs import PackSet, load_pack_set
from engine.server.protocol import protocol_options
from engine.server.security import read_token
from engine.server.settings import SETTINGS_ENV, ServerSettings


def address_problem(host: str, port: int) -> str | None:
    """Why the server could not listen on ``host:port`` (in use, not an address of this
    machine), or None when it can; checked before uvicorn starts, so the command says it."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        return f"--host {host}: not an address this machine has ({exc.strerror})"
    family, kind, proto, _, address = infos[0]
    with socket.socket(family, kind, proto) as probe:
        probe.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as uvicorn binds
        try:
            probe.bind(address)
        except OSError as exc:
            return f"cannot listen on {host}:{port}: {exc.strerror or exc}"
    return None


class _Stopped(Exception):
    """The signal that stopped the server, raised again by uvicorn once it has shut down."""


def _stop(signum: int, frame: object) -> None:
    raise _Stopped(signum)


@contextmanager
def _stopped_by_signal() -> Iterator[None]:
    """A stop by SIGINT or SIGTERM ends the command normally (exit 0, as `rules serve
    --help` says). uvicorn (0.29 on) shuts down, restores the handlers it found and sends
    itself the signal again, which would end the process by SIGTERM (status 143) or a
    KeyboardInterrupt; here that signal finds a handler that says the server was stopped.
    A signal before uvicorn listens stops the start the same way."""
    stops = (signal.SIGINT, signal.SIGTERM)
    previous = {signum: signal.signal(signum, _stop) for signum in stops}
    try:
        yield
    except _Stopped:
        pass
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def worker_app() -> FastAPI:
    """The application of one worker process (uvicorn's factory with --workers N): the
    settings from the environment, the packs loaded afresh (a pack that fails its check
    fails the worker's start; on a SIGHUP restart uvicorn then keeps the old worker)."""
    settings = ServerSettings.from_env(read_token)
    configure_from_environment()  # a worker process sends its spans as `rules serve` would
    return create_app(settings, load_pack_set(settings.packs, settings.locked))


def serve(settings: ServerSettings, packs: PackSet) -> None:
    """Serve until SIGINT or SIGTERM."""
    common: dict[str, object] = {
        "host": settings.host,
        "port": settings.port,
        "log_level": "info",
        "server_header": False,
        "access_log": False,  # ours instead (engine.server.access): no query strings
        "log_config": log_config(),  # every record scrubbed of secrets
        "timeout_graceful_shutdown": 10,
        **protocol_options(),  # the request's head bounded; a shutdown drains connections
    }
    if settings.workers <= 1:
        with _stopped_by_signal():
            uvicorn.run(create_app(settings, packs), **common)  # type: ignore[arg-type]
        return
    os.environ[SETTINGS_ENV] = settings.to_env()
    with _stopped_by_signal(), tempfile.TemporaryDirectory(prefix="rules-metrics-") as folder:
        # prometheus-client's multiprocess mode: each worker writes its values here and
        # /metrics sums them
        os.environ[MULTIPROCESS_ENV] = folder
        uvicorn.run(
            "engine.server.run:worker_app",
            factory=True,
            workers=settings.workers,
            **common,  # type: ignore[arg-type]
        )
