"""`rules run`: drive the repair/retry loop around any model command."""

from __future__ import annotations

import json
from pathlib import Path

import click

from engine.cli.common import (
    OUTPUT_CAP_HELP,
    UsageFailure,
    load_context,
    open_pack,
    output_cap,
    parse_vars,
    stopping_on_sigterm,
)
from engine.cli.options import (
    block_option,
    context_option,
    item_option,
    ledger_option,
    nonce_option,
    pack_option,
    session_option,
    var_option,
)
from engine.cli.types import BoundedInt, FiniteFloat
from engine.core.errors import EngineError
from engine.core.textio import MAX_OUTPUT_BYTES
from engine.format.yamldoc import read_text
from engine.session.runner import DEFAULT_TIMEOUT, run_loop
from engine.session.session import Outcome, Session

MAX_PROMPT_BYTES = MAX_OUTPUT_BYTES
"""The largest --prompt file: as large as the largest model output read by default."""


@click.command("run", context_settings={"ignore_unknown_options": True})
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
    help="UTF-8 file with the first prompt to send (default: empty); at most "
    f"{MAX_PROMPT_BYTES} bytes.",
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
@click.option("--model", help="Model id, recorded and carried into repairs.")
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
    model: str | None,
    command: tuple[str, ...],
) -> None:
    """Send a prompt to COMMAND on stdin, evaluate its stdout, repair or retry per the pack.

    Ends with the accepted data (JSON) on stdout, or the degraded default, and the exit
    status of the final action (as `rules eval`: 0 proceed or degrade, with a warning on
    stderr, 1 final failure, 2 usage).
    A one-line report per attempt goes to stderr. A command that crashes, exits non-zero
    or times out is an EXECUTION_FAILED attempt; its stderr never reaches a prompt.
    The session counts the attempts of an item across runs: runs with the same --item KEY
    continue one item, as do runs with a --nonce whose item parts (the pack's
    `session.item`: by default the nonce and vars) are the same; a run with neither is an
    item of its own.

    \b
    Examples:
      rules run --pack sentinel --block "$BLOCK" --nonce 4F2C9A --var criterion=AC1 \\
          -- python examples/fake_model.py
      rules run --pack ./my-pack --block "$BLOCK" --context ctx.yaml --prompt task.md \\
          --timeout 600 -- model-cli
      rules log                         # the attempts, from .rules-session/
    """
    pack = open_pack(pack_ref)
    prompt = _read_prompt(prompt_file) if prompt_file else ""
    try:
        variables, context = pack.split_inputs(
            block, load_context(context_file), parse_vars(var_pairs)
        )
        prompt_key = pack.model.session.prompt
        if prompt and prompt_key:
            context.setdefault(prompt_key, prompt)
        with (
            stopping_on_sigterm(),
            Session(pack, session_dir, ledger=ledger_url, keep_outputs=keep_outputs) as session,
        ):
            result = run_loop(
                session,
                block,
                command,
                prompt=prompt,
                nonce=nonce,
                item=item,
                vars=variables,
                context=context,
                model=model,
                timeout=timeout or pack.model.limits.model_timeout or DEFAULT_TIMEOUT,
                max_output_bytes=output_cap(max_output_bytes, pack.model.limits.max_output_bytes),
                progress=_report,
            )
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None
    decision = result.decision
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


def _report(outcome: Outcome) -> None:
    verdict, decision = outcome.verdict, outcome.decision
    what = (
        verdict.status
        if not verdict.failures
        else f"{verdict.status} {verdict.failure_type} ({verdict.error})"
    )
    first_line = what.splitlines()[0] if what else what
    click.echo(
        f"rules run: attempt {decision.attempt}: {first_line} -> {decision.action}", err=True
    )
