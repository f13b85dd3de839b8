"""The models of ``rate_limits:`` (per block: limits on counts in its outputs, per round and
over a window of rounds) and ``limits:`` (bounds on outputs and model commands)."""

from __future__ import annotations

from typing import Annotated, Literal

from pydantic import Field, model_validator

from engine.format import fields


class RateCount(fields.Strict):
    """What a block's rate limits count in an output, and against what.

    ``count``: the number of matches of ``pattern`` in the output (the id is capture group
    ``id_group``; 0 is the whole match). With ``items`` (a context list), the items are the
    list's entries for which ``where`` holds (``item`` is the entry); ``total`` is their
    number, and with ``only_items`` only matches whose id is an item's id (``item_id``: the
    key of a map entry; a string entry is its own id) count.
    """

    pattern: fields.Pattern
    id_group: int = Field(default=0, ge=0, le=99)
    items: fields.ContextKeyRef | None = None
    item_id: str = "id"
    where: Annotated[str, fields.Ref.ITEM_EXPRESSION] | None = None
    only_items: bool = True
    distinct: bool = False


class RateWindow(fields.Strict):
    """The window of a block's limits: the last ``rounds`` rounds (the current included),
    summed; a window limit applies only when at least ``min_rounds`` rounds are known."""

    rounds: int = Field(default=3, ge=1, le=1000)
    min_rounds: int = Field(default=3, ge=1, le=1000)


class RateLimit(fields.Strict):
    """One limit: ``value`` of the round (or the window) compared with ``threshold``; when
    it holds, the decision's action becomes ``action``. ``message`` and ``recommendation``
    use the figures as ``{name}`` or ``{name:spec}`` (Python format specs, e.g.
    ``{ratio:.0%}``): count, total, ratio, threshold, rounds, round."""

    name: fields.Name
    over: Literal["round", "window"] = "round"
    value: Literal["count", "ratio"] = "count"
    compare: Literal[">", ">="] = ">"
    threshold: float = Field(ge=0)
    action: fields.ActionRef
    message: fields.Message
    recommendation: fields.Message = ""
    presentation: fields.TemplateRef | None = None


class RateLimits(fields.Strict):
    """A block's rate limits: what is counted, the window, and the limits in order (the
    first that holds decides; none holding leaves the decision as it is)."""

    count: RateCount
    window: RateWindow = Field(default_factory=RateWindow)
    limits: list[RateLimit] = Field(min_length=1)
    otherwise: fields.Name | None = Field(
        default=None,
        description="the outcome reported in the decision's `limit` when no limit holds "
        "(e.g. ALLOW, with the round's figures); the decision's action is unchanged. "
        "Omitted: no `limit` object then",
    )


ENGINE_PARTS = ("example", "original_output", "micro_hint")
"""The parts of a repair prompt the engine empties to keep it within its budget (a retry
prompt shows only the example). Any other name in ``drop`` is a part a template marks itself:
``{% if "checklist" not in dropped %}...{% endif %}``."""

PromptPart = Annotated[str, Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=100)]

DEFAULT_DROP = ("example", "original_output")


class PromptBudget(fields.Strict):
    """The most tokens a repair or retry prompt may take, and what to leave out, in order,
    when a rendered prompt is over it (engine.prompts.budget)."""

    tokens: int = Field(
        ge=1,
        le=10_000_000,
        description="the most tokens a repair or retry prompt may take, estimated as its "
        "characters divided by `examples.budgets.chars_per_token` (rounded up)",
    )
    drop: list[PromptPart] = Field(
        default_factory=lambda: list(DEFAULT_DROP),
        max_length=20,
        description="the parts left out one after another, in this order, while the "
        "rendered prompt is over `tokens`: example, original_output and micro_hint are "
        "emptied by the engine; another name is a part templates mark with "
        '`{% if "NAME" not in dropped %}`',
    )

    @model_validator(mode="after")
    def _once(self) -> PromptBudget:
        if len(set(self.drop)) != len(self.drop):
            raise ValueError("name each part of `drop` once")
        return self


class Limits(fields.Strict):
    """Bounds a pack may set for its own outputs and model commands; a command-line option
    wins over them, and without either the engine's defaults hold (README "Limits")."""

    max_output_bytes: int | None = Field(
        default=None,
        ge=1,
        le=1024**3,
        description="the largest output read (`--max-output-bytes`); a bigger one is "
        "OUTPUT_TOO_LARGE",
    )
    model_timeout: float | None = Field(
        default=None,
        gt=0,
        le=86400,
        description="seconds before `rules run` stops the model command (`--timeout`)",
    )
    prompt_budget: PromptBudget | None = Field(
        default=None,
        description="the token budget of repair and retry prompts, and the parts to drop "
        "to keep it; `rules check` reports a prompt that cannot fit after every drop",
    )
