"""`rules parse`: deterministic parse of one block, or of many records as JSON Lines."""

from __future__ import annotations

import json
import sys

import click

from engine.cli.common import (
    EXIT_FINDINGS,
    EXIT_OK,
    OUTPUT_CAP_HELP,
    UsageFailure,
    locked_setting,
    output_cap,
    parse_vars,
    refuse_terminal_stdin,
)
from engine.cli.options import (
    block_option,
    format_option,
    max_output_bytes_option,
    nonce_option,
    pack_option,
    var_option,
)
from engine.core.errors import EngineError
from engine.core.files import open_checked, read_file_capped
from engine.core.results import Failure, ParseResult
from engine.core.textio import read_capped, too_large_message
from engine.pack.batch import parse_jsonl
from engine.pack.cache import open_parsing_pack
from engine.report import render


@click.command("parse")
@pack_option()
@block_option(required=False)
@nonce_option("The nonce the block must carry.")
@var_option("A block parameter, e.g. criterion=AC1 (repeatable).")
@click.option(
    "--jsonl",
    "jsonl",
    type=click.Path(exists=True, dir_okay=False, allow_dash=True),
    default=None,
    metavar="IN",
    help="Parse many records from a JSON Lines file ('-' for stdin).",
)
@format_option(
    "parse", help="text: the data, or 'error: MESSAGE' on stderr; json: the whole result."
)
@max_output_bytes_option(
    "A bigger output is not read: its result is OUTPUT_TOO_LARGE. " + OUTPUT_CAP_HELP
)
@click.argument(
    "source",
    type=click.Path(exists=True, dir_okay=False, allow_dash=True),
    default="-",
    required=False,
)
def parse_command(
    pack_ref: str,
    block: str | None,
    nonce: str | None,
    var_pairs: tuple[str, ...],
    jsonl: str | None,
    output_format: str,
    max_output_bytes: int | None,
    source: str,
) -> None:
    """Parse one block deterministically: JSON data on stdout, or the error.

    Reads FILE (default: stdin). On success prints the block's data as one JSON line and
    exits 0; on failure prints `error: MESSAGE` on stderr and exits 1. A nonce that differs
    from --nonce is its own failure type (NONCE_MISMATCH, shown with --format json).

    \b
    Examples (BLOCK is one of the pack's blocks; `rules explain --pack P` lists them):
      rules parse --pack sentinel --block "$BLOCK" --nonce 4F2C9A --var criterion=AC1 out.txt
      model-cli < prompt.txt | rules parse --pack sentinel --block "$BLOCK" --nonce 4F2C9A
      rules parse --pack sentinel --jsonl records.jsonl > results.jsonl

    \b
    With --jsonl each input line is {"id", "block", "nonce", "vars", "text"} ("text_base64"
    may carry raw bytes instead of "text"; --block/--nonce give defaults) and each output
    line is {"id", "ok", "data", "error", "failure_type", "warnings"}, in input order. A
    malformed line, or one longer than --max-output-bytes, is reported as that record's
    error and the run goes on.

    \b
    Exit status: 0 parsed (every record, with --jsonl), 1 parse failure (any record),
    2 usage or pack error.
    """
    try:
        pack = open_parsing_pack(pack_ref, locked=locked_setting())
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None
    variables = parse_vars(var_pairs)
    if jsonl is not None:
        failed = False
        out = sys.stdout  # one write per record, no per-line echo
        encode = json.JSONEncoder(ensure_ascii=False, allow_nan=False).encode
        cap = output_cap(max_output_bytes, pack.max_output_bytes)
        try:  # a FIFO no process writes is refused, never waited on
            if jsonl == "-":
                refuse_terminal_stdin("parse")
            records = sys.stdin.buffer if jsonl == "-" else open_checked(jsonl)
        except OSError as exc:
            raise UsageFailure(f"{jsonl}: cannot read: {exc.strerror or exc}") from None
        with records:
            for record in parse_jsonl(pack, records, block, nonce, max_line_bytes=cap):
                failed = failed or not record["ok"]
                out.write(encode(record) + "\n")
        out.flush()
        raise SystemExit(EXIT_FINDINGS if failed else EXIT_OK)
    if block is None:
        raise click.UsageError("--block is required (or use --jsonl)")
    unknown = sorted(set(variables) - pack.param_names(block))
    if unknown and block in pack.parsers:
        known = ", ".join(sorted(pack.param_names(block))) or "none"
        raise UsageFailure(
            f"unknown --var {', '.join(unknown)} for block {block!r} (its params: {known})"
        )
    cap = output_cap(max_output_bytes, pack.max_output_bytes)
    try:  # a FIFO, socket or folder is refused, never waited on
        if source == "-":
            refuse_terminal_stdin("parse")
            data, too_large = read_capped(sys.stdin.buffer, cap)
        else:
            data, too_large = read_file_capped(source, cap)
    except OSError as exc:
        raise UsageFailure(f"{source}: cannot read: {exc.strerror or exc}") from None
    if too_large:
        result = ParseResult(ok=False, failure=Failure("OUTPUT_TOO_LARGE", too_large_message(cap)))
    else:
        try:
            result = pack.parse(block, data, nonce=nonce, vars=variables)
        except EngineError as exc:
            raise UsageFailure(str(exc)) from None
    click.echo(render("parse", output_format, result), nl=False)
    if output_format == "text":  # the text format says on stderr what the JSON result holds
        if result.ok:
            for warning in result.warnings:
                click.echo(f"warning: {warning}", err=True)
        else:
            click.echo(f"error: {result.error}", err=True)
    raise SystemExit(EXIT_OK if result.ok else EXIT_FINDINGS)
