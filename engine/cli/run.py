"""`rules run`: drive the repair/retry loop around any model command."""

from __future__ import annotations

import json
import os
import shlex
import shutil
from pathlib import Path

import click

from engine.cli.common import OUTPUT_CAP_HELP, UsageFailure, parse_vars, stopping_on_sigterm
from engine.cli.opening import load_context, open_pack
from engine.cli.options import block_option, context_option, nonce_option, pack_option, var_option
from engine.cli.session_options import item_option, ledger_option, session_option
from engine.cli.types import BoundedInt, FiniteFloat
from engine.core.errors import EngineError
from engine.core.textio import MAX_OUTPUT_BYTES
from engine.format.yamldoc import read_text
from engine.policy.calls.runtime import CALL_FAILURES, TRANSPORT_RULE
from engine.session.command import DEFAULT_TIMEOUT, run_with_command
from engine.session.evaluation import InputRefused
from engine.session.recording import Outcome
from engine.session.run import RunRequest
from engine.session.session_ref import SessionRef

MAX_PROMPT_BYTES = MAX_OUTPUT_BYTES
"""The largest --prompt file: as large as the largest model output read by default."""
EXIT_INTERRUPTED = 130  # SIGINT (Ctrl-C): 128 + 2, as a shell reports it; SIGTERM is 143


class RunCommand(click.Command):
    """`rules run`, whose own options never take what belongs to the model command."""

    def parse_args(self, ctx: click.Context, args: list[str]) -> list[str]:
        check_model_command(self.get_params(ctx), args)
        return super().parse_args(ctx, args)


def check_model_command(params: list[click.Parameter], args: list[str]) -> None:
    """A usage error when the model command comes without `--` and carries options (click
    would take an option the command and rules both know, `--model`, `--timeout`, as
    rules'), or when an unknown option comes before it."""
    takes_value = {
        name: not (param.is_flag or param.count)
        for param in params
        if isinstance(param, click.Option)
        for name in (*param.opts, *param.secondary_opts)
    }
    index = 0
    while index < len(args):
        token = args[index]
        if token == "--":
            return
        name = token.split("=", 1)[0] if token.startswith("--") else token
        if name in takes_value:
            index += 2 if takes_value[name] and "=" not in token else 1
            continue
        if token.startswith("-") and token != "-":
            raise click.UsageError(
                f"no such option: {token} (the model command and its options go after "
                "`--`: rules run [OPTIONS] -- COMMAND [ARGS]...)"
            )
        rest = args[index:]
        options = [t for t in rest[1:] if t.startswith("-") and t != "-"]
        if options:
            raise click.UsageError(
                f"the model command `{shlex.join(rest)}` has options ({', '.join(options)}) "
                "but no `--` before it, so rules cannot tell its options from the model's: "
                f"rules run [OPTIONS] -- {shlex.join(rest)}"
            )
        return


def missing_command(command: tuple[str, ...]) -> str | None:
    """Why the model command cannot run (not found, not executable), or None."""
    name = command[0]
    if os.sep in name or (os.altsep and os.altsep in name):
        if not os.path.isfile(name):
            return f"model command {name!r} not found (no such file)"
        if not os.access(name, os.X_OK):
            return (
                f"model command {name!r} is not executable (chmod +x it, or run it with its "
                "interpreter)"
            )
        return None
    if shutil.which(name) is None:
        return f"model command {name!r} not found on PATH"
    return None


@click.command("run", cls=RunCommand, context_settings={"ignore_unknown_options": True})
@pack_option()
@block_option()
@nonce_option("The nonce of this cycle.")
@item_option(
    "The item whose attempts the session counts: runs with the same KEY share its count "
    "(default: the item the pack's `session.item` makes of the nonce, vars and context; "
    "without --nonce, each run is an item of its own)."
)
@var_option("A block parameter or context key (repeatable).")
@context_option("YAML or JSON file with context keys.")
@click.option(
    "--prompt",
    "prompt_file",
    type=click.Path(dir_okay=False, exists=True),
    help="UTF-8 file with the first prompt to send (default: the pack's first prompt for "
    f"the block, `prompts:`; one of them is required); at most {MAX_PROMPT_BYTES} bytes.",
)
@session_option(
    "Session folder whose ledger records every attempt (with a PostgreSQL --ledger: the "
    "session's name in it)."
)
@ledger_option()
@click.option(
    "--timeout",
    type=FiniteFloat(min=0, min_open=True),
    default=None,
    help="Seconds before the model command and its children are stopped (TERM, then KILL "
    f"after 2 s; an execution failure). [default: the pack's `limits.model_timeout`, "
    f"else {DEFAULT_TIMEOUT:g}]",
)
@click.option(
    "--max-output-bytes",
    type=BoundedInt(min=1),
    default=None,
    help="A model command printing more is stopped (an execution failure). " + OUTPUT_CAP_HELP,
)
@click.option(
    "--keep-outputs",
    is_flag=True,
    help="Keep the outputs in the session's ledger from now on (compressed), for "
    "`rules export` and `rules backtest`.",
)
@click.option(
    "--continue",
    "continue_run",
    is_flag=True,
    help="Continue the item's latest run even when it ended (its attempt count and caps go "
    "on); by default a run after a finished one (PROCEED or a final action) starts again "
    "at attempt 1. Needs --nonce or --item.",
)
@click.option("--model", help="Model id, recorded and carried into repairs.")
@click.option(
    "--wait-review",
    "review_wait",
    type=FiniteFloat(min=0, max=86_400),
    default=None,
    metavar="SECONDS",
    help="When the final decision opens a review (NEEDS_HUMAN, or the pack's "
    "`reviews.actions`), wait up to SECONDS for a person to resolve it (`rules review`, "
    "the server's /review page) and end with the resolution; 0 ends at once with the "
    "review's id on stderr. [default: the pack's `reviews.wait`, else 0]",
)
@click.option(
    "--stream",
    is_flag=True,
    help="Read the command's stdout as it arrives: at the first failure no further output "
    "can mend (a wrong opener, a second block, a field already broken) the command is "
    "ended and the repair goes out with what it printed so far.",
)
@click.argument("command", nargs=-1, required=True, type=click.UNPROCESSED)
def run_command(
    pack_ref: str,
    block: str,
    nonce: str | None,
    item: str | None,
    var_pairs: tuple[str, ...],
    context_file: str | None,
    prompt_file: str | None,
    session_dir: str,
    ledger_url: str | None,
    timeout: float | None,
    max_output_bytes: int | None,
    keep_outputs: bool,
    continue_run: bool,
    model: str | None,
    review_wait: float | None,
    stream: bool,
    command: tuple[str, ...],
) -> None:
    """Send a prompt to COMMAND on stdin, evaluate its stdout, repair or retry per the pack.

    Ends with the accepted data (JSON) on stdout, or the degraded default, and the exit
    status of the final action (as `rules eval`: 0 proceed or degrade, with a warning on
    stderr, 1 final failure, 2 usage), or 130 when interrupted (SIGINT, Ctrl-C) and 143
    when terminated (SIGTERM): the model command's process group is ended and the attempt
    in progress is not recorded. COMMAND and its arguments go after `--` (required when
    they carry options); the first prompt is --prompt, else the pack's for the block.
    A one-line report per attempt goes to stderr. A command that crashes, exits non-zero
    or times out is a failed call, classified by the pack's `model_calls` (MODEL_TIMEOUT,
    MODEL_RATE_LIMITED, MODEL_UNAVAILABLE, MODEL_ERROR, else EXECUTION_FAILED) and
    retried at the transport when the pack says so; its stderr never reaches a prompt. A
    stderr line `rules-usage: {"tokens_in": N, "tokens_out": N, "model": "..."}` reports
    the call's usage; without one it is estimated from characters (docs/costs.md).
    The session counts the attempts of an item: runs with the same --item KEY are runs of
    one item, as are runs with a --nonce whose item parts (the pack's `session.item`: by
    default the nonce and vars) are the same; a run with neither is an item of its own.
    A run ends at PROCEED or a final action; the item's next run starts at attempt 1
    (--continue goes on counting the ended run instead). The last lines of the command's
    stderr are kept with each attempt and shown after a failed call.

    \b
    Examples:
      rules run --pack sentinel --block "$BLOCK" --nonce 4F2C9A --var criterion=AC1 \\
          -- model-cli
      rules run --pack ./my-pack --block ANSWER --var question=Q1 --context ctx.yaml \\
          --prompt task.md --timeout 600 -- model-cli
      rules run --pack sentinel --block "$BLOCK" --nonce 4F2C9A --var criterion=AC1 \\
          --stream -- model-cli
      rules log                         # the attempts, from .rules-session/
    """
    if problem := missing_command(command):
        raise UsageFailure(f"{problem}: nothing was run")
    pack = open_pack(pack_ref, cached=True)
    prompt = _read_prompt(prompt_file) if prompt_file else None
    try:
        request = RunRequest(
            block,
            prompt,
            nonce,
            parse_vars(var_pairs),
            load_context(context_file),
            model,
            item,
            SessionRef(session_dir, ledger_url),
            keep_outputs,
            continue_run,
            review_wait,
        )
        with stopping_on_sigterm():
            result = run_with_command(
                pack,
                request,
                command,
                timeout=timeout,
                max_output_bytes=max_output_bytes,
                progress=_report,
                stream=stream,
            )
    except InputRefused as exc:
        raise UsageFailure(exc.said(_flag)) from None
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None
    except KeyboardInterrupt:
        click.echo("rules run: interrupted (SIGINT); the model command was stopped", err=True)
        raise SystemExit(EXIT_INTERRUPTED) from None
    decision = result.decision
    if result.review is not None:
        review = result.review
        if review.state == "resolved":
            click.echo(
                f"rules run: review {review.id} {review.resolution}"
                + (f" by {review.resolved_by}" if review.resolved_by else "")
                + f" -> {decision.action}",
                err=True,
            )
        else:
            click.echo(
                f"rules run: review {review.id} is {review.state}: resolve it with "
                f"`rules review show {review.id}` (same --session and --ledger)",
                err=True,
            )
    if decision.default is not None and decision.log in ("warning", "error"):
        click.echo(
            f"rules run: {decision.log}: {decision.action}: {decision.reason}; "
            f"continuing with {json.dumps(decision.default, ensure_ascii=False, allow_nan=False)}",
            err=True,
        )
    if decision.exit_code == 0 and result.verdict.data is not None:
        click.echo(json.dumps(result.verdict.data, ensure_ascii=False, allow_nan=False))
    elif decision.default is not None:
        click.echo(json.dumps(decision.default, ensure_ascii=False, allow_nan=False))
    raise SystemExit(decision.exit_code)


def _read_prompt(name: str) -> str:
    """The --prompt file's text: UTF-8, at most MAX_PROMPT_BYTES (read no further)."""
    text = read_text(Path(name), MAX_PROMPT_BYTES, name)
    if not isinstance(text, str):
        raise UsageFailure(f"{text.position}: {text.message} (--prompt)")
    return text


def _flag(field: str) -> str:
    """A field of the run's request as the option that gives it."""
    return {"prompt": "--prompt FILE", "continue_run": "--continue"}.get(field, f"--{field}")


def _report(outcome: Outcome) -> None:
    verdict, decision = outcome.verdict, outcome.decision
    what = (
        verdict.status
        if not verdict.failures
        else f"{verdict.status} {verdict.failure_type} ({verdict.error})"
    )
    first_line = what.splitlines()[0] if what else what
    then = decision.action
    if decision.rule == TRANSPORT_RULE:  # the same prompt again: say when
        then += f" ({decision.reason.partition(': ')[2]})"
    click.echo(f"rules run: attempt {decision.attempt}: {first_line} -> {then}", err=True)
    if outcome.stderr is not None and verdict.failure_type in CALL_FAILURES:
        # what the operator needs to see (a key missing, a quota spent); the last lines only
        lines = outcome.stderr.splitlines()
        last = f"last {len(lines)} lines" if len(lines) > 1 else "last line"
        click.echo(f"rules run: the model command's stderr ({last}):", err=True)
        for line in lines:
            click.echo(f"  {line}", err=True)
