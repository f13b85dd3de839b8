"""What a policy can spend, proven from the pack alone (`rules check --prove`, `rules
explain`): for each block, what every failure type ends with, the worst-case model calls of
one item run and the worst-case size of a prompt the policy sends; and the findings of a
policy that can loop without a bound or that wants more calls than a budget of it allows.

The figures, per block:

- **calls**: the first call, then a repair or retry for each attempt the trigger allows
  (``max_attempts`` when it repairs anything), each times ``1 + transport retries`` (the
  ``max_retries`` of ``model_calls.retry``: each prompt may be resent that often). Attempts
  a person grants with ``rules choose`` are theirs to grant: not counted.
- **tokens, cost**: what the repairs' prompts alone take (repairs times the largest
  prompt's tokens; at the cheapest input price of ``model_calls.pricing``): a floor, as the
  first prompt and the outputs are the caller's and the model's. A budget per item run of
  tokens or cost under that floor is exceeded by construction.
- **prompt**: the largest repair, retry or escalation prompt the block's decisions render:
  the template's text, the contract text, the output as truncated (``truncate``; with
  ``strategy: none`` the largest output read, ``limits.max_output_bytes``), the example
  within ``examples.budgets.retry_tokens``, a modification and the longest micro-hint; in
  characters, and in tokens at ``examples.budgets.chars_per_token``. What the caller
  passes (context values, the error message) is not the pack's to bound: not counted.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, field, replace
from typing import TYPE_CHECKING, Any

from jinja2 import TemplateError

from engine.core.textio import MAX_OUTPUT_BYTES
from engine.core.tokens import estimated_tokens
from engine.format.actions import STANDARD_ACTIONS
from engine.format.findings import Finding, FindingRule
from engine.format.locate import find_pack_files
from engine.pack.loaded import load_pack
from engine.pack.result import CheckResult
from engine.policy.budgets.runtime import seconds, shown
from engine.policy.triggers.model import Trigger
from engine.sandbox.environment import undeclared_names

if TYPE_CHECKING:
    from engine.format.model import Rulepack
    from engine.pack.compiled import Pack

NO_FINAL_ACTION = FindingRule(
    "no-final-action",
    "A failure type of a block never reaches a final action: the loop asks for output "
    "after output without a bound.",
    "Make the block's after-failure action (or `on_not_retriable`) a final action.",
)

UNBOUNDED_LOOP = FindingRule(
    "unbounded-loop",
    "A rate limit takes an action that is not final on outputs that pass: nothing bounds "
    "how often it asks again.",
    "Take a final action in the limit.",
)

OVER_BUDGET = FindingRule(
    "worst-case-over-budget",
    "The policy of a block can want more calls, tokens or cost than a budget of it allows.",
    "Lower the trigger's max_attempts (or the transport retry's max_retries), or raise the "
    "budget's limit.",
)

FIRST_CALLS_UNCOUNTED = FindingRule(
    "first-calls-not-refused",
    "A `calls` budget beyond one item run refuses a first call only when the engine makes "
    "it (`rules run`, `engine.run`); an output recorded by `rules eval` or the server was "
    "made already, so it is counted, never refused, and can exceed the budget.",
    "Budget `repairs` instead, or let the engine make the calls (`rules run`, `engine.run`).",
    level="warning",
)


def transport_retries(model: Rulepack) -> int:
    """How often one prompt may be resent at the transport (``model_calls.retry``)."""
    calls = model.model_calls
    return 0 if calls is None or calls.retry is None else calls.retry.max_retries


def _cheapest_input(model: Rulepack) -> float | None:
    """The least price of one token in of the pack's priced models; None without any."""
    calls = model.model_calls
    if calls is None or not calls.pricing:
        return None
    cheapest: float = min(price.input / price.per for price in calls.pricing.values())
    return cheapest


@dataclass(frozen=True)
class BlockProof:
    """The worst case of one block."""

    block: str
    calls: int
    repairs: int
    transport_retries: int
    prompt_chars: int
    prompt_tokens: int
    prompt_parts: dict[str, int] = field(default_factory=dict)
    endings: dict[str, str] = field(default_factory=dict)
    """Each failure type's final action (what it ends with once repairs run out)."""

    def to_json(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Proof:
    blocks: tuple[BlockProof, ...]
    findings: tuple[Finding, ...]


def _final(model: Rulepack, action: str) -> bool:
    spec = {**STANDARD_ACTIONS, **model.actions}.get(action)
    return spec is None or bool(spec.final)  # an unknown action is a finding of its own


def prove(pack: Pack, only: str | None = None) -> Proof:
    """The worst case of every block of ``pack`` (of ``only`` when given), and the
    findings."""
    model = pack.model
    blocks, findings = [], []
    for block in [only] if only else list(model.contracts):
        trigger = model.triggers.get(block) or Trigger()
        proof, found = _block(pack, block, trigger)
        blocks.append(proof)
        findings += found
    for block, limits in model.rate_limits.items():
        if only and block != only:
            continue
        for index, limit in enumerate(limits.limits):
            if not _final(model, limit.action):
                findings.append(
                    _at(
                        pack,
                        UNBOUNDED_LOOP,
                        f"block {block}: rate limit {limit.name!r} takes {limit.action}, "
                        "which is not final: an output that passes can be asked for again "
                        "without a bound",
                        ("rate_limits", block, "limits", index, "action"),
                    )
                )
    return Proof(tuple(blocks), tuple(findings))


def _at(pack: Pack, rule: FindingRule, message: str, path: tuple[str | int, ...]) -> Finding:
    return rule.at(message, pack.source.locate(path))


def _block(pack: Pack, block: str, trigger: Trigger) -> tuple[BlockProof, list[Finding]]:
    model = pack.model
    findings: list[Finding] = []
    declared = model.triggers.get(block) is not None
    where: tuple[str | int, ...] = ("triggers", block) if declared else ("contracts", block)
    after = trigger.after_failure
    endings: dict[str, str] = {}
    endless: dict[str, list[str]] = {}  # the policy key that does not end -> failure types
    for name, spec in model.failure_types.items():
        ending, key = after, "after_failure"
        if not spec.retriable and trigger.on_not_retriable is not None:
            ending, key = trigger.on_not_retriable, "on_not_retriable"
        endings[name] = ending.action
        if not _final(model, ending.action):
            endless.setdefault(key, []).append(name)
    for key, names in endless.items():
        action = getattr(trigger, key).action
        findings.append(
            _at(
                pack,
                NO_FINAL_ACTION,
                f"block {block}: {', '.join(names)} never reach{'es' if len(names) == 1 else ''}"
                f" a final action ({key} {action} is not final): the loop has no bound",
                (*where, key) if declared else where,
            )
        )
    repairs = trigger.max_attempts if trigger.on else 0
    resent = transport_retries(model)
    calls = (1 + repairs) * (1 + resent)
    parts = _prompt_parts(pack, block, trigger)
    chars = sum(parts.values())
    per_token = model.examples.budgets.chars_per_token
    tokens = estimated_tokens(chars, per_token)
    floor: dict[str, float | None] = {
        "calls": calls,
        "repairs": repairs,  # a transport retry spends no repair
        "tokens": repairs * tokens,
    }
    cheapest = _cheapest_input(model)
    floor["cost"] = None if cheapest is None else repairs * tokens * cheapest
    for name, budget in model.budgets.items():
        if budget.blocks and block not in budget.blocks:
            continue
        path = ("budgets", name, "limit")
        if budget.per == "item":
            wanted = floor[budget.counts]
            if wanted is not None and wanted > budget.limit:
                amount = shown(wanted)
                worst = {
                    "tokens": f"at least {amount} tokens",
                    "cost": f"a cost of at least {amount}",
                }.get(budget.counts, f"{amount} {budget.counts}")
                findings.append(
                    _at(
                        pack,
                        OVER_BUDGET,
                        f"block {block}: the worst case is {worst} per item run, over "
                        f"budget {name!r} ({shown(budget.limit)} per item run): the budget, "
                        "not the trigger, ends such items",
                        path,
                    )
                )
        elif budget.counts == "calls":
            window = seconds(budget.window)
            over = f" per {window:g} s" if window is not None else ""
            findings.append(
                _at(
                    pack,
                    FIRST_CALLS_UNCOUNTED,
                    f"block {block}: budget {name!r} ({budget.limit} calls{over} per "
                    f"{budget.per}) cannot refuse a first call it did not make (`rules "
                    "eval`, the server): those can exceed it",
                    ("budgets", name, "counts"),
                )
            )
    proof = BlockProof(
        block,
        calls=calls,
        repairs=repairs,
        transport_retries=resent,
        prompt_chars=chars,
        prompt_tokens=tokens,
        prompt_parts=parts,
        endings=endings,
    )
    return proof, findings


def _template_text(pack: Pack, name: str | None) -> str:
    """A template's text ("": none, or not readable: `rules check` says why)."""
    if name is None or name not in pack.model.templates:
        return ""
    file = str(pack.model.templates[name].file)
    try:
        return (pack.folder_of(("templates", name, "file")) / file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return ""


def _template_chars(pack: Pack, name: str | None) -> int:
    return len(_template_text(pack, name))


def _reads(source: str, name: str) -> bool:
    """Whether a template's text reads the variable ``name``."""
    try:
        return name in undeclared_names(source)
    except TemplateError:  # a template that does not compile is a finding of its own
        return True


def _prompt_parts(pack: Pack, block: str, trigger: Trigger) -> dict[str, int]:
    """The parts of the largest prompt the block's decisions render, in characters."""
    model = pack.model
    names = {trigger.template, trigger.after_failure.template}
    names |= {policy.template for policy in trigger.attempts}
    if trigger.on_not_retriable is not None:
        names.add(trigger.on_not_retriable.template)
    for spending in (*model.budgets.values(), *model.breakers.values()):
        if not spending.blocks or block in spending.blocks:
            names.add(spending.action.template)
    best: dict[str, int] = {}
    for name in sorted(n for n in names if n is not None and n in model.templates):
        purpose = model.templates[name].purpose
        source = _template_text(pack, name)
        parts = {"template": len(source)}
        if purpose in ("repair", "retry") and _reads(source, "example"):
            parts["example"] = model.examples.budgets.retry_tokens * (
                model.examples.budgets.chars_per_token
            )
        if purpose == "repair":
            parts["contract"] = len(pack.prompts.contract_texts.get(block, ""))
            parts["output"] = _output_chars(pack, trigger)
            parts["hint"] = max(
                (len(h.hint) for h in model.hints if not h.blocks or block in h.blocks),
                default=0,
            )
        if purpose == "retry":
            parts["modification"] = max(
                [len(trigger.default_modification)]
                + [_template_chars(pack, t) for t in trigger.modifications.values()]
            )
        if sum(parts.values()) > sum(best.values()):
            best = parts
    return best


def _output_chars(pack: Pack, trigger: Trigger) -> int:
    """The most of an output a repair prompt shows."""
    cut = trigger.truncate
    if cut.strategy == "none":
        return pack.model.limits.max_output_bytes or MAX_OUTPUT_BYTES
    return cut.max_chars + len(cut.marker)


def with_proofs(results: list[CheckResult], targets: list[str]) -> list[CheckResult]:
    """``results`` (of `rules check` on ``targets``) with the findings of ``prove`` added to
    each pack that has no errors (`rules check --prove`)."""
    files = [pack_file for target in targets for pack_file in find_pack_files(target)]
    proven = []
    for result, pack_file in zip(results, files, strict=True):
        if result.ok:
            found = list(prove(load_pack(pack_file)).findings)
            result = replace(
                result, findings=sorted({*result.findings, *found}, key=Finding.sort_key)
            )
        proven.append(result)
    return proven
