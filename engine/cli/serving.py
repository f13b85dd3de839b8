"""Starting the server of `rules serve` (serve.py parses its options): its settings,
token, packs, shadow candidates and ledger checked before it listens. Imported only by
`rules serve`, and only when the server extra is installed: every module here needs it."""

from __future__ import annotations

import json

import click

import engine.server.run as server_run
from engine.cli.common import UsageFailure, locked_setting
from engine.core.errors import LedgerError
from engine.server.app import create_app
from engine.server.packs import PackLoadFailed, PackSet, load_pack_set
from engine.server.security import TokenFileError, read_token
from engine.server.sessions import ledger_problem
from engine.server.settings import ServerSettings, is_loopback
from engine.server.shadow import (
    ShadowError,
    Shadows,
    default_ledger,
    load_candidates,
    parse_shadow,
)


def start_server(
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
    """Check what `rules serve` was given, then serve until SIGINT or SIGTERM (or print the
    OpenAPI document); a usage error (exit 2) for what cannot start."""
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
        app = create_app(settings, PackSet({}, ()))
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


def _check_shadows(settings: ServerSettings, packs: PackSet) -> None:
    """The candidates pass their check and the shadow ledger opens, or the server does not
    start."""
    try:
        candidates = load_candidates(settings.shadows, packs, settings.locked)
        location = default_ledger(settings)
        Shadows(candidates, location).check_ledger()
    except PackLoadFailed as exc:
        click.echo(exc.text(), err=True)
        raise UsageFailure("a candidate pack has errors; the server did not start") from None
    except (ShadowError, LedgerError) as exc:
        raise UsageFailure(str(exc)) from None
