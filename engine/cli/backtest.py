"""`rules backtest`: what a pack change does to logged outputs, before it is merged."""

from __future__ import annotations

import contextlib
import re
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, TextIO

import click

from engine.backtest import BacktestError, backtest, dask_executor, local_executor
from engine.cli.common import (
    EXIT_FINDINGS,
    EXIT_OK,
    UsageFailure,
    locked_setting,
    stopping_on_sigterm,
)
from engine.cli.options import (
    format_option,
    max_output_bytes_option,
    output_option,
    pack_option,
    workers_option,
)
from engine.cli.session_options import ledger_option
from engine.cli.types import BoundedInt
from engine.core.errors import EngineError
from engine.report import render

if TYPE_CHECKING:
    from click._termui_impl import ProgressBar

_SCHEDULER = re.compile(
    r"(tcp://)?(\[[0-9A-Fa-f:.]+\]|[A-Za-z0-9_.-]+):([1-9][0-9]{0,3}|[1-5][0-9]{4}|6[0-4][0-9]{3}"
    r"|65[0-4][0-9]{2}|655[0-2][0-9]|6553[0-5])"
)
"""A Dask scheduler this command can reach: tcp://HOST:PORT (or HOST:PORT), IPv6 in [ ]."""


@contextlib.contextmanager
def _progress_bar() -> Iterator[Callable[[int, int], None] | None]:
    """A progress bar on stderr when it is a terminal (None otherwise), made on the first
    chunk done, when the chunk count is known."""
    if not sys.stderr.isatty():
        yield None
        return
    with contextlib.ExitStack() as stack:
        bars: list[ProgressBar[int]] = []

        def advance(done: int, total: int) -> None:
            if not bars:
                bar = click.progressbar(
                    length=total,
                    file=sys.stderr,
                    width=30,
                    fill_char="#",
                    empty_char=".",
                    bar_template="[%(bar)s] %(info)s",
                    show_eta=False,
                )
                bars.append(stack.enter_context(bar))
            bars[0].update(done - bars[0].pos)

        yield advance


@click.command("backtest")
@pack_option("The pack to try: name, folder or file.")
@click.option("--baseline", help="The pack in use now, to compare with (optional).")
@workers_option("Local worker processes.")
@click.option(
    "--executor",
    type=click.Choice(["local", "dask"]),
    default="local",
    show_default=True,
    help="local: processes of this machine; dask: a Dask cluster (pip install "
    "'rules-engine[dask]').",
)
@click.option(
    "--scheduler",
    metavar="ADDRESS",
    help="Dask scheduler, e.g. tcp://10.0.0.5:8786 (default: a local cluster of --workers).",
)
@click.option(
    "--max-flips",
    type=BoundedInt(min=0),
    default=None,
    help="Exit 1 when more records than this flip.",
)
@max_output_bytes_option(
    "Longest record line to read; a longer one is reported as an invalid record "
    "[default: the largest of the packs' `limits.max_output_bytes`, else 67108864]."
)
@format_option("backtest", show_default=True)
@output_option("File to write the report to (default: stdout).")
@ledger_option()
@click.option(
    "--session",
    "sessions",
    multiple=True,
    metavar="NAME",
    help="A session in the --ledger whose kept outputs are records too (repeatable).",
)
@click.argument("records", nargs=-1, type=click.Path())
def backtest_command(
    pack_ref: str,
    baseline: str | None,
    workers: int,
    executor: str,
    scheduler: str | None,
    max_flips: int | None,
    max_output_bytes: int | None,
    output_format: str,
    output: TextIO,
    ledger_url: str | None,
    sessions: tuple[str, ...],
    records: tuple[str, ...],
) -> None:
    """Evaluate and decide logged outputs under a pack and a baseline pack; report the flips.

    RECORDS are JSON Lines files of the `rules parse --jsonl` record format
    ({"id", "block", "nonce", "vars", "text"}), with optional "context" (an object),
    "attempt" (the attempt number the output was, default 1) and "previous_errors" (the
    item's earlier errors, oldest first: a trigger's stop_on_repeat reads them); Parquet
    files (*.parquet,
    the same columns; needs pyarrow); or session folders whose ledger kept outputs
    (`--keep-outputs`; places are then FOLDER:N, the N-th kept one), and with
    `--ledger URL --session NAME` a session in that ledger (places NAME:N).
    Each record is evaluated and decided under both packs; the report gives verdicts,
    actions, failure types and the repairs/retries each pack asks for, and the flips:
    verdict changes ("pass->fail") and action changes ("PROCEED->REPAIR"), by block and
    failure type, with first examples.
    Without --baseline it reports the one pack's statistics. Memory stays constant
    whatever the input size; a progress bar shows on stderr when it is a terminal.

    \b
    Examples:
      rules backtest --pack ./new-pack --baseline builtin:sentinel logs/*.jsonl
      rules backtest --pack ./my-pack --baseline main-pack --max-flips 0 --format junit \\
          logs/week.jsonl > backtest.xml
      rules backtest --pack sentinel --workers 2 --format json logs/week.jsonl
      rules backtest --pack ./new-pack --baseline sentinel --format html -o flips.html \\
          logs/week.jsonl
      rules backtest --pack ./new-pack --baseline sentinel .rules-session
      rules backtest --pack ./new-pack --baseline sentinel \\
          --ledger postgresql://rules@db:5432/rules --session nightly
      rules backtest --pack ./new-pack --baseline sentinel --executor dask \\
          --scheduler tcp://scheduler:8786 /shared/logs/*.jsonl

    \b
    Exit status: 0 done (flips within --max-flips), 1 more flips than --max-flips,
    2 usage or pack error.
    """
    if not records and not sessions:
        raise click.UsageError(
            "give the records: JSONL or Parquet files, session folders, or "
            "--ledger URL --session NAME"
        )
    if sessions and not ledger_url:
        raise click.UsageError(
            "--session NAME names a session in a ledger: give --ledger URL (or set RULES_LEDGER)"
        )
    if scheduler is not None and executor != "dask":
        raise click.UsageError("--scheduler needs --executor dask")
    if scheduler is not None and not _SCHEDULER.fullmatch(scheduler):
        raise click.BadParameter(
            f"{scheduler!r} is not a scheduler address: give tcp://HOST:PORT, e.g. "
            "tcp://10.0.0.5:8786 (what `dask scheduler` prints)",
            param_hint="'--scheduler'",
        )
    try:
        run = dask_executor(scheduler, workers) if executor == "dask" else local_executor(workers)
        with stopping_on_sigterm(), _progress_bar() as progress:
            report = backtest(
                pack_ref,
                records,
                baseline=baseline,
                executor=run,
                max_flips=max_flips,
                progress=progress,
                max_line_bytes=max_output_bytes,
                locked=locked_setting(),
                ledger=ledger_url if sessions else None,
                sessions=sessions,
            )
    except (BacktestError, EngineError) as exc:
        raise UsageFailure(str(exc)) from None
    output.write(render("backtest", output_format, report.to_json()))
    output.flush()
    raise SystemExit(EXIT_FINDINGS if report.exceeded else EXIT_OK)
