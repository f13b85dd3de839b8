"""A project's own settings: the `[tool.rules]` table of its pyproject.toml.

As ruff and pytest read theirs, every command reads the table of the nearest
pyproject.toml (the working folder, then each folder above it, up to the first
pyproject.toml found): the packs `rules check` and `rules test` take when given none, the
default session folder, the ledger and the output format. Paths are relative to the folder
of pyproject.toml, so a command gives the same answer from any folder of the project. The
command line always wins.

    [tool.rules]
    packs = ["packs/"]
    session = ".rules-session"
    ledger = "sqlite:///ledgers/rules.db"
    format = "json"
"""

from __future__ import annotations

import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from engine.core.errors import UsageError
from engine.core.suggest import did_you_mean

if sys.version_info >= (3, 11):
    import tomllib
else:  # Python 3.10: the same parser, as a package
    import tomli as tomllib

PYPROJECT = "pyproject.toml"
KEYS = ("packs", "session", "ledger", "format")
DEFAULT_PACKS = "rules"

NAMING_PACKS = (
    "name them: as arguments (`rules check packs/`), in the pre-commit hook's `args: "
    '[packs/]`, or once for every command in pyproject.toml: `[tool.rules]` `packs = ["packs/"]`'
)


@dataclass(frozen=True)
class ProjectSettings:
    """The `[tool.rules]` table, paths made absolute; None where the table says nothing."""

    file: Path | None = None
    packs: tuple[str, ...] = ()
    session: str | None = None
    ledger: str | None = None
    format: str | None = None


def find_pyproject(start: Path) -> Path | None:
    """The nearest pyproject.toml in ``start`` or a folder above it."""
    for folder in (start, *start.parents):
        candidate = folder / PYPROJECT
        if candidate.is_file():
            return candidate
    return None


def read_project_settings(start: Path | None = None) -> ProjectSettings:
    """The settings of the project ``start`` (default: the working folder) is in; empty
    settings when there is no pyproject.toml or it has no `[tool.rules]` table.
    UsageError naming the file (and line) when the file or the table is unusable."""
    try:
        found = find_pyproject((start or Path.cwd()).resolve())
    except OSError:
        return ProjectSettings()  # a working folder that went away: nothing to read
    if found is None:
        return ProjectSettings()
    try:
        document = tomllib.loads(found.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError) as exc:
        raise UsageError(
            f"{found}: cannot read ({getattr(exc, 'strerror', None) or exc})"
        ) from None
    except tomllib.TOMLDecodeError as exc:
        raise UsageError(f"{found}: not valid TOML: {exc}") from None
    table = (
        document.get("tool", {}).get("rules") if isinstance(document.get("tool"), dict) else None
    )
    if table is None:
        return ProjectSettings()
    return _settings(found, table)


def _settings(found: Path, table: Any) -> ProjectSettings:
    where = f"{found}: [tool.rules]"
    if not isinstance(table, dict):
        raise UsageError(f"{where} must be a table")
    for key in table:
        if key not in KEYS:
            hint = did_you_mean(key, KEYS, f"the keys are: {', '.join(KEYS)}")
            raise UsageError(f"{where}: unknown key {key!r} ({hint})")
    base = found.parent
    packs = table.get("packs", [])
    if isinstance(packs, str):
        packs = [packs]
    if not isinstance(packs, list) or not all(isinstance(p, str) and p for p in packs):
        raise UsageError(f'{where}: packs is a list of pack folders, e.g. packs = ["packs/"]')
    texts: dict[str, str | None] = {}
    for key in ("session", "ledger", "format"):
        value = table.get(key)
        if value is not None and (not isinstance(value, str) or not value):
            raise UsageError(f"{where}: {key} is a text, e.g. {key} = {_EXAMPLES[key]}")
        texts[key] = value
    session = texts["session"]
    ledger = texts["ledger"]
    return ProjectSettings(
        file=found,
        packs=tuple(_relative_to(base, p) for p in packs),
        session=_relative_to(base, session) if session else None,
        ledger=_ledger(base, ledger) if ledger else None,
        format=texts["format"],
    )


_EXAMPLES = {"session": '".rules-session"', "ledger": '"ledgers/rules.db"', "format": '"json"'}


def _relative_to(base: Path, ref: str) -> str:
    """A path of the table, taken from the folder of pyproject.toml (``builtin:NAME`` and
    installed packs are names, not paths)."""
    if ":" in ref.split("/", 1)[0] or Path(ref).is_absolute():
        return ref
    return str(base / ref)


def _ledger(base: Path, url: str) -> str:
    """A ledger: a plain path is taken from the folder of pyproject.toml; a URL
    (sqlite:///absolute/path, postgresql://...) is used as it is."""
    return url if "://" in url else _relative_to(base, url)


def no_default_packs(verb: str) -> str:
    """Why a command given no packs found none: ./rules/ is the default, and how to name
    the packs instead."""
    return (
        f"no packs to {verb}: with no pack named, rules reads ./{DEFAULT_PACKS}/, and "
        f"{Path.cwd()} has none; {NAMING_PACKS}"
    ).replace("rules check packs/", f"rules {verb} packs/")
