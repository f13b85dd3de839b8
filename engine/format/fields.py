"""What every section of the rulepack format builds its models from: the strict base model,
names, and the ``Ref`` markers on strings that point at something else (`rules check` resolves
each marked value generically with the reference walker)."""

from __future__ import annotations

from enum import Enum
from typing import Annotated

from pydantic import BaseModel, ConfigDict, Field


class Ref(str, Enum):
    """What a marked string refers to; `rules check` resolves each kind."""

    FAILURE_TYPE = "failure type"
    SEVERITY = "severity"
    TEMPLATE = "template"
    CONTRACT = "contract"
    ACTION = "action"
    FILE = "file"
    PATTERN = "pattern"
    EXPRESSION = "expression"
    MESSAGE = "message"
    CONTEXT_KEY = "context key"
    ITEM_PART = "item part"
    GATE_EXPRESSION = "gate decision expression"
    DETECT_EXPRESSION = "detection expression"
    ITEM_EXPRESSION = "item expression"


FailureRef = Annotated[str, Ref.FAILURE_TYPE]
SeverityRef = Annotated[str, Ref.SEVERITY]
TemplateRef = Annotated[str, Ref.TEMPLATE]
ContractRef = Annotated[str, Ref.CONTRACT]
ActionRef = Annotated[str, Ref.ACTION]
PackPath = Annotated[str, Ref.FILE]
Pattern = Annotated[str, Ref.PATTERN]
Expression = Annotated[str, Ref.EXPRESSION]
Message = Annotated[str, Ref.MESSAGE]
ContextKeyRef = Annotated[str, Ref.CONTEXT_KEY]
ItemPartRef = Annotated[str, Ref.ITEM_PART]
ITEM_PARTS = ("nonce", "params")  # item parts besides context keys (SessionKeys.item)

Name = Annotated[str, Field(pattern=r"^[A-Za-z][A-Za-z0-9_.-]*$", max_length=100)]


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True, defer_build=True)
