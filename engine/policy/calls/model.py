"""The models of ``model_calls:``: classification rules, the transport retry, how a model
command reports its usage, and prices per model."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated

from pydantic import Field, model_validator

from engine.format.fields import FailureRef, Pattern, Strict
from engine.format.findings import FindingRule
from engine.format.section import Declared, single
from engine.policy.calls.runtime import (
    CALL_FAILURES,
    MODEL_RATE_LIMITED,
    MODEL_TIMEOUT,
    MODEL_UNAVAILABLE,
    USAGE_PREFIX,
)

if TYPE_CHECKING:
    from engine.format.model import Rulepack
    from engine.format.semantics import PackChecker

ClassName = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=100)]
HttpStatus = Annotated[int, Field(ge=100, le=599)]
ExitStatus = Annotated[int, Field(ge=-64, le=255)]


class Classify(Strict):
    """A failed model call is of ``type`` when every matcher the rule gives matches."""

    type: FailureRef = Field(description="the failure type the call gets")
    exception: list[ClassName] = Field(
        default_factory=list,
        description="`engine.run`: the exception's class or one of its bases is named here "
        "(e.g. RateLimitError)",
    )
    http_status: list[HttpStatus] = Field(
        default_factory=list,
        description="`engine.run`: the HTTP status the exception carries (`status_code`, "
        "or `response.status_code`)",
    )
    message: Pattern | None = Field(
        default=None, description="`engine.run`: a pattern found in the exception's message"
    )
    exit_status: list[ExitStatus] = Field(
        default_factory=list,
        description="`rules run`: the model command's exit status (negative: the signal "
        "that killed it)",
    )
    stderr: Pattern | None = Field(
        default=None, description="`rules run`: a pattern found in the tail of the stderr"
    )
    timed_out: bool | None = Field(
        default=None, description="the engine stopped waiting for the call (`timeout`)"
    )
    retry_after: bool | None = Field(
        default=None,
        description="the failure carries a Retry-After (an exception's response header; a "
        "command's `rules-usage:` line) (true) or none (false)",
    )

    @model_validator(mode="after")
    def _one_matcher(self) -> Classify:
        if not (
            self.exception
            or self.http_status
            or self.message is not None
            or self.exit_status
            or self.stderr is not None
            or self.timed_out is not None
            or self.retry_after is not None
        ):
            raise ValueError(
                "a rule needs a matcher: exception, http_status, message, exit_status, "
                "stderr, timed_out or retry_after"
            )
        return self


class Retry(Strict):
    """Resend the same prompt after a classified failure, with exponential backoff. A
    transport retry never changes the prompt and never spends a repair."""

    on: list[FailureRef] = Field(
        default_factory=lambda: [MODEL_RATE_LIMITED, MODEL_UNAVAILABLE, MODEL_TIMEOUT],
        min_length=1,
        description="the failure types retried",
    )
    max_retries: int = Field(default=3, ge=0, le=100, description="retries of one prompt")
    initial: float = Field(default=1.0, gt=0, le=3600, description="seconds before the first")
    multiplier: float = Field(default=2.0, ge=1, le=10, description="growth per retry")
    jitter: float = Field(
        default=0.5, ge=0, le=1, description="the part of each wait drawn at random (0..1)"
    )
    ceiling: float = Field(
        default=60.0, gt=0, le=86400, description="the longest wait, Retry-After included"
    )
    retry_after: bool = Field(
        default=True,
        description="wait at least what Retry-After asks; a longer wait than `ceiling` "
        "is not made (the failure goes to the pack's triggers)",
    )

    @model_validator(mode="after")
    def _ceiling(self) -> Retry:
        if self.initial > self.ceiling:
            raise ValueError("initial must be at most ceiling")
        return self


class CommandUsage(Strict):
    """How a model command reports its usage to `rules run`, and how usage is estimated
    when it does not."""

    stderr_prefix: str | None = Field(
        default=USAGE_PREFIX,
        min_length=1,
        max_length=100,
        description="a stderr line starting with this, then a JSON object "
        '(`{"tokens_in": 812, "tokens_out": 64, "model": "..."}`); null: not read',
    )
    chars_per_token: int = Field(
        default=4, ge=1, le=100, description="characters a token when usage is estimated"
    )


class Price(Strict):
    """What a model's tokens cost, in the currency the pack counts in."""

    input: float = Field(ge=0, description="the price of `per` tokens in")
    output: float = Field(ge=0, description="the price of `per` tokens out")
    per: int = Field(default=1_000_000, ge=1, description="how many tokens the prices are for")


class ModelCalls(Strict):
    """How model calls are governed: failures classified, the transport retry, usage read
    and priced."""

    classify: list[Classify] = Field(
        default_factory=list, description="rules tried in order, before the engine's defaults"
    )
    defaults: bool = Field(
        default=True,
        description="after the pack's rules, the engine's: the exceptions of the openai, "
        "anthropic and httpx clients (and their names in a command's stderr)",
    )
    retry: Retry | None = Field(default=None, description="the transport retry; none when null")
    usage: CommandUsage = Field(default_factory=CommandUsage)
    pricing: dict[str, Price] = Field(
        default_factory=dict,
        description="per model name (or the start of one: `gpt-4o-mini` prices "
        "`gpt-4o-mini-2024-07-18`)",
    )


RETRY_NEVER_APPLIES = FindingRule(
    "retry-never-applies",
    "A transport retry lists a failure type that no failed model call gets.",
    "List failed-call types (MODEL_TIMEOUT, MODEL_RATE_LIMITED, MODEL_UNAVAILABLE, "
    "MODEL_ERROR, EXECUTION_FAILED or a type of a classify rule); repairs are the "
    "triggers' business.",
)


def check_model_calls(pack: Rulepack, checker: PackChecker) -> None:
    """A transport retry only ever sees failed calls: a type it lists that no failed call
    can get (PARSE_ERROR) is a mistake, named where it is written."""
    section = pack.model_calls
    if section is None or section.retry is None:
        return
    possible = {*CALL_FAILURES, *(rule.type for rule in section.classify)}
    for index, failure_type in enumerate(section.retry.on):
        if failure_type not in possible:
            checker.add(
                RETRY_NEVER_APPLIES,
                f"{failure_type!r} is never the failure type of a failed model call: the "
                "transport retry would never resend for it",
                ("model_calls", "retry", "on", index),
                "retry failed-call types here; a contract failure is repaired by the "
                "block's trigger",
            )


def declared() -> Declared:
    """The ``model_calls:`` section in the root model (section.py names it)."""
    return single(
        ModelCalls | None,
        check_model_calls,
        default=None,
        description="how model calls are governed: failures classified and retried at "
        "the transport, usage read or estimated, prices per model",
    )
