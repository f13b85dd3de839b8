"""The format's own vocabulary: the sections every other section refers to (severities,
failure types, actions, context keys, session keys), their models, and the actions every
pack can use without declaring them.

They are sections of the format like the others (their entries are in section.py); the
checks of the references to them are the format's generic walk (semantics.py).
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field

from engine.format.fields import ContextKeyRef, ItemPartRef, SeverityRef, Strict


class FailureType(Strict):
    """One kind of failure: how bad it is, whether a retry can help, what to tell the model."""

    severity: SeverityRef = "HIGH"
    retriable: bool = True
    explain: str = ""
    description: str = ""


class ActionSpec(Strict):
    """An action a decision can take. The engine knows the standard ones; packs may add more."""

    final: bool = True
    exit_code: int = Field(default=1, ge=0, le=125)
    description: str = ""


class ContextKey(Strict):
    """A context key the pack reads, with its type."""

    type: Literal["string", "int", "number", "bool", "list", "map", "path", "any"] = "string"
    items: Literal["string", "int", "number", "bool", "map", "any"] | None = None
    required: bool = False
    default: Any = None
    env: str | None = Field(
        default=None,
        pattern=r"^[A-Za-z_][A-Za-z0-9_]*$",
        description="environment variable read when no value is given (before `default`)",
    )
    description: str = ""


class SessionKeys(Strict):
    """Which of the pack's context keys tell the engine about the session (all optional),
    and whether a session keeps its outputs."""

    folder: ContextKeyRef | None = Field(
        default=None,
        description="the folder holding earlier rounds' outputs (example "
        "tier 2) and, when it has one, the ledger whose accepted rounds count",
    )
    round: ContextKeyRef | None = Field(
        default=None,
        description="the current round number: recorded with each attempt "
        "in the ledger, and the start of example tier 2's search",
    )
    decided: ContextKeyRef | None = Field(
        default=None,
        description="receives the session's resolved conflicts ([{id, option, summary, "
        "decision, rationale, <fields>...}]) unless the context already gives it",
    )
    history: ContextKeyRef | None = Field(
        default=None,
        description="earlier rounds' counts of a block's rate limits, "
        "[[round, count, total], ...], used when no session ledger holds them",
    )
    prompt: ContextKeyRef | None = Field(
        default=None,
        description="receives the text of `rules run --prompt` unless the context already gives it",
    )
    item: list[ItemPartRef] = Field(
        default_factory=lambda: ["nonce", "params"],
        min_length=1,
        description="what identifies an item, whose attempts are counted together (with its "
        "block): `nonce`, `params` (the block's --var values) and context keys; a new value "
        "of any of them is a new item whose first output is attempt 1 (e.g. [round])",
    )
    keep_outputs: bool = Field(
        default=False,
        description="keep every output a session evaluates with this pack in its ledger, "
        "compressed, as `--keep-outputs` does: `rules export` and `rules backtest` replay them",
    )
