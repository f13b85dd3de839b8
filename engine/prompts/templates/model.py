"""The model of ``templates:`` (a Jinja2 template file of the pack and its purpose); the
``prompts:`` section maps blocks to template names."""

from __future__ import annotations

from typing import Literal

from pydantic import Field

from engine.format.fields import (
    PackPath,
    Strict,
)


class TemplateSpec(Strict):
    """A Jinja2 template file of the pack and what it is used for."""

    file: PackPath
    purpose: Literal[
        "repair",
        "retry",
        "escalation",
        "reprompt",
        "artifact",
        "example",
        "log",
        "presentation",
        "conflicts",
        "initial",
    ] = "repair"
    format: Literal["md", "jsonl", "json", "text"] = Field(
        default="md",
        description="what the template writes; `rules log --format` picks log templates by it",
    )
    description: str = ""
