"""A declarative rule engine for LLM outputs.

The public API is ``load_pack`` and ``Pack`` (plus ``check_packs`` and the error types). They
are imported on first use, so ``import engine`` (and `rules --version`) stays light.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.core.errors import EngineError, PackError
from engine.core.version import VERSION as __version__

if TYPE_CHECKING:
    from engine.pack.loaded import Pack, check_packs, load_pack

__all__ = ["EngineError", "Pack", "PackError", "__version__", "check_packs", "load_pack"]

_LAZY = {"Pack", "check_packs", "load_pack"}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        # Deferred for start-up time: `import engine` (and `rules --version`) does not load packs.
        from engine.pack import loaded

        return getattr(loaded, name)
    raise AttributeError(f"module 'engine' has no attribute {name!r}")
