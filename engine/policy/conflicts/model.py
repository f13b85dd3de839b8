"""The models of ``conflicts:``: where conflicts come from, their options, order,
presentation, decisions record and termination table."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from engine.format.fields import (
    ContextKeyRef,
    ContractRef,
    Message,
    Name,
    Pattern,
    Ref,
    Strict,
    TemplateRef,
)


class SynthesisRule(Strict):
    """A middle-ground option: when ``field`` of a conflict contains one of ``contains``
    (case-insensitive), the synthesis option proposes ``proposal`` (``{field}`` of the
    conflict filled in) with its trade-off."""

    field: str = Field(min_length=1)
    contains: list[str] = Field(min_length=1)
    proposal: Message
    trade_off: Message = ""
    addresses_both: bool = False


class ConflictOption(Strict):
    """One option offered for a conflict, in the order listed."""

    label: str = Field(pattern=r"^[A-Z]$")
    name: str = Field(min_length=1, description="whose position it is, e.g. the author")
    text: Message = Field(default="", description="the option, `{field}` of the conflict filled")
    implicit_text: Message | None = Field(
        default=None, description="the text for a conflict converted from an implicit flag"
    )
    trade_off: Message = ""
    synthesis: bool = Field(
        default=False,
        description="the synthesis option: offered when a synthesis rule matches or a "
        "mediator proposed one (`rules conflicts propose`); text and trade-off come from there",
    )
    when: Annotated[str, Ref.ITEM_EXPRESSION] | None = Field(
        default=None, description="offered only when this holds (an expression over `item`)"
    )
    recommended: Annotated[str, Ref.ITEM_EXPRESSION] | None = Field(
        default=None,
        description="recommended when this holds (`item.synthesis` is the synthesis found)",
    )


class TerminationRule(Strict):
    """What an unresolved conflict of this severity does to each termination state."""

    severity: str = Field(min_length=1)
    blocks: list[str] = Field(default_factory=list)
    warns: list[str] = Field(
        default_factory=list, description="allowed with a warning that needs acknowledgement"
    )


class Termination(Strict):
    states: list[str] = Field(min_length=1)
    rules: list[TerminationRule] = Field(default_factory=list)
    warn_exit: int = Field(default=4, ge=3, le=125)


class ConflictRules(Strict):
    """Conflicts between a block's output and the items of a context list: explicit (a
    sections check of the block matched the item) or implicit (a coverage check found the
    item unaddressed; becomes a conflict when the user converts it), with options, an order,
    a presentation, a decisions record and a termination table."""

    block: ContractRef
    explicit: str = Field(min_length=1, description="verdict data of a `sections` check")
    implicit: str | None = Field(default=None, description="verdict data of a `coverage` check")
    items: ContextKeyRef
    item_id: str = "id"
    item_fields: dict[str, str] = Field(
        default_factory=dict, description="conflict field -> key of the context item"
    )
    section_fields: dict[str, str] = Field(
        default_factory=dict, description="conflict field -> field of the matched section"
    )
    severity: str = Field(default="severity", description="the item key holding the severity")
    severity_order: list[str] = Field(min_length=1)
    id_round: Pattern | None = Field(
        default=None,
        description="a pattern whose first group is the round an item was raised in, read "
        "from its id (e.g. 'R([0-9]+)-'); conflicts of one severity are ordered by it, older "
        "first, then by the id's number. Without it (or when an id does not match), by the "
        "round the conflict was found in",
    )
    options: list[ConflictOption] = Field(min_length=2)
    min_options: int = Field(default=2, ge=1)
    max_options: int = Field(default=4, ge=1, le=26)
    synthesis: list[SynthesisRule] = Field(default_factory=list)
    actions: list[Name] = Field(
        default_factory=list,
        description="who a resolution asks to act: `rules conflicts resolve --action "
        "NAME=TEXT` takes these names (the decisions template reads `actions.NAME`)",
    )
    termination: Termination | None = None
    presentation: TemplateRef
    decisions: TemplateRef
