"""`rules serve`: the engine as an HTTP service for orchestrators in any language."""

from __future__ import annotations

from typing import Any

import click

from engine.cli.common import UsageFailure
from engine.cli.options import pack_option, workers_option
from engine.cli.session_options import ledger_option, sessions_dir_option
from engine.cli.types import BoundedInt

EXTRA_HINT = "`rules serve` needs the server extra: pip install 'rules-engine[server]'"


@click.command("serve")
@pack_option(
    "A pack to serve: builtin name, folder or file (repeatable).", required=False, multiple=True
)
@sessions_dir_option(
    "Folder of the sessions' ledgers (one folder per session name).",
)
@ledger_option(
    "One ledger for every session, sessions by name: a path or sqlite:///path (SQLite), "
    "or postgresql://user@host:port/dbname (PostgreSQL, shared by workers on many machines). "
    "Default: $RULES_LEDGER, else one folder per session under --sessions-dir.",
)
@click.option("--host", default="127.0.0.1", show_default=True, help="Address to bind.")
@click.option("--port", type=BoundedInt(min=0, max=65535), default=8080, show_default=True)
@workers_option("Worker processes (they share the sessions' ledgers).", most=256)
@click.option(
    "--token-file",
    type=click.Path(dir_okay=False),
    default=None,
    help="File holding the bearer token every /v1 route needs (required on a non-loopback --host).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0.1, max=3600),
    default=30.0,
    show_default=True,
    help="Seconds a request may take before it is answered 503.",
)
@click.option(
    "--shadow",
    "shadow_specs",
    multiple=True,
    metavar="NAME=CANDIDATE",
    help="Evaluate each output of the served pack NAME also under the pack CANDIDATE and "
    "record the would-be flips (repeatable); responses never change.",
)
@click.option(
    "--shadow-ledger",
    default=None,
    metavar="URL",
    help="Ledger of the shadow evaluations: a path or sqlite:///path, or postgresql://... "
    "(default: --ledger, else _shadow/ledger.db under --sessions-dir).",
)
@click.option(
    "--print-openapi",
    is_flag=True,
    help="Write the OpenAPI document to stdout and exit (no server starts).",
)
def serve_command(**options: Any) -> None:
    """Serve packs over HTTP: evaluate, render, record session outputs, run gates.

    JSON under /v1 (`GET /openapi.json` describes it), errors as application/problem+json,
    /healthz, /readyz and /metrics. Packs are checked at start (a pack with errors: the
    findings, exit 2); SIGHUP or `POST /v1/admin/reload` reloads them, keeping the running
    revision when one now fails its check.

    \b
    Exit status:
      0  stopped by SIGINT or SIGTERM
      2  usage or pack error, the server extra missing, a non-loopback
         --host without --token-file

    \b
    Examples:
      rules serve --pack sentinel --port 8080
      rules serve --pack sentinel --pack ./my-pack --workers 4 \\
          --host 0.0.0.0 --token-file /run/secrets/rules-token
      rules serve --pack sentinel --workers 4 \\
          --ledger postgresql://rules@db:5432/rules --token-file token
      rules serve --pack sentinel --shadow sentinel=./sentinel-next
      rules serve --print-openapi > openapi.json
    """
    try:
        # Deferred for the optional extra: FastAPI, uvicorn and prometheus-client come with
        # `rules-engine[server]`; no other command imports them.
        from engine.cli.serving import start_server
    except ImportError as exc:
        raise UsageFailure(f"{EXTRA_HINT} ({exc.name or exc} is not installed)") from None
    start_server(**options)  # the options, by the names start_server takes
