"""`rules packs`: the packs this engine can address by name, with version and origin."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import click

from engine.cli.common import UsageFailure
from engine.cli.options import format_option
from engine.core.errors import EngineError
from engine.core.resources import builtin_pack_names, data_dir, installed_packs
from engine.format.locate import PACK_FILE
from engine.format.yamldoc import read_yaml
from engine.report import render


def _about(pack_file: Path) -> tuple[str, str]:
    """The pack's declared name and version, read from its YAML (not validated)."""
    data = read_yaml(pack_file).data
    if not isinstance(data, dict):
        return "?", "?"
    return str(data.get("rulepack", "?")), str(data.get("version", "0.0.0"))


@click.command("packs")
@format_option("packs")
def packs_command(output_format: str) -> None:
    """List the packs addressable by name: builtin ones (`builtin:NAME` or NAME) and those
    installed Python distributions ship through the `rules_engine.packs` entry points
    (`pkg:NAME` or NAME), with each pack's version and where it comes from.

    \b
    Examples:
      rules packs
      rules packs --format json
    """
    rows: list[dict[str, Any]] = []
    for name in builtin_pack_names():
        pack_file = data_dir("rules") / name / PACK_FILE
        rows.append(_row(name, f"builtin:{name}", pack_file, "builtin"))
    try:
        installed = installed_packs()
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None
    for name, pack in sorted(installed.items()):
        origin = f"{pack.distribution} {pack.version}"
        rows.append(_row(name, f"pkg:{name}", pack.folder / PACK_FILE, origin))
    click.echo(render("packs", output_format, rows), nl=False)


def _row(name: str, address: str, pack_file: Path, origin: str) -> dict[str, Any]:
    declared, version = _about(pack_file) if pack_file.is_file() else ("?", "?")
    return {
        "name": name,
        "address": address,
        "rulepack": declared,
        "version": version,
        "origin": origin,
        "path": str(pack_file.parent),
    }
