"""The models of ``examples:``: tiers, selection per failure type, budgets."""

from __future__ import annotations

from typing import Literal

from pydantic import Field, model_validator

from engine.format.fields import (
    ContextKeyRef,
    FailureRef,
    PackPath,
    Strict,
)
from engine.format.section import Declared, single


class CanonicalExample(Strict):
    """A tier-1 example: a file of the pack, or a section of a document named in the context."""

    file: PackPath | None = None
    from_context: str | None = None
    heading: str | None = None

    @model_validator(mode="after")
    def _one_source(self) -> CanonicalExample:
        if (self.file is None) == (self.from_context is None):
            raise ValueError("give exactly one of `file` or `from_context` (with `heading`)")
        if self.from_context is not None and not self.heading:
            raise ValueError("`from_context` needs `heading`: the section to extract")
        return self


class ScoreRule(Strict):
    """Points for a session example: when it contains text, per referenced id (capped),
    when its length is in a band, or when it references an id from a context list."""

    points: int = Field(ge=-1000, le=1000)
    failure: list[FailureRef] = Field(default_factory=list)
    contains: str | None = None
    per_id: str | None = None
    max: int | None = Field(default=None, ge=0)
    length_min: int | None = Field(default=None, ge=0)
    length_max: int | None = Field(default=None, ge=0)
    references_any_of: str | None = None
    ids: str | None = None


class SessionExamples(Strict):
    """Tier 2: earlier rounds' outputs in the session folder, most recent first.

    The session folder and the current round are the context keys named under the pack's
    ``session:``. ``path`` and the ``exclude_if_exists`` / ``require_exists`` patterns are
    relative to the session folder and may use ``{n}`` / ``{n:03d}`` (the round) and
    ``{block}``. ``provenance`` is shown above the example with ``{round}`` and ``{ids}``:
    the ids of kind ``provenance_ids`` the example references (``provenance_no_ids`` when
    it references none).
    """

    path: str = Field(min_length=1)
    exclude_if_exists: list[str] = Field(default_factory=list)
    exclude_rounds_from: str | None = None
    require_exists: list[str] = Field(default_factory=list)
    require_rounds_from: str | None = None
    validated_in_ledger: bool = False
    scoring: list[ScoreRule] = Field(default_factory=list)
    provenance: str
    provenance_ids: str | None = None
    provenance_no_ids: str = ""


class Budgets(Strict):
    retry_tokens: int = Field(default=2000, ge=1)
    initial_tokens: int = Field(default=1000, ge=1)
    chars_per_token: int = Field(default=4, ge=1, le=100)


class ReviewedExamples(Strict):
    """The reviewed tier: outputs people wrote for the block when they edited a review in
    the session's ledger (`rules review edit`, the server's /review page), newest first.
    ``provenance`` is shown above the example with ``{review}``, ``{by}`` and ``{at}``."""

    provenance: str = "A corrected output a person accepted (review {review}, by {by}):\n"


class SelectionStep(Strict):
    """One tier to try, with the source line shown above the example."""

    tier: Literal["canonical", "session", "reviewed", "template", "none"]
    source: str = ""
    id_list: Literal["no", "prepend", "append"] = "no"


class Examples(Strict):
    """Examples attached to retry prompts: tiers, selection per failure type, budgets.

    A selection step with ``id_list`` adds the list held by the context key
    ``id_list_context`` under ``id_list_header``, before or after the example.
    """

    budgets: Budgets = Field(default_factory=Budgets)
    canonical: dict[str, list[CanonicalExample]] = Field(default_factory=dict)
    session: SessionExamples | None = None
    reviewed: ReviewedExamples = Field(default_factory=ReviewedExamples)
    templates: dict[str, PackPath] = Field(default_factory=dict)
    selection: dict[str, list[SelectionStep]] = Field(default_factory=dict)
    priority_sections: list[str] = Field(default_factory=list)
    id_list_context: ContextKeyRef | None = None
    id_list_header: str = ""
    truncation_notice: str = "\n\n[Example truncated for length]"


def declared() -> Declared:
    """The ``examples:`` section in the root model (section.py names it)."""
    return single(Examples)
