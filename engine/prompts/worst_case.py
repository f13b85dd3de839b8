"""The largest repair or retry prompt a pack's own text makes, held against its prompt budget
by `rules check` (``limits.prompt_budget``; ``engine.prompts.budget`` fits prompts at render).

The worst case counts what the pack controls: the template's own text (the longer branch of
each ``if``, each loop once, the parts the budget drops left out), the contract text, and
each part the template shows that is not dropped at its largest. What the caller gives (the
task, the context, the parser's message) is not counted: it is the caller's to keep short.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import TYPE_CHECKING

from jinja2 import nodes

from engine.core.tokens import estimated_tokens
from engine.format.findings import FindingRule
from engine.policy.limits.model import ENGINE_PARTS
from engine.sandbox.environment import ENVIRONMENT, undeclared_names

if TYPE_CHECKING:
    from engine.format.model import Rulepack
    from engine.format.semantics import PackChecker
    from engine.policy.triggers.model import Trigger, Truncation

UNKNOWN_PROMPT_PART = FindingRule(
    "unknown-prompt-part",
    "The prompt budget drops a part that neither the engine empties nor a repair or retry "
    "template marks.",
    'Mark it in the template with `{% if "NAME" not in dropped %}...{% endif %}`, or name '
    "example, original_output or micro_hint.",
)

PROMPT_OVER_BUDGET = FindingRule(
    "prompt-over-budget",
    "A repair or retry prompt cannot fit the pack's prompt budget, even with every part of "
    "`drop` left out.",
    "Raise `limits.prompt_budget.tokens`, drop more parts, truncate the output further, or "
    "shorten the template or the contract text.",
)


def check_prompt_budget(pack: Rulepack, checker: PackChecker) -> None:
    """Each part of ``drop`` is the engine's or marked by a template, and each repair or retry
    prompt a trigger renders fits the budget once every part of ``drop`` is left out, in the
    worst case of what the pack controls: the template's own text (the longer branch of each
    ``if``, each loop once, marked parts left out), the contract text, and each part it shows
    that is not dropped at its largest (the truncated output, the example at its budget, the
    longest hint, the longest modification). What the caller gives (the task, the context,
    the parser's message) is not counted: it is the caller's to keep short."""
    budget = pack.limits.prompt_budget
    if budget is None:
        return
    per_token = pack.examples.budgets.chars_per_token
    marked: set[str] = set()
    for block, trigger in pack.triggers.items():
        for name in _prompt_templates(trigger):
            spec = pack.templates.get(name)
            if spec is None or spec.purpose not in ("repair", "retry"):
                continue
            source = _source(checker, spec.file, ("templates", name, "file"))
            tree = _parsed(source) if source is not None else None
            if source is None or tree is None:
                continue
            marked |= marked_parts(tree)
            chars = _worst_chars(pack, checker, block, trigger, source, tree, budget.drop)
            if chars is None:
                checker.add(
                    PROMPT_OVER_BUDGET,
                    f"the {spec.purpose} prompt of {block!r} (template {name!r}) shows the "
                    "whole output (`truncate: {strategy: none}`), which no budget bounds",
                    ("limits", "prompt_budget", "drop"),
                    "add original_output to `drop`, or truncate the block's output",
                )
                continue
            worst = estimated_tokens(chars, per_token)
            if worst > budget.tokens:
                left = ", ".join(budget.drop) or "nothing"
                checker.add(
                    PROMPT_OVER_BUDGET,
                    f"the {spec.purpose} prompt of {block!r} (template {name!r}) can take "
                    f"about {worst} tokens of the pack's own text with {left} dropped: over "
                    f"the budget of {budget.tokens}",
                    ("limits", "prompt_budget", "tokens"),
                    f"raise `tokens` to {worst} or more, drop more parts, or shorten the "
                    "template or the contract text",
                )
    for index, part in enumerate(budget.drop):
        if part not in ENGINE_PARTS and part not in marked:
            checker.add(
                UNKNOWN_PROMPT_PART,
                f"`drop` names {part!r}, which no repair or retry template marks",
                ("limits", "prompt_budget", "drop", index),
                f'mark it: {{% if "{part}" not in dropped %}}...{{% endif %}}; the engine '
                f"empties {', '.join(ENGINE_PARTS)}",
            )


def _prompt_templates(trigger: Trigger) -> list[str]:
    """The templates of the prompts a trigger sends before its final action, each once."""
    names = [trigger.template] + [step.template for step in trigger.attempts]
    return list(dict.fromkeys(name for name in names if name))


def _source(checker: PackChecker, file: str, path: tuple[str, ...]) -> str | None:
    """A pack file's text, or None when it cannot be read (its own finding says why)."""
    target = checker.quiet_resolve(file, path)
    if target is None:
        return None
    try:
        return target.read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError):
        return None


def _parsed(source: str) -> nodes.Template | None:
    """The template's tree, or None when it does not compile (its own finding says why)."""
    try:
        return ENVIRONMENT.parse(source)
    except Exception:
        return None


def _worst_chars(
    pack: Rulepack,
    checker: PackChecker,
    block: str,
    trigger: Trigger,
    source: str,
    tree: nodes.Template,
    drop: Sequence[str],
) -> int | None:
    """The most characters the pack's own parts make the template ``source`` render for
    ``block`` with ``drop`` left out; None when a part it must show has no bound."""
    names = undeclared_names(source)
    chars = literal_chars(tree.body, frozenset(drop))
    contract = pack.contracts.get(block)
    text_file = getattr(contract, "contract_text", None)
    if "format_contract" in names and isinstance(text_file, str):
        text = _source(checker, text_file, ("contracts", block, "contract_text"))
        chars += len(text.rstrip("\n")) if text else 0
    if "original_output" in names and "original_output" not in drop:
        largest = truncated_size(trigger.truncate)
        if largest is None:
            return None
        chars += largest
    budgets = pack.examples.budgets
    if "example" in names and "example" not in drop:
        chars += budgets.retry_tokens * budgets.chars_per_token
    if "micro_hint" in names and "micro_hint" not in drop:
        hints = [h.hint for h in pack.hints if not h.blocks or block in h.blocks]
        chars += max(map(len, hints), default=0)
    if "modification" in names:
        chars += _modification_chars(pack, checker, trigger)
    return chars


def _modification_chars(pack: Rulepack, checker: PackChecker, trigger: Trigger) -> int:
    """The longest modification a retry prompt of ``trigger`` shows (templates' own text)."""
    longest = len(trigger.default_modification)
    for name in trigger.modifications.values():
        spec = pack.templates.get(name)
        source = _source(checker, spec.file, ("templates", name, "file")) if spec else None
        if source is None:
            continue
        tree = _parsed(source)
        if tree is not None:
            longest = max(longest, literal_chars(tree.body))
    return longest


def truncated_size(spec: Truncation) -> int | None:
    """The most characters an output shows once truncated (None: it is never cut)."""
    if spec.strategy == "none":
        return None
    if spec.strategy == "head":
        return spec.max_chars + len(spec.marker)
    return max(spec.max_chars, spec.head + spec.tail + len(spec.marker))


def marked_parts(tree: nodes.Template) -> set[str]:
    """The parts a template marks as droppable: ``"NAME" not in dropped`` tests."""
    return {part for test in tree.find_all(nodes.Compare) if (part := _kept_part(test))}


def _kept_part(test: nodes.Node) -> str | None:
    """NAME when ``test`` is ``"NAME" not in dropped`` (the part is shown unless dropped)."""
    if not isinstance(test, nodes.Compare) or len(test.ops) != 1:
        return None
    operand = test.ops[0]
    if (
        operand.op == "notin"
        and isinstance(operand.expr, nodes.Name)
        and operand.expr.name == "dropped"
        and isinstance(test.expr, nodes.Const)
        and isinstance(test.expr.value, str)
    ):
        return test.expr.value
    return None


def literal_chars(body: Iterable[nodes.Node], dropped: frozenset[str] = frozenset()) -> int:
    """The characters a template body writes of its own: its text and string constants, the
    longer branch of each ``if``, each loop body once, without the parts marked
    ``"NAME" not in dropped`` whose NAME is in ``dropped``; what variables hold is not
    counted."""
    total = 0
    for node in body:
        if isinstance(node, nodes.Output):
            total += sum(_expression_chars(child) for child in node.nodes)
        elif isinstance(node, nodes.If):
            if _kept_part(node.test) in dropped:
                total += literal_chars(node.else_, dropped)
                continue
            branches = [node.body, *(e.body for e in node.elif_), node.else_]
            total += max(literal_chars(branch, dropped) for branch in branches)
        elif isinstance(node, nodes.For):
            total += max(literal_chars(node.body, dropped), literal_chars(node.else_, dropped))
        elif isinstance(node, (nodes.FilterBlock, nodes.With, nodes.Scope)):
            total += literal_chars(node.body, dropped)
    return total


def _expression_chars(node: nodes.Node) -> int:
    """The characters an output expression writes of its own (its constants; the longer
    side of an inline ``if``)."""
    if isinstance(node, nodes.TemplateData):
        return len(node.data)
    if isinstance(node, nodes.Const):
        return len(node.value) if isinstance(node.value, str) else 0
    if isinstance(node, nodes.CondExpr):
        other = _expression_chars(node.expr2) if node.expr2 is not None else 0
        return max(_expression_chars(node.expr1), other)
    if isinstance(node, nodes.Concat):
        return sum(_expression_chars(child) for child in node.nodes)
    if isinstance(node, nodes.Add):
        return _expression_chars(node.left) + _expression_chars(node.right)
    return 0
