"""`rules prompt`: a block's first prompt, with the decisions of the previous round."""

from __future__ import annotations

import click

from engine.cli.common import UsageFailure, parse_vars
from engine.cli.opening import load_context, open_pack
from engine.cli.options import block_option, context_option, nonce_option, pack_option, var_option
from engine.cli.session_options import ledger_option, session_option
from engine.core.errors import EngineError
from engine.session.run import PromptRequest, first_prompt
from engine.session.session_ref import SessionRef


@click.command("prompt")
@pack_option("Pack name or path.")
@block_option("The block whose first prompt to print.")
@session_option(
    "Session folder: its resolved conflicts become the decisions section.", default=False
)
@ledger_option()
@context_option()
@var_option()
@nonce_option("The nonce the block's contract text shows (`format_contract`).")
def prompt_command(
    pack_ref: str,
    block: str,
    nonce: str | None,
    session_dir: str | None,
    ledger_url: str | None,
    context_file: str | None,
    var_pairs: tuple[str, ...],
) -> None:
    """Print BLOCK's first prompt (the pack's `prompts:` template).

    With --session, the decisions the user made on the previous round's conflicts are
    taken from the session's ledger (else from the context key the pack names in
    `session.decided`).

    \b
    Examples:
      rules prompt --pack ./my-pack --block ANSWER --var question=Q1 --session runs/1
      rules prompt --pack ./my-pack --block ANSWER --var question=Q1 --context ctx.yaml | model-cli
    """
    pack = open_pack(pack_ref)
    try:
        context = load_context(context_file)
        session = SessionRef(session_dir, ledger_url) if session_dir is not None else None
        request = PromptRequest(block, nonce, parse_vars(var_pairs), context, session)
        text = first_prompt(pack, request)
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None
    click.echo(text, nl=False)
