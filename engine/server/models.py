"""The request documents (pydantic: a wrong field type is a 422 naming the field)."""

from __future__ import annotations

from dataclasses import fields
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from engine.pack.inputs import OutputInput
from engine.policy.calls.replies import Usage

STRICT = ConfigDict(extra="forbid", strict=True)

INPUT_FIELDS = {f.name for f in fields(OutputInput)}
"""The fields of a request that are inputs of its output (the rest choose the pack and, for
POST /v1/evaluate, the attempt)."""


class OutputRequest(BaseModel):
    """One model output for a pack's block, as `rules eval` takes it."""

    model_config = STRICT

    pack: str = Field(description="The name of a served pack (GET /v1/packs).")
    block: str = Field(description="The block (contract) the output is for.")
    output: str = Field(description="The model's output, as text.")
    nonce: str | None = Field(None, description="The nonce of this cycle (delimited blocks).")
    vars: dict[str, str] = Field(
        default_factory=dict,
        description="Block parameters and context strings (`--var KEY=VALUE`).",
    )
    context: dict[str, Any] = Field(
        default_factory=dict, description="Context keys for guards and templates (`--context`)."
    )
    error: str | None = Field(
        None, description="Take this error (from another parser or tool) instead of parsing."
    )
    failure_type: str = Field("PARSE_ERROR", description="The failure type of `error`.")
    model: str | None = Field(None, description="The model that produced the output.")

    def given(self) -> OutputInput:
        """The request's output and inputs as the engine takes them (read from no file)."""
        return OutputInput(path="-", **self.model_dump(include=INPUT_FIELDS))


class EvaluateRequest(OutputRequest):
    attempt: int = Field(1, ge=1, le=1_000_000, description="1 = the original output.")
    previous_errors: list[str] = Field(
        default_factory=list, description="Errors of earlier attempts, oldest first."
    )


class UsageRequest(BaseModel):
    """What the model call that gave the output used, as its provider reported it."""

    model_config = STRICT

    tokens_in: int | None = Field(
        None, ge=0, le=1_000_000_000, description="Tokens of the prompt (input tokens)."
    )
    tokens_out: int | None = Field(
        None, ge=0, le=1_000_000_000, description="Tokens of the output (output tokens)."
    )
    model: str | None = Field(
        None,
        max_length=200,
        description="The model that answered, priced by the pack's `model_calls.pricing` "
        "(default: the request's `model`).",
    )

    def usage(self) -> Usage:
        return Usage(self.tokens_in, self.tokens_out, self.model)


class SessionOutputRequest(OutputRequest):
    item: str | None = Field(
        None,
        description="The item whose attempts are counted (default: the one the pack's "
        "`session.item` makes of the nonce, vars and context).",
    )
    continue_run: bool = Field(
        False,
        description="Count this output in the item's latest run even when that run ended "
        "(PROCEED or a final action): its attempt count and caps go on. By default the "
        "output after a finished run starts a new run at attempt 1, as `rules run` and "
        "`rules eval --session` do without `--continue`.",
    )
    usage: UsageRequest | None = Field(
        None,
        description="The call's usage, recorded with the attempt and priced; without it "
        "the attempt records no tokens.",
    )
