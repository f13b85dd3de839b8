"""`rules eval` and `rules render`: verdict and decision for one output, and its prompt."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import click

from engine.cli.common import (
    OUTPUT_CAP_HELP,
    UsageFailure,
    block_inputs,
    open_pack,
    output_cap,
    refuse_terminal_stdin,
)
from engine.cli.options import (
    block_option,
    context_option,
    format_option,
    item_option,
    ledger_option,
    max_output_bytes_option,
    nonce_option,
    pack_option,
    var_option,
)
from engine.cli.types import BoundedInt
from engine.core.errors import EngineError
from engine.core.files import read_file_capped
from engine.core.textio import read_capped, too_large_message
from engine.format.actions import STANDARD_ACTIONS
from engine.pack.inputs import OutputInput
from engine.report import render
from engine.session.accepted import ledger_accepted_rounds
from engine.session.evaluation import Evaluated, evaluate_output


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


def _run(
    pack_ref: str,
    block: str,
    nonce: str | None,
    var_pairs: tuple[str, ...],
    context_file: str | None,
    attempt: int | None,
    session_dir: str | None,
    ledger_url: str | None,
    item: str | None,
    keep_outputs: bool,
    model: str | None,
    previous_errors: tuple[str, ...],
    external_error: str | None,
    failure_type: str,
    max_output_bytes: int | None,
    source: str,
    reuse_latest: bool = False,
) -> Evaluated:
    pack = open_pack(pack_ref, cached=True)
    cap = output_cap(max_output_bytes, pack.model.limits.max_output_bytes)
    output, too_large = _read_output(source, cap, "render" if reuse_latest else "eval")
    if too_large:
        external_error, failure_type = too_large_message(cap), "OUTPUT_TOO_LARGE"
    try:
        variables, context = block_inputs(pack, block, context_file, var_pairs)
        missing = pack.missing_inputs(block, nonce, variables) if external_error is None else []
        if missing:
            raise UsageFailure(
                f"block {block!r} needs {' and '.join(missing)} (a caller's input, not the "
                "model's: nothing was evaluated)"
            )
        if session_dir is not None and attempt is not None:
            raise UsageFailure(
                "--attempt and --session exclude each other: with a "
                "session the ledger counts attempts"
            )
        if session_dir is None and keep_outputs:
            raise UsageFailure("--keep-outputs needs --session: outputs are kept in its ledger")
        if session_dir is None and item is not None:
            raise UsageFailure("--item needs --session: its ledger counts the item's attempts")
        given = OutputInput(
            block,
            output,
            nonce,
            variables,
            context,
            model,
            source,
            external_error,
            failure_type,
            item,
        )
        return evaluate_output(
            pack,
            given,
            attempt=attempt or 1,
            previous_errors=previous_errors,
            session_dir=session_dir,
            ledger=ledger_url,
            keep_outputs=keep_outputs,
            reuse_latest=reuse_latest,
        )
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
    evaluated = _run(**options)
    verdict, decision = evaluated.verdict, evaluated.decision
    model = evaluated.pack.model
    about = {"name": model.rulepack, "version": model.version}
    click.echo(render("evaluation", output_format, verdict, decision, about), nl=False)
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
    # the output `rules eval --session` just recorded is that attempt, not a new one
    evaluated = _run(**options, reuse_latest=True)
    pack, verdict, decision = evaluated.pack, evaluated.verdict, evaluated.decision
    output, variables, context = evaluated.output, evaluated.variables, evaluated.context
    if decision.limit is not None and decision.limit.get("presentation"):
        try:
            click.echo(pack.present(verdict, decision, context), nl=False)
        except EngineError as exc:
            raise UsageFailure(str(exc)) from None
        return
    if decision.template is None:
        # a failure no retry can fix goes back to the user with its error (seed 003 §8)
        details = f": {verdict.error}" if decision.rule == "not-retriable" and verdict.error else ""
        click.echo(
            f"error: no prompt is due: the decision is {decision.action} "
            f"({decision.reason}{details})",
            err=True,
        )
        raise SystemExit(1)
    place = None
    if options["session_dir"] is not None:
        # Deferred for start-up time: without a session no ledger is opened.
        from engine.ledger.store import locate

        place = locate(options["session_dir"], options["ledger_url"])
    try:
        prompt = pack.render_prompt(
            verdict,
            decision,
            output=output,
            nonce=options["nonce"],
            vars=variables,
            context=context,
            accepted_rounds=ledger_accepted_rounds(pack, verdict.block, context, place),
            user_context=evaluated.user_context,
        )
        if prompt.warnings and evaluated.attempt_id is not None and place is not None:
            # Deferred for start-up time: the session's module is for sessions.
            from engine.session.session import record_prompt_warnings

            record_prompt_warnings(place, evaluated.attempt_id, prompt.warnings)
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None
    for warning in prompt.warnings:
        click.echo(f"warning: {warning}", err=True)
    click.echo(prompt.text, nl=False)
