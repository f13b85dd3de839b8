"""The model of a markdown contract: the kinds of id it references and its checks."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field, model_validator

from engine.contracts.model import ContractModel
from engine.format.fields import (
    ContextKeyRef,
    FailureRef,
    Message,
    Name,
    Pattern,
    Ref,
    Strict,
)


class _Check(Strict):
    tier: Literal["structure", "content"] = "structure"
    level: Literal["error", "warning"] = "error"
    fail: FailureRef
    message: Message | None = None


class PresentCheck(_Check):
    """The output file exists (when the output was given as a path)."""

    check: Literal["present"]


class NonEmptyCheck(_Check):
    """The output holds more than whitespace."""

    check: Literal["non_empty"]


class RequireTextCheck(_Check):
    """The output contains ``text`` (a heading, a marker) verbatim."""

    check: Literal["require_text"]
    text: str = Field(min_length=1)


class AnyOfCheck(_Check):
    """The output contains at least one of ``any``."""

    check: Literal["any_of"]
    any: list[str] = Field(min_length=1)


class MinRefsCheck(_Check):
    """At least ``min`` distinct ids of kind ``ids`` are referenced."""

    check: Literal["min_refs"]
    ids: str
    min: int = Field(default=1, ge=0)


class RefsExistCheck(_Check):
    """Every referenced id of kind ``ids`` is in the context list ``known``."""

    check: Literal["refs_exist"]
    ids: str
    known: str


class SectionCharsCheck(_Check):
    """Each referenced id's section (``heading`` + id up to the next ``## ``) has ``min`` chars."""

    check: Literal["min_section_chars"]
    ids: str
    heading: str = Field(min_length=1)
    min: int = Field(ge=0)


class SectionMarker(Strict):
    """Text every matched section must contain, and the failure when it does not."""

    text: str = Field(min_length=1)
    fail: FailureRef
    message: Message | None = Field(
        default=None, description="`{id}` (the section's id) and `{text}` are filled"
    )


class ItemWhere(Strict):
    """A condition on a context-list item: its ``key`` is one of ``in``."""

    key: str = Field(min_length=1)
    in_: list[Any] = Field(alias="in", min_length=1)


class SimilarPosition(Strict):
    """A warning when the output seems to propose again a position that was decided
    against: at least ``ratio`` of the keywords of the decision item's ``field`` are in the
    output (keywords as for soft matching), unless the item's ``unless`` key has one of its
    values (e.g. the option that took that position)."""

    field: str = Field(min_length=1)
    unless: ItemWhere | None = None
    ratio: float = Field(default=0.6, gt=0, le=1)
    stop_words: list[str] = Field(default_factory=list)
    message: Message


class DecidedSections(Strict):
    """Sections on ids that were already decided fail: the ids are the ``key`` of the items
    of the context list ``items`` (absent from the context: nothing is decided)."""

    items: ContextKeyRef
    key: str = "id"
    fail: FailureRef
    message: Message = "{id} was already decided"
    similar: SimilarPosition | None = None


class SectionsCheck(_Check):
    """Sections found by a heading pattern, each checked on its own, in document order.

    A section starts at a line matching ``heading`` (not inside a fenced code block unless
    ``in_fences``) and runs to the next line starting with ``until``, or the end. Its id is
    ``id`` with ``{0}`` (the whole match) and ``{1}``, ``{2}``... (capture groups) filled.
    Per section, in this order: the id is in the context list ``known`` (``fail`` and
    ``message``; items of the list are strings, or maps whose ``known_key`` holds the id),
    then each of ``markers`` is in the section. ``fields`` extract the first capture group
    of a pattern searched in the section (stripped); the sections become verdict data under
    ``name``: a list of ``{id, <field>: value or null}``.
    """

    check: Literal["sections"]
    tier: Literal["structure", "content"] = "content"
    name: Name
    heading: Pattern
    id: str = Field(default="{0}", min_length=1)
    until: str = Field(default="## ", min_length=1)
    in_fences: bool = False
    known: ContextKeyRef | None = None
    known_key: str | None = None
    decided: DecidedSections | None = Field(
        default=None,
        description="checked after `known`, before the markers: a section on a decided id "
        "fails; `similar` warns about a rejected position proposed again",
    )
    markers: list[SectionMarker] = Field(default_factory=list)
    fields: dict[Name, Pattern] = Field(default_factory=dict)


class SoftMatch(Strict):
    """When an item without an explicit reference counts as softly matched: the share of the
    keywords of its ``summary`` found in the output is at least ``ratio``, or the value of
    its ``phrase`` key (or ``location`` key) appears in the output verbatim. Keywords are
    lower-case runs of letters and digits, minus ``stop_words``."""

    ratio: float = Field(default=0.5, ge=0, le=1)
    summary: str | None = "summary"
    phrase: str | None = None
    location: str | None = None
    stop_words: list[str] = Field(default_factory=list)
    effect: Literal["suppress", "warn"] = "suppress"
    message: Message | None = Field(
        default=None, description="the warning of `effect: warn` (default: the check's)"
    )
    confidence: str = "MEDIUM"
    reason: str = "soft match: the output may address this item"


class CoverageCheck(_Check):
    """Every item of the context list ``items`` that matches ``where`` is referenced: by one
    of the ``referenced_by`` texts (``{id}`` filled) or as the id of a section matched by a
    sections check named in ``sections``; otherwise a finding (``{id}`` and the item's keys
    are filled in ``message``). ``soft`` declares the fallback matching. With ``name``, the
    covered items become verdict data: ``{id, match: explicit | soft | none}``."""

    check: Literal["coverage"]
    tier: Literal["structure", "content"] = "content"
    name: Name | None = None
    items: ContextKeyRef
    key: str = "id"
    where: ItemWhere | Annotated[str, Ref.ITEM_EXPRESSION] | None = None
    referenced_by: list[str] = Field(default_factory=list)
    sections: list[str] = Field(default_factory=list)
    soft: SoftMatch | None = None

    @model_validator(mode="after")
    def _some_reference(self) -> CoverageCheck:
        if not self.referenced_by and not self.sections:
            raise ValueError("give `referenced_by` or `sections`: how an item is referenced")
        return self


MarkdownCheck = Annotated[
    PresentCheck
    | NonEmptyCheck
    | RequireTextCheck
    | AnyOfCheck
    | MinRefsCheck
    | RefsExistCheck
    | SectionCharsCheck
    | SectionsCheck
    | CoverageCheck,
    Field(discriminator="check"),
]


class IdKind(Strict):
    """A kind of id the output references, found by ``pattern``."""

    pattern: Pattern
    description: str = ""


class MarkdownContract(ContractModel):
    kind: Literal["markdown"]
    ids: dict[str, IdKind] = Field(default_factory=dict)
    checks: list[MarkdownCheck] = Field(default_factory=list)

    def named_checks(self) -> dict[str, str]:
        """Checks with a ``name:`` (sections, coverage), by name → ``check:``."""
        return {
            c.name: c.check
            for c in self.checks
            if isinstance(c, SectionsCheck | CoverageCheck) and c.name
        }
