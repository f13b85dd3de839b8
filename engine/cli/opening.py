"""What a command opens: the pack it names (from its image in the compiled-pack cache, for
the commands that run once per output) and its --context file, with the --var pairs split
into a block's params and context. Not in common.py, which `rules --version` imports."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from engine.cli.common import UsageFailure, locked_setting, parse_vars
from engine.core.errors import EngineError
from engine.format.context import ContextFile
from engine.pack.cache import open_pack as open_from_cache
from engine.pack.compiled import Pack


def open_pack(ref: str, *, cached: bool = False) -> Pack:
    """The pack ``ref`` names, loaded and checked; with ``cached``, from its image in the
    compiled-pack cache when that is current (the commands run once per output)."""
    try:
        return open_from_cache(ref, locked_setting(), cached=cached)
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None


def load_context(path: str | None) -> dict[str, Any]:
    """A --context file (YAML or JSON) as a mapping; errors name the file and place."""
    if path is None:
        return {}
    # Deferred: YAML only for a --context file; `rules eval` from a pack's image imports
    # none, 17 ms saved (python -X importtime).
    from engine.format.yamldoc import read_yaml

    document = read_yaml(Path(path))
    if document.findings:
        first = document.findings[0]
        raise UsageFailure(f"{first.position}: {first.message}")
    if document.data is None:
        return {}
    if not isinstance(document.data, dict):
        raise UsageFailure(f"{path}:1:1: a context file must hold a mapping of keys")
    return ContextFile.of(document)  # errors about its keys name the file and line


def block_inputs(
    pack: Pack, block: str, context_file: str | None, var_pairs: tuple[str, ...]
) -> tuple[dict[str, str], dict[str, Any]]:
    """The --context file and --var pairs split into ``block``'s params and its context
    (``Pack.split_inputs``: EngineError when they do not fit the pack)."""
    return pack.split_inputs(block, load_context(context_file), parse_vars(var_pairs))
