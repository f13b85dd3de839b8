"""The model of a text contract: bounds on size and lines, required and forbidden patterns."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from engine.contracts.model import ContractModel
from engine.format.fields import (
    FailureRef,
    Message,
    Pattern,
    Strict,
)


class TextRule(Strict):
    """A pattern the output must contain (``require``) or must not (``forbid``)."""

    pattern: Pattern
    message: Message | None = None
    fail: FailureRef | None = None


class TextContract(ContractModel):
    """Plain text with bounds on its size and lines, and required or forbidden patterns."""

    kind: Literal["text"]
    min_chars: int | None = Field(default=None, ge=0)
    max_chars: int | None = Field(default=None, ge=1)
    min_lines: int | None = Field(default=None, ge=0)
    max_lines: int | None = Field(default=None, ge=1)
    pattern: Pattern | None = None
    """A pattern the output must contain (a shorthand for one ``require`` rule)."""
    require: list[TextRule] = Field(default_factory=list)
    forbid: list[TextRule] = Field(default_factory=list)
    messages: dict[str, Message] = Field(default_factory=dict)
    """Wording of the size and line messages by id (min_chars, max_chars, min_lines,
    max_lines, pattern, require, forbid); ``{name}`` placeholders."""
    fail: FailureRef = "WRONG_FORMAT"
