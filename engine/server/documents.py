"""The response documents, for the OpenAPI description (the routes build plain dicts: the
same documents `rules eval --format json`, `rules render`, `rules gate --format json` and
`rules explain` give, with the pack's revision added)."""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, Field


class PackAbout(BaseModel):
    name: str
    version: str
    revision: str = Field(description="A hash of the pack's files and of the packs it extends.")


class EvaluationDocument(BaseModel):
    pack: PackAbout
    verdict: dict[str, Any]
    decision: dict[str, Any]


class RenderDocument(BaseModel):
    pack: PackAbout
    decision: dict[str, Any]
    prompt: str | None = Field(description="The prompt the decision calls for, or null.")
    presentation: str | None = Field(description="The rate limit's presentation, or null.")
    warnings: list[str]


class SessionOutputDocument(BaseModel):
    pack: PackAbout
    verdict: dict[str, Any]
    decision: dict[str, Any]
    attempt: int = Field(description="Which attempt of its item this output was.")
    attempt_id: int = Field(description="The attempt's row in the session's ledger.")
    prompt: str | None
    warnings: list[str]
    review: dict[str, Any] | None = Field(
        None,
        description="The review this decision opened (`reviews:`): its `id`, `state` and "
        "`url` (GET it for its state; a person resolves it under /v1/reviews or /review).",
    )


class PackSummary(PackAbout):
    blocks: list[str]


class PackList(BaseModel):
    packs: list[PackSummary]


class PackTables(BaseModel):
    pack: PackAbout
    description: str | None
    blocks: list[dict[str, Any]]
    guards: list[dict[str, Any]]
    failure_types: list[dict[str, Any]]
    actions: list[dict[str, Any]]
    worst_case: list[dict[str, Any]] = Field(
        description="per block: the worst-case calls of one item run and the largest "
        "prompt (`rules check --prove`)"
    )
    budgets: list[dict[str, Any]] = Field(description="the pack's budgets, as declared")
    breakers: list[dict[str, Any]] = Field(description="the pack's breakers, as declared")


class BudgetsDocument(BaseModel):
    """GET /v1/budgets: each budget's spend against its limit, each breaker's state."""

    pack: str
    session: str
    at: str
    budgets: list[dict[str, Any]] = Field(
        description="name, allows, counts, limit, per, window_seconds, blocks, action, "
        "spent, left, items_at_limit (per item run: how many reached the limit)"
    )
    breakers: list[dict[str, Any]] = Field(
        description="name, blocks, on, state (closed, open, half_open), opened_at, "
        "cooldown_ends, recent_repairs, recent_good, success, min_success, last, action"
    )


class Problem(BaseModel):
    """RFC 9457 problem details."""

    type: str
    title: str
    status: int
    detail: str
    fields: list[str] | None = None


class ReloadDocument(BaseModel):
    reloaded: bool
    packs: list[PackAbout]
