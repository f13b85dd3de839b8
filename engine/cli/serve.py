"""`rules serve`: the engine as an HTTP service for orchestrators in any language."""

from __future__ import annotations

import json
from typing import Any

import click

from engine.cli.common import UsageFailure, locked_setting
from engine.cli.options import pack_option, workers_option
from engine.cli.types import BoundedInt
from engine.core.errors import LedgerError

EXTRA_HINT = "`rules serve` needs the server extra: pip install 'rules-engine[server]'"


def _server_modules() -> Any:
    """The server package, or a usage error naming the extra to install."""
    try:
        # Deferred for the optional extra: FastAPI, uvicorn and prometheus-client come with
        # `rules-engine[server]`; no other command imports them.
        import engine.server.run as server_run
    except ImportError as exc:
        raise UsageFailure(f"{EXTRA_HINT} ({exc.name or exc} is not installed)") from None
    return server_run


@click.command("serve")
@pack_option(
    "A pack to serve: builtin name, folder or file (repeatable).", required=False, multiple=True
)
@click.option(
    "--sessions-dir",
    default="sessions",
    show_default=True,
    type=click.Path(file_okay=False),
    help="Folder of the sessions' ledgers (one folder per session name).",
)
@click.option(
    "--ledger",
    "ledger_url",
    envvar="RULES_LEDGER",
    default=None,
    metavar="URL",
    help="One ledger for every session, sessions by name: a path or sqlite:///path (SQLite), "
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
def serve_command(
    pack_refs: tuple[str, ...],
    sessions_dir: str,
    ledger_url: str | None,
    host: str,
    port: int,
    workers: int,
    token_file: str | None,
    timeout: float,
    shadow_specs: tuple[str, ...],
    shadow_ledger: str | None,
    print_openapi: bool,
) -> None:
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
    server_run = _server_modules()
    # Deferred with the server package above: the settings and packs of a server.
    from engine.server.packs import PackLoadFailed, PackSet, load_pack_set
    from engine.server.security import TokenFileError, read_token
    from engine.server.sessions import ledger_problem
    from engine.server.settings import ServerSettings, is_loopback
    from engine.server.shadow import ShadowError, parse_shadow

    try:
        shadows = tuple(parse_shadow(spec) for spec in shadow_specs)
    except ShadowError as exc:
        raise UsageFailure(str(exc)) from None

    token = None
    if token_file is not None:
        try:
            token = read_token(token_file)
        except TokenFileError as exc:
            raise UsageFailure(str(exc)) from None
    settings = ServerSettings(
        packs=pack_refs,
        sessions_dir=sessions_dir,
        ledger=ledger_url or None,
        host=host,
        port=port,
        workers=workers,
        token_file=token_file,
        token=token,
        timeout=timeout,
        locked=locked_setting(),
        shadows=shadows,
        shadow_ledger=shadow_ledger,
    )
    if print_openapi:
        app = server_run.create_app(settings, PackSet({}, ()))
        click.echo(json.dumps(app.openapi(), indent=2, ensure_ascii=False))
        return
    if not pack_refs:
        raise UsageFailure("name at least one pack to serve: --pack NAME")
    if token is None and not is_loopback(host):
        raise UsageFailure(
            f"--host {host} is not a loopback address: give --token-file FILE (a bearer "
            "token every /v1 request must carry), or bind 127.0.0.1"
        )
    if problem := server_run.address_problem(host, port):
        raise UsageFailure(problem)
    try:
        packs = load_pack_set(pack_refs, settings.locked)
    except PackLoadFailed as exc:
        click.echo(exc.text(), err=True)
        raise UsageFailure("a pack has errors; the server did not start") from None
    if problem := ledger_problem(settings):  # the ledger reachable (and migrated) at start
        raise UsageFailure(f"{problem}; the server did not start")
    if shadows:
        _check_shadows(settings, packs)
    server_run.serve(settings, packs)


def _check_shadows(settings: Any, packs: Any) -> None:
    """The candidates pass their check and the shadow ledger opens, or the server does not
    start."""
    # Deferred with the server package (see serve_command).
    from engine.server.packs import PackLoadFailed
    from engine.server.shadow import ShadowError, Shadows, default_ledger, load_candidates

    try:
        candidates = load_candidates(settings.shadows, packs, settings.locked)
        location = default_ledger(settings)
        Shadows(candidates, location).check_ledger()
    except PackLoadFailed as exc:
        click.echo(exc.text(), err=True)
        raise UsageFailure("a candidate pack has errors; the server did not start") from None
    except (ShadowError, LedgerError) as exc:
        raise UsageFailure(str(exc)) from None
