"""The ``model_calls:`` section: its model in ``model.py``, classification, the transport
retry and prices in ``runtime.py``."""

from __future__ import annotations

from engine.format.section import BuiltinSection

MODEL_CALLS = BuiltinSection(
    "model_calls",
    "engine.policy.calls.model:declared",
    "engine.policy.calls.runtime:compile_section",
)
