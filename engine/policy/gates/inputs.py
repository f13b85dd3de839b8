"""What a gate is asked to run on, and the error of a gate that cannot run: apart from
the runtime (its JSON Schema validators and templates), which a pack loads only when a gate
runs, so that every command holding a ``Pack`` can name them."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from engine.core.errors import EngineError


class GateError(EngineError):
    """A gate cannot be run: unknown gate name, no decision rule applies, an artifact that
    does not validate."""


@dataclass(frozen=True)
class GateInput:
    """What one gate runs on: the gate's name, the outputs (JSON values), which retry this
    is, the context (checked against the pack's keys) and errors found reading the outputs
    (e.g. unreadable JSON: they count as errors of the gate before the schema violations)."""

    gate: str
    outputs: Sequence[Any]
    retry: int = 0
    context: Mapping[str, Any] = field(default_factory=dict)
    input_errors: Sequence[str] = ()
