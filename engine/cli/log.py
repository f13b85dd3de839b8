"""`rules log`: views of a session's ledger."""

from __future__ import annotations

from pathlib import Path

import click

from engine.cli.common import UsageFailure
from engine.errors import EngineError
from engine.state.ledger import LEDGER_FILE, Ledger
from engine.state.session import DEFAULT_SESSION
from engine.state.views import as_json, as_jsonl, example_log, failures_jsonl, validation_log


@click.command("log")
@click.option("--session", "session_dir", type=click.Path(file_okay=False),
              default=str(DEFAULT_SESSION), show_default=True, help="Session folder.")
@click.option("--format", "output_format", type=click.Choice(["md", "json", "jsonl"]),
              default="md", show_default=True,
              help="md: validation log and example log; json/jsonl: every attempt.")
@click.option("--view", type=click.Choice(["all", "validation", "examples", "failures"]),
              default="all", show_default=True,
              help="md: validation and/or examples; jsonl: failures = seed 004's gate "
              "failure log (one line per failed evaluation).")
def log_command(session_dir: str, output_format: str, view: str) -> None:
    """Show a session's ledger: attempts, decisions, examples used.

    \b
    Examples:
      rules log                                   # .rules-session/ as markdown
      rules log --session runs/42 --view examples
      rules log --session runs/42 --format jsonl > attempts.jsonl
      rules log --session runs/42 --format jsonl --view failures
    """
    if not (Path(session_dir) / LEDGER_FILE).exists():
        raise UsageFailure(f"{session_dir}: no ledger here (run `rules run` or "
                           "`rules eval --session` first)")
    try:
        ledger = Ledger(Path(session_dir))
        rows = ledger.attempts()
        ledger.close()
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None
    if output_format == "json":
        click.echo(as_json(rows), nl=False)
    elif output_format == "jsonl":
        click.echo(failures_jsonl(rows) if view == "failures" else as_jsonl(rows), nl=False)
    else:
        parts = []
        if view in ("all", "validation"):
            parts.append(validation_log(rows))
        if view in ("all", "examples"):
            parts.append(example_log(rows))
        click.echo("\n".join(parts), nl=False)
