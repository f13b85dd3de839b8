"""`rules schema`: the JSON Schema of the rulepack format."""

from __future__ import annotations

import click

from engine.cli.common import refuse_broken_plugins
from engine.format.schema import rulepack_schema_text
from engine.pack.sections import rulepack_model


@click.command("schema")
def schema_command() -> None:
    """Print the JSON Schema of the rulepack format.

    \b
    Point editors at it for completion, e.g. first line of pack.yaml:
      # yaml-language-server: $schema=../../contracts/rulepack.schema.json
    """
    model = rulepack_model()
    refuse_broken_plugins()
    click.echo(rulepack_schema_text(model), nl=False)
