"""Prompt budgets: how many tokens a prompt takes, and fitting a repair or retry prompt into
the pack's budget (``engine.prompts.worst_case`` is what `rules check` holds to it).

Tokens are estimated, not counted: a prompt's characters divided by the pack's
``examples.budgets.chars_per_token`` (default 4, the usual ratio for English prose),
rounded up. It is the estimate the example budgets already use, so one number in the pack
says what a token is; a pack whose prompts hold delimiters, code or JSON lowers it (the
sentinel pack sets 3: SmolLM2's tokenizer reads its repair prompts at 3.0 to 3.4). The
engine needs no tokenizer and gives the same answer on every machine: a budget is a bound
the pack declares, kept with room to spare, not a model's exact context.

The pack declares its budget under ``limits.prompt_budget`` with the parts to leave out
(``drop``), in order, when a rendered prompt is over it: each part is a template variable
the engine empties (the example, the truncated output, the micro-hint), and the prompt is
rendered again with one more part emptied until it fits or no part is left.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import TYPE_CHECKING

from engine.core.tokens import estimated_tokens

if TYPE_CHECKING:
    from engine.policy.limits.model import PromptBudget


def estimate_tokens(text: str, chars_per_token: int) -> int:
    """The tokens ``text`` is estimated to take: its characters over ``chars_per_token``,
    rounded up (the module's docstring says why an estimate)."""
    return estimated_tokens(len(text), chars_per_token)


@dataclass(frozen=True)
class Fitted:
    """A prompt rendered within a budget: its text, its estimated tokens, the parts left
    out (in the order they were dropped), and a warning when anything was."""

    text: str
    tokens: int
    dropped: tuple[str, ...] = ()
    warning: str | None = None


def fit(
    render: Callable[[tuple[str, ...]], str],
    budget: PromptBudget | None,
    chars_per_token: int,
    missing: Iterable[str],
    what: str,
) -> Fitted:
    """The prompt ``render`` makes (given the parts to leave out), rendered again with one
    more of the budget's ``drop`` parts left out while it is over ``budget.tokens``. The
    engine's parts in ``missing`` are not in this prompt (a retry has no output), and a part
    whose dropping changes nothing (an example the tiers did not find, a part the template
    does not mark) is not counted as dropped. ``what`` names the prompt in the warning
    (e.g. "the repair prompt of" and the block)."""
    text = render(())
    tokens = estimate_tokens(text, chars_per_token)
    if budget is None or tokens <= budget.tokens:
        return Fitted(text, tokens)
    skipped = set(missing)
    before = tokens
    dropped: tuple[str, ...] = ()
    for part in budget.drop:
        if part in skipped:
            continue
        shorter = render((*dropped, part))
        if shorter == text:
            continue
        dropped, text = (*dropped, part), shorter
        tokens = estimate_tokens(text, chars_per_token)
        if tokens <= budget.tokens:
            break
    left = f"dropped {', '.join(dropped)}" if dropped else "nothing to drop"
    warning = (
        f"prompt budget: {what} was about {before} tokens, over the budget of "
        f"{budget.tokens}: {left}, now about {tokens} tokens"
    )
    if tokens > budget.tokens:
        warning += " (still over the budget: the model may refuse it)"
    return Fitted(text, tokens, dropped, warning)
