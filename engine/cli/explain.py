"""`rules explain`: a pack's trigger table, failure types and actions as tables."""

from __future__ import annotations

import click

from engine.cli.common import UsageFailure
from engine.cli.opening import open_pack
from engine.cli.options import format_option, pack_option
from engine.core.errors import EngineError
from engine.report import render
from engine.session.explain import explain, pattern_rows


@click.command("explain")
@pack_option()
@click.option(
    "--patterns",
    "show_patterns",
    is_flag=True,
    help="List the pack's patterns instead: which engine runs each one, and why.",
)
@format_option("explain", help="text, or md: the same tables as markdown to paste.")
@click.argument("block", required=False)
def explain_command(
    pack_ref: str, show_patterns: bool, output_format: str, block: str | None
) -> None:
    """Print the per-block trigger table (when to repair, how often, guards, what then).

    With --patterns, print every pattern the pack declares and the engine that runs it:
    stdlib `re` where a static check proves it runs in linear time (no nested or overlapping
    repetition, deterministic alternation), RE2 otherwise. Either way a hostile output
    cannot make a pattern backtrack.

    \b
    Examples:
      rules explain --pack sentinel
      rules explain --pack sentinel "$BLOCK"
      rules explain --pack ./my-pack --patterns
      rules explain --pack sentinel --patterns --format md
    """
    pack = open_pack(pack_ref)
    try:
        explained = explain(pack, block)
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None
    if show_patterns:
        click.echo(render("patterns", output_format, pattern_rows(pack.model, block)), nl=False)
        return
    click.echo(render("explain", output_format, explained), nl=False)
