"""What `rules serve` was given, in one place; passed to worker processes as JSON."""

from __future__ import annotations

import ipaddress
import json
import os
from collections.abc import Callable
from dataclasses import asdict, dataclass, field

SETTINGS_ENV = "RULES_SERVE_SETTINGS"
"""The environment variable that hands the settings to uvicorn's worker processes."""

DEFAULT_TIMEOUT = 30.0
"""Seconds a request may take before it is answered 503 (``--timeout``)."""


@dataclass(frozen=True)
class ServerSettings:
    packs: tuple[str, ...]
    """The pack references (names, paths), as `--pack` gives them."""
    sessions_dir: str = "sessions"
    ledger: str | None = None
    """The ledger every session is recorded in (``--ledger``: a SQLite file or a PostgreSQL
    database, sessions by name); None: one folder per session under ``sessions_dir``."""
    host: str = "127.0.0.1"
    port: int = 8080
    workers: int = 1
    token_file: str | None = None
    token: str | None = field(default=None, repr=False)
    """The bearer token every /v1 route needs (None: none, allowed on loopback only); read
    from ``token_file``, never handed to workers in the environment."""
    timeout: float = DEFAULT_TIMEOUT
    locked: bool | None = None
    shadows: tuple[tuple[str, str], ...] = ()
    """(served pack, candidate pack) pairs: ``--shadow NAME=CANDIDATE``."""
    shadow_ledger: str | None = None
    """Where shadow evaluations are recorded (a path or URL, ``--shadow-ledger``)."""

    def to_env(self) -> str:
        """The settings for a worker's environment: the token stays out (a worker reads
        the token file)."""
        return json.dumps({**asdict(self), "token": None})

    @classmethod
    def from_env(cls, read_token: Callable[[str], str]) -> ServerSettings:
        data = json.loads(os.environ[SETTINGS_ENV])
        data["packs"] = tuple(data["packs"])
        data["shadows"] = tuple(tuple(pair) for pair in data.get("shadows", ()))
        if data.get("token_file"):
            data["token"] = read_token(data["token_file"])
        return cls(**data)


def is_loopback(host: str) -> bool:
    """Whether ``host`` (a bind address or a client's address) is a loopback address."""
    if host == "localhost":
        return True
    try:
        return ipaddress.ip_address(host.strip("[]")).is_loopback
    except ValueError:
        return False
