"""The engine's one estimate of tokens: characters over the pack's characters per token,
rounded up. Prompt budgets, the worst case `rules check --prove` computes, the usage of a
call that reported none and the tokens a cut stream did not generate all count with it, so
one number in the pack (``examples.budgets.chars_per_token``) says what a token is
everywhere (``engine.prompts.budget`` says why an estimate)."""

from __future__ import annotations


def estimated_tokens(chars: int, chars_per_token: int) -> int:
    """The tokens ``chars`` characters are estimated to take."""
    return -(-chars // chars_per_token)
