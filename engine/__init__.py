"""A declarative rule engine for LLM outputs.

The public API is ``load_pack`` and ``Pack`` (plus ``check_packs`` and the error types). They
are imported on first use, so ``import engine`` (and `rules --version`) stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.errors import EngineError, PackError

__version__ = "0.1.0"

if TYPE_CHECKING:
    from engine.pack import Pack, check_packs, load_pack

__all__ = ["EngineError", "Pack", "PackError", "__version__", "check_packs", "load_pack"]

_LAZY = {"Pack", "check_packs", "load_pack"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        from engine import pack

        return getattr(pack, name)
    raise AttributeError(f"module 'engine' has no attribute {name!r}")
