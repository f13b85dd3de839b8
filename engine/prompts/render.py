"""Rendering the repair prompt a decision calls for (sandboxed Jinja2)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from engine.core.errors import RenderError
from engine.core.textio import is_not_text, not_text_description
from engine.core.tokens import estimated_tokens
from engine.prompts.budget import Fitted, fit
from engine.prompts.examples.select import (
    Example,
    ReviewedExample,
    earlier_rounds,
    select_example,
)

if TYPE_CHECKING:
    from collections.abc import Callable, Collection, Mapping, Sequence

    from engine.core.verdict import Verdict
    from engine.format.model import Rulepack
    from engine.policy.triggers.decide import Decision
    from engine.policy.triggers.model import Truncation
    from engine.prompts.compiled import CompiledPrompts

_QUOTES = str.maketrans(
    {
        "“": '"',
        "”": '"',
        "„": '"',
        "‟": '"',
        "«": '"',
        "»": '"',
        "″": '"',
        "‘": "'",
        "’": "'",
        "‚": "'",
        "‛": "'",
    }
)


def normalize(text: str, steps: list[str]) -> str:
    for step in steps:
        if step == "ascii_quotes":
            text = text.translate(_QUOTES)
        elif step == "strip_bom":
            text = text.lstrip("\ufeff")
        elif step == "crlf":
            text = text.replace("\r\n", "\n")
    return text


def truncate(text: str, spec: Truncation) -> str:
    if spec.strategy == "none" or len(text) <= spec.max_chars:
        return text
    if spec.strategy == "head":
        return text[: spec.max_chars] + spec.marker
    return text[: spec.head] + spec.marker + text[len(text) - spec.tail :]


@dataclass(frozen=True)
class RenderedPrompt:
    """A prompt and what went into it (for the ledger's example log)."""

    text: str
    modification: str | None = None
    example_tier: str | None = None
    example_source: str | None = None
    example_chars: int | None = None
    example_tokens: int | None = None
    example_original_chars: int | None = None
    example_truncated: bool | None = None
    warnings: tuple[str, ...] = ()  # e.g. an example source that could not be read
    prompt_tokens: int | None = None  # estimated (engine.prompts.budget)
    dropped: tuple[str, ...] = ()  # parts left out to keep the pack's prompt budget


DROPPED_EXAMPLE = "No example attached (left out to fit the prompt budget)"
NO_EXAMPLE = {
    "example": "",
    "example_source": DROPPED_EXAMPLE,
    "example_tier": "none",
    "example_truncated": False,
}
"""What a template sees of an example the prompt budget dropped: no example, as tier none."""

NOT_IN_RETRIES = ("original_output", "micro_hint")
"""The engine's prompt parts a retry prompt does not show (it shows the example)."""


@dataclass(frozen=True)
class PromptInputs:
    """What a prompt is rendered from besides the verdict and the decision: the output
    (decoded), the nonce and params of its block, the checked context, the rounds whose
    output for the block the session's ledger accepted (for example tiers that ask for it;
    None: every round counts) and the user's text a choice added (``user_context``)."""

    output: str
    nonce: str
    params: Mapping[str, str]
    context: Mapping[str, Any]
    accepted_rounds: Collection[int] | None = None
    user_context: str = ""
    reviewed: Sequence[ReviewedExample] = ()
    """Outputs people wrote for the block (edited reviews), newest first: the reviewed tier."""


def render_prompt(
    prompts: CompiledPrompts, verdict: Verdict, decision: Decision, inputs: PromptInputs
) -> RenderedPrompt:
    """The prompt a decision calls for, by the purpose of its template."""
    if decision.template is None:
        raise RenderError(f"no prompt is due: the decision is {decision.action}")
    purpose = prompts.pack.templates[decision.template].purpose
    if purpose == "repair":
        return repair_prompt_with_example(prompts, verdict, decision, inputs)
    if purpose == "retry":
        return render_retry(prompts, verdict, decision, inputs)
    if purpose == "escalation":
        return RenderedPrompt(
            prompts.templates[decision.template].render(
                _retry_variables(verdict, decision, inputs.context, inputs.user_context)
            )
        )
    raise RenderError(
        f"template {decision.template!r} is a {purpose} template; "
        "decisions render repair, retry and escalation templates"
    )


def render_presentation(
    prompts: CompiledPrompts, verdict: Verdict, decision: Decision, context: Mapping[str, Any]
) -> str:
    """The presentation template of the rate limit that decided, for the user."""
    limit = decision.limit
    if limit is None:
        raise RenderError(f"no presentation is due: no rate limit decided ({decision.action})")
    name = limit.get("presentation")
    if not name:
        raise RenderError(f"limit {limit.get('name')!r} names no presentation template")
    return prompts.templates[name].render(
        {
            **context,
            "context": dict(context),
            "block": verdict.block,
            "limit": limit,
            "action": limit["action"],
            "message": limit["message"],
            "recommendation": limit["recommendation"],
            "figures": limit["figures"],
            "items": limit["items"],
        }
    )


def failure_variables(verdict: Verdict) -> list[dict[str, Any]]:
    """What templates see of every failure: ``type``, ``message``, ``line`` and ``path`` (the
    JSON Pointer of the value at fault in a JSON document), each always present (None when
    unknown), so a template can test ``failure.path`` under StrictUndefined."""
    return [
        {"type": f.type, "message": f.message, "line": f.line, "path": f.path}
        for f in verdict.failures
    ]


def _retry_variables(
    verdict: Verdict, decision: Decision, context: Mapping[str, Any], user_context: str = ""
) -> dict[str, Any]:
    """What retry and escalation templates see: the context's keys (as the pack declares
    them) and the engine's generic variables, which win over a context key of the same name."""
    return {
        **context,
        "context": dict(context),
        "block": verdict.block,
        "block_type": verdict.block,
        # Attempts count outputs, the original being attempt 1, as `rules run` and
        # `rules eval` print them: `max_attempts` is how many the item may have in all.
        "attempt": decision.attempt,
        "next_attempt": decision.attempt + 1,
        "max_attempts": decision.max_attempts,
        "retries_left": decision.attempts_left,
        "reason": decision.reason,
        "rule": decision.rule,
        "user_context": user_context,
        "failure_type": verdict.failure_type or "",
        "failure_message": verdict.error or "",
        "failures": failure_variables(verdict),
        "data": verdict.data if isinstance(verdict.data, dict) else {},
    }


def render_retry(
    prompts: CompiledPrompts, verdict: Verdict, decision: Decision, inputs: PromptInputs
) -> RenderedPrompt:
    """seed 003's construct_retry_prompt: banner, modification, example with its source,
    then the original prompt; the example is chosen per failure type and fits its budget."""
    assert decision.template is not None
    trigger = prompts.pack.triggers[verdict.block]
    variables = _retry_variables(verdict, decision, inputs.context, inputs.user_context)
    failure = verdict.failure_type or ""
    modification_template = trigger.modifications.get(failure)
    if modification_template is not None:
        modification = prompts.templates[modification_template].render(variables)
    else:
        modification = trigger.default_modification
    template = prompts.templates[decision.template]
    shown = {**variables, "modification": modification}

    def render(example: Mapping[str, Any], dropped: tuple[str, ...]) -> str:
        kept = NO_EXAMPLE if "example" in dropped else example
        return template.render({**shown, **kept, "dropped": list(dropped)})

    return _with_example(
        prompts, verdict, inputs, "retry", NOT_IN_RETRIES, render, modification_template
    )


def repair_prompt_with_example(
    prompts: CompiledPrompts, verdict: Verdict, decision: Decision, inputs: PromptInputs
) -> RenderedPrompt:
    """The repair prompt, with what went into its example (for the ledger's example log)."""

    def render(example: Mapping[str, Any], dropped: tuple[str, ...]) -> str:
        return repair_prompt(prompts, verdict, decision, inputs, example, dropped)

    return _with_example(prompts, verdict, inputs, "repair", (), render)


def _with_example(
    prompts: CompiledPrompts,
    verdict: Verdict,
    inputs: PromptInputs,
    what: str,
    missing: tuple[str, ...],
    render: Callable[[Mapping[str, Any], tuple[str, ...]], str],
    modification: str | None = None,
) -> RenderedPrompt:
    """The ``what`` prompt of the verdict's block, ``render(example, dropped)``: with the
    example chosen for its failure type, fitted to the pack's prompt budget (``missing``:
    the engine's parts this prompt does not show)."""
    pack = prompts.pack
    budgets = pack.examples.budgets
    chosen, example = _fitted_example(
        prompts,
        pack,
        verdict.block,
        verdict.failure_type or "",
        inputs.context,
        inputs.accepted_rounds,
        budgets.retry_tokens,
        inputs.reviewed,
    )
    fitted = fit(
        lambda dropped: render(example, dropped),
        pack.limits.prompt_budget,
        budgets.chars_per_token,
        missing,
        f"the {what} prompt of {verdict.block}",
    )
    return _rendered(fitted, chosen, example, budgets.chars_per_token, modification)


def _rendered(
    fitted: Fitted,
    chosen: Example,
    example: Mapping[str, Any],
    chars_per_token: int,
    modification: str | None = None,
) -> RenderedPrompt:
    """A fitted prompt with what went into it: the example it shows (none when the budget
    dropped it), its estimated size and what was left out (a warning when anything was)."""
    warnings = chosen.warnings + ((fitted.warning,) if fitted.warning else ())
    if "example" in fitted.dropped:
        return RenderedPrompt(
            fitted.text,
            modification=modification,
            example_tier="none",
            example_source=DROPPED_EXAMPLE,
            example_chars=0,
            example_tokens=0,
            example_original_chars=len(chosen.header) + len(chosen.text) + len(chosen.footer),
            example_truncated=False,
            warnings=warnings,
            prompt_tokens=fitted.tokens,
            dropped=fitted.dropped,
        )
    text = example["example"]
    return RenderedPrompt(
        fitted.text,
        modification=modification,
        example_tier=chosen.tier,
        example_source=chosen.source,
        example_chars=len(text),
        example_tokens=estimated_tokens(len(text), chars_per_token),
        example_original_chars=len(chosen.header) + len(chosen.text) + len(chosen.footer),
        example_truncated=example["example_truncated"],
        warnings=warnings,
        prompt_tokens=fitted.tokens,
        dropped=fitted.dropped,
    )


def repair_prompt(
    prompts: CompiledPrompts,
    verdict: Verdict,
    decision: Decision,
    inputs: PromptInputs,
    example: Mapping[str, Any] | None = None,
    dropped: Collection[str] = (),
) -> str:
    """The P10-style format-repair prompt. Besides the output, the error and the contract it
    sees the pack's context (the first prompt, where the pack names a key for it) and the
    example the tiers choose for the failure, so a repair can carry the task. The parts in
    ``dropped`` (the prompt budget's) are shown empty."""
    assert decision.template is not None
    output, nonce, params = inputs.output, inputs.nonce, inputs.params
    trigger = prompts.pack.triggers[verdict.block]
    # Trailing line breaks are not content; dropping them keeps the template's layout exact.
    original = truncate(normalize(output, list(trigger.normalize)).rstrip("\r\n"), trigger.truncate)
    if is_not_text(output):  # never pasted raw: its size and first characters, escaped
        original = not_text_description(output)
    error = verdict.error or ""
    if example is None:
        example = {"example": "", "example_source": "", "example_tier": "none"}
        example["example_truncated"] = False
    if "example" in dropped:
        example = NO_EXAMPLE
    if "original_output" in dropped:
        original = ""
    hint = prompts.micro_hint(verdict.block, error) if decision.hint else ""
    return prompts.templates[decision.template].render(
        {
            **inputs.context,
            **example,
            "block_type": verdict.block,
            "nonce": nonce,
            "parser_error": error,
            "failures": failure_variables(verdict),
            "micro_hint": "" if "micro_hint" in dropped else hint,
            "original_output": original,
            "format_contract": prompts.contract_text(verdict.block, nonce, params),
            "failure_type": verdict.failure_type or "",
            "attempt": decision.attempt,
            "next_attempt": decision.attempt + 1,
            "max_attempts": decision.max_attempts,  # outputs in all, as the terminal counts
            "params": dict(params),
            "context": dict(inputs.context),
            "dropped": list(dropped),
        }
    )


def initial_example(
    prompts: CompiledPrompts,
    pack: Rulepack,
    block: str,
    context: Mapping[str, Any],
    accepted_rounds: Collection[int] | None = None,
) -> dict[str, Any]:
    """The example of a block's first prompt: the tiers' first example (no failure type
    yet), fitted to ``examples.budgets.initial_tokens`` (seed 000: examples matter less on
    a first try)."""
    tokens = pack.examples.budgets.initial_tokens
    return _fitted_example(prompts, pack, block, "", context, accepted_rounds, tokens)[1]


def _fitted_example(
    prompts: CompiledPrompts,
    pack: Rulepack,
    block: str,
    failure: str,
    context: Mapping[str, Any],
    accepted_rounds: Collection[int] | None,
    tokens: int,
    reviewed: Sequence[ReviewedExample] = (),
) -> tuple[Example, dict[str, Any]]:
    """The example the tiers choose for ``block`` and ``failure`` (a failure type, "" for a
    first prompt), and the template variables that show it, cut to ``tokens``."""
    rounds = earlier_rounds(pack.session, context, accepted_rounds)
    ids = prompts.id_patterns(block)
    chosen = select_example(
        pack.examples, prompts.files, block, failure, context, ids, rounds, reviewed
    )
    text, cut = chosen.fitted(
        tokens * pack.examples.budgets.chars_per_token,
        pack.examples.priority_sections,
        pack.examples.truncation_notice,
    )
    return chosen, {
        "example": text,
        "example_source": chosen.source,
        "example_tier": chosen.tier,
        "example_truncated": cut,
    }
