"""The ``model_calls:`` section: its model in ``model.py``, classification, the transport
retry and prices in ``runtime.py``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from engine.format.section import BuiltinSection, Compiling
from engine.policy.calls.runtime import compile_calls

if TYPE_CHECKING:
    from engine.format.model import Rulepack


def _compile(pack: Rulepack, compiling: Compiling) -> Any:
    return compile_calls(pack.model_calls)


MODEL_CALLS = BuiltinSection("model_calls", "engine.policy.calls.model:declared", _compile)
