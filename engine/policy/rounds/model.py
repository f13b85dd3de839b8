"""The models of ``rounds:``: round statuses per block, follow rules and ``all_failed``."""

from __future__ import annotations

from pydantic import Field

from engine.format.fields import (
    ActionRef,
    ContractRef,
    Message,
    Strict,
)
from engine.format.section import Declared, single


class StatusRule(Strict):
    """When ``block`` gets ``status`` in a round, ``then_block`` gets ``then_status`` if its
    status then is one of ``if_status`` (by default: it has a valid output)."""

    block: ContractRef
    status: str
    then_block: ContractRef
    then_status: str
    if_status: list[str] = Field(default_factory=lambda: ["ok", "partial"])


class AllFailed(Strict):
    """When every block of ``rounds.blocks`` ends a round in one of ``statuses``."""

    statuses: list[str] = Field(min_length=1)
    action: ActionRef
    message: Message = Field(description="shown as the decision's reason; {round} is filled in")


class Rounds(Strict):
    """Round statuses per block (`ok`, `partial`, `failed`, `pending`, or a status a
    choice records), shown by log templates and used for `all_failed`."""

    blocks: list[ContractRef] = Field(min_length=1)
    follow: list[StatusRule] = Field(default_factory=list)
    all_failed: AllFailed | None = None


def declared() -> Declared:
    """The ``rounds:`` section in the root model (section.py names it)."""
    return single(Rounds | None, default=None)
