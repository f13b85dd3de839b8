"""The models of ``gates:``: schemas, required schemas per gate, detection and decision rules,
reprompt and artifacts."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, model_validator

from engine.format.fields import (
    ActionRef,
    PackPath,
    Ref,
    Strict,
    TemplateRef,
)


class GateSchema(Strict):
    """A JSON Schema file of the pack that gate outputs are checked against."""

    file: PackPath
    description: str = Field(
        default="",
        description="shown in reprompts next to a required schema that no output satisfied",
    )


class DetectRule(Strict):
    """Which schema an output is: every condition given must hold (first rule wins)."""

    schema_name: str = Field(
        alias="schema",
        description="the schema (under `gates.schemas`) "
        "an output matching this rule is checked against",
    )
    has: list[str] = Field(
        default_factory=list, description="top-level keys that must all be present"
    )
    key: str | None = Field(default=None, description="discriminator key; with `equals`")
    equals: Any = None
    when: Annotated[str, Ref.DETECT_EXPRESSION] | None = Field(
        default=None, description="an expression over `output` (and the context)"
    )

    @model_validator(mode="after")
    def _some_condition(self) -> DetectRule:
        if not self.has and self.key is None and self.when is None:
            raise ValueError("give at least one of `has`, `key` (with `equals`) or `when`")
        if self.key is None and "equals" in self.model_fields_set:
            raise ValueError("`equals` needs `key`")
        return self


class GateRule(Strict):
    """An ordered decision rule of the gates: the first whose ``when`` holds decides."""

    when: Annotated[str, Ref.GATE_EXPRESSION]
    action: ActionRef
    reason: str = ""


class GateArtifact(Strict):
    """A JSON document built for an action (from a template of purpose `artifact`) and
    validated against one of the gate schemas before it is printed or written."""

    template: TemplateRef
    schema_name: str = Field(alias="schema")


class Gates(Strict):
    """Quality gates: required schemas per gate, detection, validation, decision, reprompt."""

    schemas: dict[str, GateSchema] = Field(default_factory=dict)
    steps: dict[str, list[str]] = Field(
        default_factory=dict,
        description="gate name -> the schemas its outputs must include (each at least once, valid)",
    )
    detect: list[DetectRule] = Field(default_factory=list)
    max_retry: int = Field(default=3, ge=0, le=1000)
    decide: list[GateRule] = Field(default_factory=list)
    reprompt: TemplateRef | None = Field(
        default=None,
        description="template (purpose `reprompt`) printed when the action is not PROCEED",
    )
    output_file: str = Field(
        default="",
        description="Jinja2 template of the path an output is resubmitted "
        "from; sees `gate` and `retry`",
    )
    artifacts: dict[ActionRef, GateArtifact] = Field(default_factory=dict)
    log: str = Field(
        default="",
        description="failure log (JSON lines), relative to the session folder; empty: no log file",
    )
