"""The models of ``triggers:`` (the trigger row of each block: when to repair, how often, what
then, with guards, truncation and after-failure policies) and ``hints:``."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from engine.format.fields import (
    ActionRef,
    ContractRef,
    Expression,
    FailureRef,
    Pattern,
    Strict,
    TemplateRef,
)


class Guard(Strict):
    """Skip the repair (go straight to the after-failure policy) when ``when`` is true."""

    name: str = Field(min_length=1)
    when: Expression
    reason: str = ""


class Truncation(Strict):
    strategy: Literal["head_tail", "head", "none"] = "head_tail"
    max_chars: int = Field(default=8000, ge=0, le=100_000_000)
    head: int = Field(default=4000, ge=0, le=100_000_000)
    tail: int = Field(default=4000, ge=0, le=100_000_000)
    marker: str = "[...truncated...]"

    @model_validator(mode="after")
    def _fits(self) -> Truncation:
        if self.strategy == "head_tail" and self.head + self.tail > self.max_chars:
            raise ValueError("head + tail must not exceed max_chars")
        return self


class AttemptPolicy(Strict):
    """The decision taken on attempt ``attempt`` when it fails and a repair is still allowed:
    which action, which template, with a micro-hint or not (attempt 1 = the original output)."""

    attempt: int = Field(ge=1, le=100)
    action: ActionRef = "REPAIR"
    template: TemplateRef | None = None
    hint: bool = True


class AfterFailure(Strict):
    action: ActionRef
    template: TemplateRef | None = None
    default: Any = None
    log: Literal["none", "info", "warning", "error"] = "none"
    reason: str = ""
    menu: str | None = Field(
        default=None,
        description="the menu (a name of `menus:`) whose options the user answers with "
        "`rules choose` after this final action",
    )

    @model_validator(mode="before")
    @classmethod
    def _shorthand(cls, value: Any) -> Any:
        return {"action": value} if isinstance(value, str) else value


class Trigger(Strict):
    """The trigger row of one block: when to repair, how often, what then."""

    contract: ContractRef | None = None
    on: list[FailureRef] = Field(default_factory=list)
    max_attempts: int = Field(default=1, ge=0, le=100)
    action: ActionRef = "REPAIR"
    template: TemplateRef | None = None
    attempts: list[AttemptPolicy] = Field(default_factory=list)
    skip_when: list[Guard] = Field(default_factory=list)
    stop_on_repeat: bool = False
    truncate: Truncation = Field(default_factory=Truncation)
    normalize: list[Literal["ascii_quotes", "strip_bom", "crlf"]] = Field(default_factory=list)
    modifications: dict[FailureRef, TemplateRef] = Field(default_factory=dict)
    default_modification: str = "Please review your output and try again."
    after_failure: AfterFailure = Field(default_factory=lambda: AfterFailure(action="CYCLE_FAIL"))
    on_not_retriable: AfterFailure | None = Field(
        default=None,
        description="what a failure type declared `retriable: false` ends with: the error "
        "goes back to the user, no retry can fix it (seed 003 §8). Default: the after-failure "
        "action, its default value and log, without its template or menu (those are for "
        "retries that ran out)",
    )
    description: str = ""


class Hint(Strict):
    """A one-line hint for the model, chosen when the error matches ``match``."""

    match: Pattern
    hint: str = Field(min_length=1)
    blocks: list[ContractRef] = Field(default_factory=list)
