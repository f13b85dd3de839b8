"""`rules gate`: run a pack's quality gate on JSON outputs; print the reprompt on failure.

The option is called ``--stage`` and the JSON result's key ``stage`` because seed 004 names
them so; inside the engine the gate's name is just the gate.
"""

from __future__ import annotations

import sys
from typing import Any

import click

from engine.cli.common import EXIT_USAGE, UsageFailure, parse_vars, refuse_terminal_stdin
from engine.cli.opening import load_context, open_pack
from engine.cli.options import context_option, format_option, now_option, pack_option, var_option
from engine.cli.session_options import ledger_option, session_option
from engine.cli.types import BoundedInt
from engine.contracts.json_documents import MAX_CHARS, output_documents
from engine.core.errors import EngineError
from engine.core.files import read_file_capped
from engine.core.textio import decode_output, read_capped
from engine.report import render
from engine.session.gate import GateRequest, run_gate
from engine.session.session_ref import SessionRef

MAX_FILE_BYTES = 4 * MAX_CHARS
"""Bytes read from one FILE at most: a UTF-8 character is at most 4 bytes, so a longer
file is over the JSON character limit whatever it holds."""

EPILOG = """\b
Each FILE holds one JSON document, a JSON array of documents, or
JSON lines. A FILE that is not JSON is an error of the gate
("Invalid JSON: FILE:LINE:COLUMN: ..."), not a usage error: the
model gets it back in the reprompt. A missing FILE is a usage error.

\b
With --session DIR the result is recorded in DIR's ledger (see
`rules log --session DIR --format jsonl --view failures`) and a
failure is appended to the log file the pack names in `gates.log`.

\b
Exit status:
  0  PROCEED
  3  REVISE (or another action that asks for a new output)
  1  ESCALATE or STOP (or another final action)
  2  usage or pack error"""


def _read_outputs(files: tuple[str, ...]) -> tuple[list[Any], list[str]]:
    """Every JSON document of ``files``, and an error for each file that is not JSON."""
    outputs: list[Any] = []
    errors: list[str] = []
    for name in files:
        try:
            if name == "-":
                refuse_terminal_stdin("gate")
                data, more = read_capped(sys.stdin.buffer, MAX_FILE_BYTES)
            else:
                data, more = read_file_capped(name, MAX_FILE_BYTES)  # never waits on a FIFO
        except OSError as exc:
            raise UsageFailure(f"{name}: cannot read: {exc.strerror or exc}") from None
        if more:  # surely over the character limit too: the gate's error, as for any size
            errors.append(
                f"Invalid JSON: {name}: the output is over {MAX_FILE_BYTES} bytes, over the "
                f"limit of {MAX_CHARS} characters for JSON; it was not read further"
            )
            continue
        documents, error = output_documents(name, decode_output(data))
        outputs.extend(documents)
        errors.extend([error] if error else [])
    return outputs, errors


@click.command("gate", epilog=EPILOG)
@pack_option()
@click.option(
    "--stage",
    "gate",
    required=True,
    metavar="NAME",
    help="The gate to run: a name of the pack's `gates.steps` table.",
)
@click.option(
    "--retry",
    type=BoundedInt(min=0),
    default=0,
    show_default=True,
    help="How many times this output was already sent back.",
)
@session_option("Session folder: record the result in its ledger and failure log.", default=False)
@ledger_option()
@context_option("YAML or JSON file with context keys (e.g. completed_stages).")
@var_option("A context key (repeatable).")
@now_option(
    "Fix the clock, e.g. 2026-01-04T06:30:00Z (else SOURCE_DATE_EPOCH, else the real time)."
)
@format_option(
    "gate",
    show_default=True,
    help="text: the reprompt (nothing on PROCEED); json: the whole result.",
)
@click.argument("files", nargs=-1, required=True, type=click.Path(dir_okay=False, allow_dash=True))
def gate_command(
    pack_ref: str,
    gate: str,
    retry: int,
    session_dir: str | None,
    ledger_url: str | None,
    context_file: str | None,
    var_pairs: tuple[str, ...],
    now: str | None,
    output_format: str,
    files: tuple[str, ...],
) -> None:
    """Run a quality gate on JSON outputs: detect each output's schema, validate it, check
    the required schemas, decide the action; print the reprompt when it is not PROCEED.

    \b
    Examples:
      rules gate --pack quality-gate --stage IMPLEMENT todo.json evidence.json
      rules gate --pack quality-gate --stage IMPLEMENT --retry 1 \\
          --now 2026-01-04T06:30:00Z outputs.jsonl
      rules gate --pack quality-gate --stage TEST --session .rules-session \\
          --var objective="ship v2" --format json outputs.json
    """
    pack = open_pack(pack_ref, cached=True)
    outputs, input_errors = _read_outputs(files)
    try:
        request = GateRequest(
            gate,
            outputs,
            retry=retry,
            context=load_context(context_file),
            strings=parse_vars(var_pairs),
            now=now,
            input_errors=input_errors,
            session=SessionRef(session_dir, ledger_url) if session_dir is not None else None,
        )
        report = run_gate(pack, request)
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None
    click.echo(render("gate", output_format, report.document), nl=False)
    code = report.outcome.result.exit_code
    raise SystemExit(code if code != EXIT_USAGE else 1)
