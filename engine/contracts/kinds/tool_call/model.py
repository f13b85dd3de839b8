"""The model of a tool-call contract: the tools (the JSON Schema of each one's arguments and
conditions over them), how many calls may come, and the failure type of each way to fail."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from pydantic import Field

from engine.contracts.model import ContractModel
from engine.format.fields import Expression, FailureRef, Message, PackPath, Strict

ToolName = Annotated[str, Field(pattern=r"^[A-Za-z0-9_.:-]{1,128}$")]
"""A tool's name as the APIs allow it (letters, digits, ``_ . : -``)."""


class ToolCondition(Strict):
    """A condition the arguments must meet besides their schema (``arguments.start <=
    arguments.end``): checked once the schema accepts them; ``message`` when it is false."""

    check: Expression
    message: Message
    fail: FailureRef | None = None
    """The failure type when the condition is false (default: the contract's
    ``schema_failure``)."""


class Tool(Strict):
    """One tool the model may call: what it does and the schema of its arguments (inline
    under ``parameters``, as the APIs declare it, or in a pack file)."""

    description: str = ""
    parameters: dict[str, Any] | None = Field(
        default=None,
        description="the JSON Schema of the arguments, as in the API's tool definition",
    )
    schema_file: PackPath | None = None
    """A JSON Schema file of the pack for the arguments (instead of ``parameters``)."""
    conditions: list[ToolCondition] = Field(default_factory=list)


class ToolCallContract(ContractModel):
    """One or more tool calls (OpenAI chat, OpenAI Responses, Anthropic or plain
    ``{name, arguments}``, as text or an SDK's object) checked against declared tools."""

    kind: Literal["tool_call"]
    tools: dict[ToolName, Tool] = Field(min_length=1)
    min_calls: int = Field(default=1, ge=0, le=10_000)
    max_calls: int | None = Field(default=None, ge=1, le=10_000)
    """The most calls one output may hold (none: no limit)."""
    max_chars: int = Field(default=8 * 1024 * 1024, ge=1, le=256 * 1024 * 1024)
    max_depth: int = Field(default=200, ge=1, le=900)
    max_errors: int = Field(default=100, ge=1, le=10_000)
    """The most schema violations reported per call."""
    parse_failure: FailureRef = "PARSE_ERROR"
    """The output is not JSON, or its JSON holds no tool call."""
    arguments_failure: FailureRef = "PARSE_ERROR"
    """A call's arguments are a string that is not JSON."""
    unknown_tool_failure: FailureRef = "SCHEMA_ERROR"
    schema_failure: FailureRef = "SCHEMA_ERROR"
    """The arguments break the tool's schema (or a condition without its own ``fail``)."""
    count_failure: FailureRef = "WRONG_FORMAT"
    """Fewer calls than ``min_calls`` or more than ``max_calls``."""
