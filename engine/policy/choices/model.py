"""The models of ``menus:``: the options a final decision offers the user."""

from __future__ import annotations

from pydantic import Field, model_validator

from engine.format.fields import (
    ActionRef,
    Name,
    Strict,
)


class ChoiceEffect(Strict):
    """What choosing an option does (exactly one key)."""

    status: str | None = Field(
        default=None,
        max_length=40,
        description="record this status for the item's block in its round (e.g. SKIP)",
    )
    retry: int | None = Field(
        default=None,
        ge=1,
        le=10,
        description="allow this many more attempts; `--text` goes into the next prompt "
        "(the `user_context` variable)",
    )
    end: ActionRef | None = Field(default=None, description="end the item with this action")
    pause: bool = Field(default=False, description="pause the session until `--resume`")

    @model_validator(mode="after")
    def _one_effect(self) -> ChoiceEffect:
        given = [self.status is not None, self.retry is not None, self.end is not None, self.pause]
        if sum(given) != 1:
            raise ValueError("give exactly one of `status`, `retry`, `end` or `pause: true`")
        return self


class ChoiceOption(Strict):
    key: Name
    label: str = Field(min_length=1)
    effect: ChoiceEffect


class Menu(Strict):
    """The options a final decision offers the user (`rules choose ITEM OPTION`), numbered
    from 1 in this order."""

    options: list[ChoiceOption] = Field(min_length=1, max_length=20)
