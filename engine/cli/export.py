"""`rules export`: a session's kept outputs as JSON Lines records."""

from __future__ import annotations

import json
import sys
from typing import TextIO

import click

from engine.cli.common import EXIT_FINDINGS, EXIT_OK, UsageFailure
from engine.cli.options import max_output_bytes_option, output_option
from engine.cli.session_options import ledger_option
from engine.core.errors import EngineError
from engine.core.textio import MAX_OUTPUT_BYTES, clean_text
from engine.session.export import export_records
from engine.session.session_ref import SessionRef


@click.command("export")
@click.option(
    "--session",
    "session_dir",
    required=True,
    type=click.Path(file_okay=False),
    help="Session folder whose ledger kept outputs (`--keep-outputs`; with a PostgreSQL "
    "--ledger: the session's name in it).",
)
@ledger_option()
@output_option()
@max_output_bytes_option(
    "Largest kept output to decompress; a larger one is reported and left out.",
    default=MAX_OUTPUT_BYTES,
)
def export_command(
    session_dir: str, ledger_url: str | None, output: TextIO, max_output_bytes: int
) -> None:
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
    A kept output that cannot be read (a ledger damaged or edited by hand, an output
    larger than --max-output-bytes) is named on stderr and left out; the others are
    written.

    \b
    Exit status: 0 written, 1 written but some kept outputs could not be read, 2 not a
    session folder or unreadable ledger.
    """
    encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
    damaged = 0
    try:
        session = SessionRef(session_dir, ledger_url)
        for record in export_records(session, max_text_bytes=max_output_bytes):
            if "damaged" in record:
                damaged += 1
                where = clean_text(f"{session_dir}:{record['id']}")
                click.echo(f"{where}: {record['damaged']}; left out", err=True)
                continue
            output.write(encode(record) + "\n")
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None
    output.flush()
    sys.exit(EXIT_FINDINGS if damaged else EXIT_OK)
