"""Finding packs: ``builtin:NAME``, ``pkg:NAME`` (a pack an installed distribution ships), a
folder holding ``pack.yaml``, a YAML file, or a bare NAME (builtin first, then installed).

Light on purpose (no YAML, no models): `rules parse` finds its pack before deciding whether
it must load it at all.
"""

from __future__ import annotations

import os
from pathlib import Path

from engine.core.errors import PackError
from engine.core.resources import builtin_pack_names, data_dir, installed_packs

PACK_FILE = "pack.yaml"
BUILTIN_PREFIX = "builtin:"
PACKAGE_PREFIX = "pkg:"


def bare_name(ref: str) -> bool:
    """Whether ``ref`` is a plain name (no path separators, not hidden)."""
    return bool(ref) and "/" not in ref and "\\" not in ref and not ref.startswith(".")


def installed_pack_file(name: str) -> Path | None:
    """The pack file of the installed pack ``name``, or None."""
    pack = installed_packs().get(name)
    if pack is None:
        return None
    candidate = pack.folder / PACK_FILE
    return candidate if candidate.is_file() else None


def display_path(path: Path) -> str:
    """A path as users should read it: relative to the working directory when inside it."""
    try:
        return os.path.relpath(path)
    except ValueError:  # pragma: no cover - other drive on Windows
        return str(path)


def resolve_pack_file(ref: str, base_dir: Path) -> Path | None:
    """Where the pack called ``ref`` lives: ``builtin:NAME``, a folder, or a YAML file."""
    if ref.startswith(BUILTIN_PREFIX):
        name = ref[len(BUILTIN_PREFIX) :]
        if not name or "/" in name or "\\" in name or name.startswith("."):
            return None
        candidate = data_dir("rules") / name / PACK_FILE
        return candidate if candidate.is_file() else None
    if ref.startswith(PACKAGE_PREFIX):
        name = ref[len(PACKAGE_PREFIX) :]
        return installed_pack_file(name) if bare_name(name) else None
    target = Path(ref)
    if not target.is_absolute():
        target = base_dir / target
    if target.is_dir():
        target = target / PACK_FILE
    if target.is_file():
        return target
    if bare_name(ref) and not Path(ref).suffix:
        if ref in builtin_pack_names():
            return resolve_pack_file(BUILTIN_PREFIX + ref, base_dir)
        return installed_pack_file(ref)
    return None


def find_pack_files(target: str) -> list[Path]:
    """The pack files ``target`` names: a pack file, a pack folder, a folder of packs, or
    ``builtin:NAME``. An unknown target raises ``PackError``."""
    if target.startswith(BUILTIN_PREFIX):
        found = resolve_pack_file(target, Path.cwd())
        if found is None:
            known = ", ".join(BUILTIN_PREFIX + n for n in builtin_pack_names())
            raise PackError(f"{target}: no such builtin pack (known: {known})")
        return [found]
    path = Path(target)
    if path.is_file():
        return [path]
    if path.is_dir():
        if (path / PACK_FILE).is_file():
            return [path / PACK_FILE]
        packs = sorted(p / PACK_FILE for p in path.iterdir() if (p / PACK_FILE).is_file())
        if packs:
            return packs
        raise PackError(f"{target}: no {PACK_FILE} here or in its sub-folders")
    if target.startswith(PACKAGE_PREFIX) or (bare_name(target) and not path.suffix):
        found = resolve_pack_file(target, Path.cwd())
        if found is not None:
            return [found]
    if target.startswith(PACKAGE_PREFIX):
        known = ", ".join(sorted(installed_packs())) or "none"
        raise PackError(f"{target}: no such installed pack (installed: {known})")
    raise PackError(f"{target}: no such file, folder, builtin or installed pack")


def find_one_pack_file(ref: str) -> Path:
    """The pack file of a reference that must name exactly one pack."""
    files = find_pack_files(ref)
    if len(files) != 1:
        raise PackError(f"{ref}: names {len(files)} packs; give one")
    return files[0]
