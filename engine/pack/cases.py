"""The pack's own tests (`rules test`) as the format reads them: the models of the
``tests:`` section (a case and what it must give); its entry in the table of sections is in
sections.py, running them is selftests.py."""

from __future__ import annotations

from typing import Any, Literal

from pydantic import Field, model_validator

from engine.format.fields import ActionRef, ContractRef, FailureRef, PackPath, Strict
from engine.format.section import Declared, single


class Expectation(Strict):
    ok: bool | None = None
    status: Literal["pass", "warn", "fail"] | None = None
    failure: FailureRef | None = None
    message: str | None = None
    data: Any = None
    warnings: list[str] | None = None
    action: ActionRef | None = None
    data_includes: dict[str, Any] | None = Field(
        default=None,
        description="keys the verdict's data must hold with these values (null: absent); "
        "`data` compares the whole data",
    )
    valid: bool | None = Field(default=None, description="a gate case: the gate's verdict")
    errors: list[str] | None = Field(default=None, description="a gate case: its errors, in order")
    rule: str | None = Field(
        default=None, description="what decided: pass, exhausted, attempt:K, guard:NAME, ..."
    )
    prompt: str | None = Field(
        default=None,
        description="a golden file (relative to the case's folder) the rendered prompt must "
        "equal; `rules test --update` writes it",
    )


class PackTest(Strict):
    """One case of the pack's own tests (`rules test`): an output and what it must give."""

    name: str = Field(min_length=1)
    block: ContractRef | None = None
    gate: str | None = Field(
        default=None,
        description="instead of a block: a quality gate (a name of `gates.steps`) run on the "
        "input's JSON documents",
    )
    retry: int = Field(default=0, ge=0, description="a gate case's retry count")
    now: str | None = Field(default=None, description="a gate case's clock, ISO 8601")
    input: str | None = None
    input_file: PackPath | None = None
    nonce: str | None = None
    vars: dict[str, str] = Field(default_factory=dict)
    context: dict[str, Any] = Field(default_factory=dict)
    attempt: int = Field(default=1, ge=1)
    error: str | None = Field(
        default=None,
        description="an error another tool reported for the output (as `rules eval --error`)",
    )
    expect: Expectation

    @model_validator(mode="after")
    def _one_input(self) -> PackTest:
        if (self.input is None) == (self.input_file is None):
            raise ValueError("give exactly one of `input` or `input_file`")
        if (self.block is None) == (self.gate is None):
            raise ValueError("give exactly one of `block` or `gate`")
        return self


def declared() -> Declared:
    """The ``tests:`` section in the root model (engine.pack.sections names it)."""
    return single(list[PackTest], default_factory=list)
