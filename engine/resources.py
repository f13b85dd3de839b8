"""Where the data shipped with the engine lives: packs, prompts and contracts.

Installed from a wheel they sit in ``engine/_data/``; in a checkout (or an editable install)
they are the top-level folders next to ``engine/``.
"""

from __future__ import annotations

from pathlib import Path

_PACKAGE_DIR = Path(__file__).resolve().parent


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
