"""`rules export`: a session's kept outputs as JSON Lines records."""

from __future__ import annotations

import json
import sys
from typing import TextIO

import click

from engine.cli.common import EXIT_OK, UsageFailure
from engine.errors import EngineError


@click.command("export")
@click.option(
    "--session",
    "session_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Session folder whose ledger kept outputs (`--keep-outputs`).",
)
@click.option(
    "-o",
    "--output",
    "output",
    type=click.File("w", encoding="utf-8"),
    default="-",
    help="File to write (default: stdout).",
)
def export_command(session_dir: str, output: TextIO) -> None:
    """Write a session's kept attempts as JSON Lines, in the `rules parse --jsonl` format.

    One record per kept attempt, oldest first: {"id", "block", "nonce", "vars", "context",
    "attempt", "previous_errors", "text"} (id: the attempt's id in the ledger;
    previous_errors: the errors of the item's earlier attempts, oldest first). Outputs are
    kept only by sessions run with --keep-outputs (`rules run`, `rules eval --session`) or
    with a pack that keeps them (`session: {keep_outputs: true}`).

    \b
    Examples:
      rules run --pack sentinel --block "$BLOCK" --keep-outputs -- model-cli
      rules export --session .rules-session > attempts.jsonl
      rules backtest --pack ./new-pack --baseline sentinel attempts.jsonl

    \b
    Exit status: 0 written, 2 not a session folder or unreadable ledger.
    """
    from engine.state.export import export_records

    encode = json.JSONEncoder(ensure_ascii=False).encode
    try:
        for record in export_records(session_dir):
            output.write(encode(record) + "\n")
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None
    output.flush()
    sys.exit(EXIT_OK)
