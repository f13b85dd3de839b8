"""The `[tool.rules]` table of pyproject.toml as click defaults (a command's default_map).

The table is read once per command (engine/format/project.py); here its values become the
defaults of the options each command has: the packs of `check` and `test`, the session
folder where a command has a default one, the ledger, and the output format where the
command offers it. What the command line gives wins, as does $RULES_LEDGER over the
table's ledger (click reads an option's environment variable before its default_map).
"""

from __future__ import annotations

from typing import Any

import click

from engine.cli.common import UsageFailure
from engine.core.errors import EngineError
from engine.format.project import ProjectSettings, read_project_settings

PACK_COMMANDS = ("check", "test")
"""The commands whose PATHS default to the table's packs (else ./rules/)."""


def project_settings() -> ProjectSettings:
    """The working folder's project settings; a usage error when they are unusable."""
    try:
        return read_project_settings()
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None


def default_map(name: str, command: click.Command, settings: ProjectSettings) -> dict[str, Any]:
    """The defaults the table gives command ``name`` (and, for a group, its commands)."""
    if isinstance(command, click.Group):
        ctx = click.Context(command)
        return {
            sub: default_map(sub, child, settings)
            for sub in command.list_commands(ctx)
            if (child := command.get_command(ctx, sub)) is not None
        }
    defaults: dict[str, Any] = {}
    for param in command.params:
        if param.name == "paths" and name in PACK_COMMANDS and settings.packs:
            defaults["paths"] = list(settings.packs)
        elif param.name == "session_dir" and settings.session and param.default is not None:
            defaults["session_dir"] = settings.session
        elif param.name == "ledger_url" and settings.ledger:
            defaults["ledger_url"] = settings.ledger
        elif param.name == "output_format" and settings.format:
            choices = getattr(param.type, "choices", None)
            if choices is None or settings.format in choices:
                defaults["output_format"] = settings.format
    return defaults
