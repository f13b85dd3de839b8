"""A declarative rule engine for LLM outputs.

The public API is ``load_pack`` and ``Pack``, ``run`` and ``arun`` (the repair loop around a
Python model client), ``RunResult`` and ``ModelReply`` (a reply with its usage, as a
client may return it) (plus ``check_packs`` and the error types). They are
imported on first use, so ``import engine`` (and `rules --version`) stays light.
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from engine.core.errors import EngineError, PackError, UsageError
from engine.core.version import VERSION as __version__

if TYPE_CHECKING:
    from engine.pack.compiled import Pack
    from engine.pack.loaded import check_packs, load_pack
    from engine.policy.calls.replies import ModelReply
    from engine.session.callable import arun, run
    from engine.session.run import Attempt, RunResult

__all__ = [
    "Attempt",
    "EngineError",
    "ModelReply",
    "Pack",
    "PackError",
    "RunResult",
    "UsageError",
    "__version__",
    "arun",
    "check_packs",
    "load_pack",
    "run",
]

# Deferred for start-up time: `import engine` (and `rules --version`) loads no pack and no
# session module until one of these is used; the pack loader alone is 0.5 s of imports
# (pydantic, every model and check; python -X importtime).
_LAZY = {
    "Pack": "engine.pack.compiled",
    "check_packs": "engine.pack.loaded",
    "load_pack": "engine.pack.loaded",
    "run": "engine.session.callable",
    "arun": "engine.session.callable",
    "RunResult": "engine.session.run",
    "Attempt": "engine.session.run",
    "ModelReply": "engine.policy.calls.replies",
}


def __getattr__(name: str) -> Any:
    if name in _LAZY:
        return getattr(importlib.import_module(_LAZY[name]), name)
    raise AttributeError(f"module 'engine' has no attribute {name!r}")
