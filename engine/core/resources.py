"""Where the data shipped with the engine lives: packs, prompts and contracts.

Installed from a wheel they sit in ``engine/_data/``; in a checkout (or an editable install)
they are the top-level folders next to ``engine/``.
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path

from engine.core.errors import PackError

_PACKAGE_DIR = Path(__file__).resolve().parent.parent


def data_dir(name: str) -> Path:
    """The folder of shipped data called ``name`` (``rules``, ``prompts`` or ``contracts``)."""
    installed = _PACKAGE_DIR / "_data" / name
    if installed.is_dir():
        return installed
    return _PACKAGE_DIR.parent / name


def builtin_pack_names() -> list[str]:
    root = data_dir("rules")
    if not root.is_dir():
        return []
    return sorted(p.name for p in root.iterdir() if (p / "pack.yaml").is_file())


PACK_ENTRY_POINTS = "rules_engine.packs"


@dataclass(frozen=True)
class InstalledPack:
    """A pack a Python distribution ships through the ``rules_engine.packs`` entry points."""

    name: str
    folder: Path
    distribution: str
    version: str


def installed_packs() -> dict[str, InstalledPack]:
    """The packs installed distributions declare, by entry point name (looked up only when
    asked: start-up never pays for it). An entry point's object is the pack folder (a
    ``str`` or ``Path``) or a module whose folder holds ``pack.yaml``; one that cannot be
    loaded raises ``PackError`` naming it."""
    # Deferred for start-up time: importlib.metadata is slow; only installed packs need it.
    from importlib.metadata import entry_points

    found: dict[str, InstalledPack] = {}
    for point in entry_points(group=PACK_ENTRY_POINTS):
        try:
            target = point.load()
        except Exception as exc:  # a broken distribution: say which
            raise PackError(
                f"installed pack {point.name!r} ({point.value}) cannot be loaded: "
                f"{type(exc).__name__}: {exc}"
            ) from None
        if isinstance(target, (str, os.PathLike)):
            folder = Path(target)
        elif getattr(target, "__file__", None):
            folder = Path(target.__file__).parent
        else:
            raise PackError(
                f"installed pack {point.name!r} ({point.value}) is neither a folder nor a module"
            )
        dist = point.dist
        found[point.name] = InstalledPack(
            point.name,
            folder.resolve(),
            dist.name if dist is not None else "?",
            dist.version if dist is not None else "?",
        )
    return found
