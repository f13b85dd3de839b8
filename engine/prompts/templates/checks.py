"""The checks of the ``templates:`` and ``prompts:`` sections (section.py declares them).

What a template of each purpose may use is declared by the section that defines the
purpose (triggers: repair, retry, escalation; gates: reprompt, artifact; ...); the checker
holds them all (``PackChecker.template_variables``), so `rules check` can name a variable
the engine will never provide.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import jinja2

from engine.core.errors import Position
from engine.core.suggest import did_you_mean
from engine.core.textio import find_word
from engine.format.fields import ContractRef, TemplateRef
from engine.format.findings import FindingRule
from engine.format.section import Declared, mapping, single
from engine.format.semantics import TEMPLATE_SYNTAX, UNKNOWN_TEMPLATE_VARIABLE, display
from engine.format.sourcemap import KeyPath
from engine.prompts.templates.model import TemplateSpec
from engine.prompts.worst_case import check_prompt_budget
from engine.sandbox.environment import (
    ENVIRONMENT,
    first_use,
    undeclared_names,
    unsafe_constructs,
)
from engine.sandbox.fence import unfenced_outputs
from engine.sandbox.syntax import syntax_error_position

if TYPE_CHECKING:
    from engine.format.model import Rulepack
    from engine.format.semantics import PackChecker


TEMPLATE_ENCODING = FindingRule(
    "template-encoding",
    "A template file is not text (NUL bytes, not UTF-8).",
    "Save it as UTF-8 text.",
)

TEMPLATE_TOO_LARGE = FindingRule(
    "template-too-large",
    "A template file is over 1 MiB.",
    "Split it or move text out of it.",
)

UNSAFE_TEMPLATE = FindingRule(
    "unsafe-template",
    "A template does something the sandbox refuses at render.",
    "Remove `_` attributes, includes and huge constant ranges.",
)

UNFENCED_MODEL_TEXT = FindingRule(
    "unfenced-model-text",
    "A prompt template writes a model's output, or an error quoting it, without the "
    "`fence` filter (warning): text in it can close the quote and speak as the prompt.",
    "Write it as `{{ original_output | fence('previous output') }}`.",
    level="warning",
)

MODEL_TEXT: dict[str, frozenset[str]] = {
    "repair": frozenset({"original_output", "parser_error", "failures"}),
    "retry": frozenset({"failure_message", "failures", "data"}),
    "reprompt": frozenset({"errors"}),
}
"""Per purpose of a prompt sent to a model, its variables that hold model text: the output,
the errors that quote it, the data read from it (the sections that define the purposes
provide them: engine.policy.triggers, engine.policy.gates)."""

MAX_TEMPLATE_BYTES = 1024 * 1024


def check_templates(pack: Rulepack, checker: PackChecker) -> None:
    """Every template file is small, UTF-8, compiles, is safe, and uses only the variables
    its purpose sees (and the pack's context keys); the repair and retry prompts fit the
    pack's prompt budget (engine.prompts.worst_case)."""
    _check_files(pack, checker)
    check_prompt_budget(pack, checker)


def _check_files(pack: Rulepack, checker: PackChecker) -> None:
    for name, spec in pack.templates.items():
        path: KeyPath = ("templates", name, "file")
        target = checker.quiet_resolve(spec.file, path)
        if target is None:
            continue
        shown = display(target)
        if target.stat().st_size > MAX_TEMPLATE_BYTES:
            checker.add(
                TEMPLATE_TOO_LARGE,
                f"template {name!r} is over {MAX_TEMPLATE_BYTES} bytes",
                path,
                "shorten the template",
            )
            continue
        try:
            source = target.read_text(encoding="utf-8")
            names = undeclared_names(source)
        except RecursionError:
            checker.add(
                TEMPLATE_SYNTAX,
                f"template {name!r} is nested too deeply to compile",
                path,
                "flatten the template",
            )
            continue
        except UnicodeDecodeError:
            checker.add(
                TEMPLATE_ENCODING,
                f"template {name!r} is not valid UTF-8",
                path,
                "save it as UTF-8",
            )
            continue
        except jinja2.TemplateSyntaxError as exc:
            checker.add(
                TEMPLATE_SYNTAX,
                f"template {name!r}: {exc.message}",
                path,
                "fix the Jinja2 syntax",
                position=Position(shown, *syntax_error_position(source, exc)),
            )
            continue
        if "\x00" in source:
            before = source[: source.index("\x00")]
            checker.add(
                TEMPLATE_ENCODING,
                f"template {name!r} holds a NUL byte",
                path,
                "remove it (a NUL byte often means a binary or UTF-16 file)",
                position=Position(shown, before.count("\n") + 1, len(before) - before.rfind("\n")),
            )
            continue
        for line, problem in unsafe_constructs(source):
            checker.add(
                UNSAFE_TEMPLATE,
                f"template {name!r}: {problem}",
                path,
                "use only the variables the engine provides, and bounded loops",
                position=Position(shown, line, 1),
            )
        purposes = checker.template_variables
        if spec.purpose in MODEL_TEXT:
            _check_fences(name, source, spec.purpose, path, shown, checker)
        if "context" in purposes[spec.purpose]:
            tree = ENVIRONMENT.parse(source)
            checker.context_reads(tree, f"template {name!r}", path, Position(shown, 1, 1))
        allowed = purposes[spec.purpose] | checker.context_names
        for unknown in sorted(names - allowed):
            line, column = first_use(source, unknown)
            hint = did_you_mean(
                unknown, allowed, f"{spec.purpose} templates may use: {', '.join(sorted(allowed))}"
            )
            checker.add(
                UNKNOWN_TEMPLATE_VARIABLE,
                f"template {name!r} uses {unknown!r}, which the engine does not "
                f"provide to {spec.purpose} templates",
                path,
                hint,
                position=Position(shown, line, column),
            )


def _check_fences(
    name: str, source: str, purpose: str, path: KeyPath, shown: str, checker: PackChecker
) -> None:
    """A warning where the template writes model text into the prompt unfenced."""
    lines = source.splitlines()
    for line, variable in unfenced_outputs(ENVIRONMENT.parse(source), MODEL_TEXT[purpose]):
        text = lines[line - 1] if 0 < line <= len(lines) else ""
        column = find_word(text, variable) + 1 or 1
        checker.add(
            UNFENCED_MODEL_TEXT,
            f"template {name!r} writes {variable!r} (model text) into the prompt unfenced",
            path,
            f"pass it through the fence filter: {{{{ {variable} | fence }}}}"
            if variable in MODEL_TEXT[purpose]
            else f"fence the text {variable!r} is written into (a list: build it in "
            "{% set %}...{% endset %} and fence that)",
            position=Position(shown, line, column),
        )


def check_prompts(pack: Rulepack, checker: PackChecker) -> None:
    """First prompts are templates of purpose ``initial``."""
    for block, name in pack.prompts.items():
        checker.template_purpose(name, "initial", ("prompts", block))


def declared_templates() -> Declared:
    """The ``templates:`` section in the root model (section.py names it)."""
    return mapping(str, TemplateSpec, check_templates)


def declared_prompts() -> Declared:
    """The ``prompts:`` section in the root model (section.py names it)."""
    return single(
        dict[ContractRef, TemplateRef],
        check_prompts,
        default_factory=dict,
        description="per block: the template (purpose `initial`) of its first prompt, "
        "which `rules prompt` renders with the decisions of the previous round",
    )
