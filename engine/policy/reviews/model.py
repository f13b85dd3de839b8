"""The model of ``reviews:``: the final actions that open a review for a person, how long a
review may wait, what happens when nobody resolves it, and how long a run waits for it."""

from __future__ import annotations

from typing import TYPE_CHECKING

from pydantic import Field

from engine.format.actions import STANDARD_ACTIONS
from engine.format.fields import ActionRef, Strict
from engine.format.findings import FindingRule
from engine.format.section import Declared, single

if TYPE_CHECKING:
    from engine.format.model import Rulepack
    from engine.format.semantics import PackChecker

DAY = 86_400


class Webhook(Strict):
    """A URL called once a review is resolved: a JSON POST of the review (without its
    material), signed with HMAC-SHA256 of the body under the secret held by the
    environment variable ``secret_env`` (header ``X-Rules-Signature: sha256=<hex>``),
    each try bounded by ``timeout`` seconds, tried up to ``attempts`` times; a redirect
    is never followed (it counts as a failed try)."""

    url: str = Field(pattern=r"^https?://[^\s]+$", max_length=2000)
    secret_env: str = Field(pattern=r"^[A-Za-z_][A-Za-z0-9_]*$", max_length=100)
    timeout: float = Field(default=5, gt=0, le=60)
    attempts: int = Field(default=3, ge=1, le=10)


class Reviews(Strict):
    """Which final decisions open a review in the session's ledger, and its deadlines.

    A review is open, claimed (by a person, for ``claim_for`` seconds) or resolved:
    approved (the last output stands), edited (a person's output, which must pass the
    block's contract) or rejected (the item then ends with ``on_reject``). A review not
    resolved within ``resolve_within`` seconds ends with the ``fallback`` action, once.
    """

    actions: list[ActionRef] = Field(
        default_factory=lambda: ["NEEDS_HUMAN"],
        description="the final actions whose decisions open a review (empty: none do)",
    )
    resolve_within: int = Field(
        default=DAY,
        ge=1,
        le=365 * DAY,
        description="seconds a review may stay unresolved before its fallback action is taken",
    )
    fallback: ActionRef = Field(
        default="CYCLE_FAIL",
        description="the final action recorded for an item whose review was not resolved in time",
    )
    on_reject: ActionRef = Field(
        default="CYCLE_FAIL",
        description="the final action recorded for an item whose review was rejected",
    )
    claim_for: int = Field(
        default=900,
        ge=1,
        le=DAY,
        description="seconds a claim holds a review for one person; after it others may claim it",
    )
    webhook: Webhook | None = Field(
        default=None, description="a URL told of each resolution (signed, bounded, retried)"
    )
    wait: float = Field(
        default=0,
        ge=0,
        le=DAY,
        description="seconds `rules run` and engine.run wait for a review to be resolved "
        "before returning with its id (0: return at once; the caller may ask for other)",
    )


NOT_FINAL = FindingRule(
    "review-action-not-final",
    "A review setting names an action that does not end the item (REPAIR, RETRY...).",
    "Name a final action: NEEDS_HUMAN, CYCLE_FAIL, ESCALATE, STOP, SKIP, or one the pack "
    "declares with `final: true`.",
)


def check_reviews(pack: Rulepack, checker: PackChecker) -> None:
    """Every action a review opens on or ends with is final (unknown names are found by
    the reference walker)."""
    spec: Reviews = pack.reviews
    actions = {**STANDARD_ACTIONS, **pack.actions}
    named: list[tuple[tuple[str | int, ...], str]] = [
        (("reviews", "actions", index), name) for index, name in enumerate(spec.actions)
    ]
    named += [(("reviews", key), getattr(spec, key)) for key in ("fallback", "on_reject")]
    for path, name in named:
        action = actions.get(name)
        if action is not None and not action.final:
            checker.add(
                NOT_FINAL,
                f"{'.'.join(str(p) for p in path)}: {name} does not end the item",
                path,
                "name a final action",
            )


def declared() -> Declared:
    """The ``reviews:`` section in the root model (section.py names it)."""
    return single(Reviews, check_reviews)
