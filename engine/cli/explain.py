"""`rules explain`: a pack's trigger table, failure types and actions as tables."""

from __future__ import annotations

import click

from engine.cli.common import open_pack
from engine.cli.formats import format_explain


@click.command("explain")
@click.option("--pack", "pack_ref", required=True, help="Pack: builtin name, folder or file.")
@click.argument("block", required=False)
def explain_command(pack_ref: str, block: str | None) -> None:
    """Print the per-block trigger table (when to repair, how often, guards, what then).

    \b
    Examples:
      rules explain --pack sentinel
      rules explain --pack sentinel "$BLOCK"
    """
    pack = open_pack(pack_ref)
    if block is not None:
        pack.contract_kind(block)
    click.echo(format_explain(pack.model, block), nl=False)
