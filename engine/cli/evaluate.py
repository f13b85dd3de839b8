"""`rules eval` and `rules render`: verdict and decision for one output, and its prompt."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import click

from engine.cli.common import OUTPUT_CAP_HELP, UsageFailure, parse_vars, refuse_terminal_stdin
from engine.cli.opening import load_context, open_pack
from engine.cli.options import (
    block_option,
    context_option,
    format_option,
    max_output_bytes_option,
    nonce_option,
    pack_option,
    var_option,
)
from engine.cli.session_options import item_option, ledger_option
from engine.cli.types import BoundedInt
from engine.core.errors import EngineError
from engine.core.files import read_file_capped
from engine.core.textio import read_capped
from engine.format.actions import STANDARD_ACTIONS
from engine.pack.compiled import Pack
from engine.pack.inputs import OutputInput
from engine.report import render as report
from engine.session.evaluation import (
    EvaluationRequest,
    InputRefused,
    evaluate,
    output_cap,
    render,
)
from engine.session.session_ref import SessionRef


def _exit_status_help() -> str:
    """The exit codes of the standard actions, from the action vocabulary."""

    def named(code: int) -> str:
        return ", ".join(n for n, spec in STANDARD_ACTIONS.items() if spec.exit_code == code)

    return (
        "\b\nExit status (for shell orchestrators):\n"
        f"  0  go on: {named(0)} (DEGRADE prints the pack's default as the data)\n"
        f"  1  finally failed: {named(1)}\n"
        "  2  usage or pack error\n"
        f"  3  a repair or retry is due: {named(3)} (`rules render` prints its prompt)\n"
        "  A pack's own actions declare their codes (`rules explain --pack P`)."
    )


EXIT_STATUS_HELP = _exit_status_help()


def _shared_options(command: Callable[..., Any]) -> Callable[..., Any]:
    options = [
        pack_option(),
        block_option(),
        nonce_option("The nonce of this cycle (carried into the repair)."),
        var_option("A block parameter, e.g. criterion=AC1 (repeatable)."),
        context_option("YAML or JSON file with context keys for guards and templates."),
        click.option(
            "--attempt",
            type=BoundedInt(min=1),
            default=None,
            help="Which output this is: 1 = the original (default), 2 = after one "
            "repair. With --session it comes from the ledger.",
        ),
        click.option(
            "--session",
            "session_dir",
            type=click.Path(file_okay=False),
            help="Session folder: attempts are counted and recorded in its ledger (with a "
            "PostgreSQL --ledger: the session's name in it).",
        ),
        ledger_option(),
        item_option(
            "With --session: the item whose attempts are counted, for calls with the same "
            "KEY (default: the item the pack's `session.item` makes of the nonce, vars and "
            "context)."
        ),
        click.option(
            "--keep-outputs",
            is_flag=True,
            help="Keep the outputs in the session's ledger from now on (compressed), for "
            "`rules export` and `rules backtest`.",
        ),
        click.option(
            "--continue",
            "continue_run",
            is_flag=True,
            help="With --session: count this output in the item's latest run even when it "
            "ended (PROCEED or a final action); by default it starts a new run at attempt 1.",
        ),
        click.option("--model", help="The model that produced the output (carried along)."),
        click.option(
            "--previous-error",
            "previous_errors",
            multiple=True,
            help="Error of an earlier attempt, oldest first (repeat detection).",
        ),
        click.option(
            "--error",
            "external_error",
            help="Take this error (from another parser or tool) instead of parsing.",
        ),
        click.option(
            "--failure-type",
            default="PARSE_ERROR",
            show_default=True,
            help="Failure type of --error.",
        ),
        max_output_bytes_option(
            "A bigger output is not read: its verdict is OUTPUT_TOO_LARGE. " + OUTPUT_CAP_HELP
        ),
        click.argument(
            "source", type=click.Path(dir_okay=False, allow_dash=True), default="-", required=False
        ),
    ]
    for option in reversed(options):
        command = option(command)
    return command


def _flag(field: str) -> str:
    """A field of the evaluation's input as the option that gives it."""
    if field.startswith("vars."):
        return f"--var {field.removeprefix('vars.')}=..."
    if field == "continue_run":
        return "--continue"
    return "--" + field.replace("_", "-")


def _request(
    pack: Pack,
    block: str,
    nonce: str | None,
    var_pairs: tuple[str, ...],
    context_file: str | None,
    attempt: int | None,
    session_dir: str | None,
    ledger_url: str | None,
    item: str | None,
    keep_outputs: bool,
    continue_run: bool,
    model: str | None,
    previous_errors: tuple[str, ...],
    external_error: str | None,
    failure_type: str,
    max_output_bytes: int | None,
    source: str,
    reuse_latest: bool = False,
) -> EvaluationRequest:
    """The options as the evaluation's input: the output read (at most the output cap),
    the --context file and the --var pairs parsed."""
    cap = output_cap(pack, max_output_bytes)
    output, more = _read_output(source, cap, "render" if reuse_latest else "eval")
    with _refusals():
        context = load_context(context_file)
    given = OutputInput(
        block,
        output,
        nonce,
        parse_vars(var_pairs),
        context,
        model,
        source,
        external_error,
        failure_type,
        item,
    )
    return EvaluationRequest(
        given,
        more=more,
        cap=cap,
        attempt=attempt,
        previous_errors=previous_errors,
        session=SessionRef(session_dir, ledger_url) if session_dir is not None else None,
        keep_outputs=keep_outputs,
        reuse_latest=reuse_latest,
        continue_run=continue_run,
    )


@contextlib.contextmanager
def _refusals() -> Iterator[None]:
    """A refusal of the use case as a usage failure, its fields said as options."""
    try:
        yield
    except InputRefused as exc:
        raise UsageFailure(exc.said(_flag)) from None
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None


def _read_output(source: str, cap: int, command: str) -> tuple[bytes | None, bool]:
    """The output's bytes (None when the file does not exist: a FILE_MISSING verdict),
    at most ``cap`` of them, and whether there was more."""
    if source == "-":
        refuse_terminal_stdin(command)
        with click.open_file("-", "rb") as stream:
            return read_capped(stream, cap)
    path = Path(source)
    if not path.exists():
        return None, False
    try:  # a FIFO, socket or folder is refused, never waited on
        return read_file_capped(path, cap)
    except OSError as exc:
        raise UsageFailure(f"{source}: cannot read: {exc.strerror or exc}") from None


@click.command("eval")
@_shared_options
@format_option("evaluation", help="text: a readable table; json: {verdict, decision}.")
def eval_command(output_format: str, **options: Any) -> None:
    """Evaluate one output: verdict (pass/warn/fail, failures) and decision (next action).

    Reads FILE (default: stdin).

    \b
    Examples:
      rules eval --pack sentinel --block "$BLOCK" --nonce 4F2C9A --var criterion=AC1 out.txt
      rules eval --pack sentinel --block "$BLOCK" --nonce 4F2C9A --var criterion=AC1 \\
          --attempt 2 --format json out.txt
    """
    pack = open_pack(options.pop("pack_ref"), cached=True)
    request = _request(pack, **options)
    with _refusals():
        evaluated = evaluate(pack, request)
    verdict, decision = evaluated.verdict, evaluated.decision
    model = evaluated.pack.model
    about = {"name": model.rulepack, "version": model.version}
    click.echo(report("evaluation", output_format, verdict, decision, about), nl=False)
    raise SystemExit(decision.exit_code)


eval_command.help = (eval_command.help or "") + "\n\n" + EXIT_STATUS_HELP


@click.command("render")
@_shared_options
def render_command(**options: Any) -> None:
    """Print the prompt the decision calls for (repair, retry or escalation), ready to send.

    When a rate limit decided, print its presentation (for the user) instead.

    Takes the same arguments as `rules eval`. Exits 1 with a message on stderr when no
    prompt is due (the output passed, or the final action has no template). With
    --session, an output that is the item's latest recorded attempt (e.g. just given to
    `rules eval --session`) is decided as that attempt again: nothing new is recorded.

    \b
    Examples:
      rules render --pack sentinel --block "$BLOCK" --nonce 4F2C9A --var criterion=AC1 out.txt
      rules render --pack sentinel --block "$BLOCK" --nonce 4F2C9A out.txt | model-cli
    """
    pack = open_pack(options.pop("pack_ref"), cached=True)
    # the output `rules eval --session` just recorded is that attempt, not a new one
    request = _request(pack, **options, reuse_latest=True)
    with _refusals():
        rendered = render(pack, request)
    evaluated = rendered.evaluated
    verdict, decision = evaluated.verdict, evaluated.decision
    if rendered.presentation is not None:
        click.echo(rendered.presentation, nl=False)
        return
    if rendered.prompt is None:
        # a failure no retry can fix goes back to the user with its error (seed 003 §8)
        details = f": {verdict.error}" if decision.rule == "not-retriable" and verdict.error else ""
        click.echo(
            f"error: no prompt is due: the decision is {decision.action} "
            f"({decision.reason}{details})",
            err=True,
        )
        raise SystemExit(1)
    for warning in rendered.warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(rendered.prompt, nl=False)
