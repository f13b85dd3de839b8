"""A declarative rule engine for LLM outputs."""

from __future__ import annotations

__version__ = "0.1.0"

from engine.errors import EngineError, PackError
from engine.pack import Pack, check_packs, load_pack

__all__ = ["EngineError", "Pack", "PackError", "__version__", "check_packs", "load_pack"]
