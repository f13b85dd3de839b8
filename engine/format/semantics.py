"""Semantic checks of a validated pack: every reference resolves, every file is inside the
pack, every template, pattern and expression compiles, every template variable exists.

The walk is generic: fields of the models that refer to something carry a ``Ref`` marker
(model.py), and each kind of reference has one checking function here.
"""

from __future__ import annotations

import difflib
import os
import re
import types
import typing
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any, get_args, get_origin

import jinja2
from pydantic import BaseModel

from engine.core.errors import Position
from engine.core.patterns import PatternError, compile_pattern
from engine.format.findings import Finding, Level
from engine.format.loader import KeyPath, SourceMap
from engine.format.model import ITEM_PARTS, Ref, Rulepack
from engine.format.vocabulary import STANDARD_ACTIONS
from engine.sandbox.environment import (
    CONDITION_VARIABLES,
    DETECT_VARIABLES,
    GATE_VARIABLES,
    ITEM_VARIABLES,
    TEMPLATE_VARIABLES,
    compile_condition,
    expression_problem,
    expression_source,
    first_use,
    undeclared_names,
    unsafe_constructs,
)

MAX_TEMPLATE_BYTES = 1024 * 1024


@dataclass(frozen=True)
class Reference:
    kind: Ref
    value: str
    path: KeyPath
    is_key: bool = False


def _refs_in(annotation: Any) -> tuple[Ref, ...]:
    if get_origin(annotation) is typing.Annotated:
        found = tuple(m for m in get_args(annotation)[1:] if isinstance(m, Ref))
        return found + _refs_in(get_args(annotation)[0])
    if get_origin(annotation) in (typing.Union, types.UnionType):
        return tuple(r for arg in get_args(annotation) for r in _refs_in(arg))
    return ()


def _element(annotation: Any, position: int) -> Any:
    for candidate in (annotation, *get_args(annotation)):
        origin = get_origin(candidate)
        if origin is typing.Annotated:
            candidate = get_args(candidate)[0]
            origin = get_origin(candidate)
        if origin in (list, dict):
            args = get_args(candidate)
            return args[position] if len(args) > position else Any
    return Any


def walk_references(
    value: Any, annotation: Any, refs: tuple[Ref, ...], path: KeyPath
) -> Iterator[Reference]:
    """Every marked string in a model tree, with its key path."""
    if isinstance(value, BaseModel):
        for name, field in type(value).model_fields.items():
            if name not in value.model_fields_set:
                continue  # defaults a contract relies on are checked with the contract
            marks = tuple(m for m in field.metadata if isinstance(m, Ref))
            yield from walk_references(
                getattr(value, name),
                field.annotation,
                marks + _refs_in(field.annotation),
                (*path, name),
            )
    elif isinstance(value, str):
        for ref in refs:
            yield Reference(ref, value, path)
    elif isinstance(value, list):
        inner = _element(annotation, 0)
        for index, item in enumerate(value):
            yield from walk_references(item, inner, _refs_in(inner), (*path, index))
    elif isinstance(value, dict):
        key_type, value_type = _element(annotation, 0), _element(annotation, 1)
        for key, item in value.items():
            for ref in _refs_in(key_type):
                yield Reference(ref, str(key), (*path, key), is_key=True)
            yield from walk_references(item, value_type, _refs_in(value_type), (*path, key))


class PackChecker:
    """Collects the semantic findings of one pack."""

    def __init__(self, pack: Rulepack, source: SourceMap) -> None:
        self.pack = pack
        self.source = source
        self.findings: list[Finding] = []
        self.context_names = set(pack.context)

    def add(
        self,
        rule: str,
        message: str,
        path: KeyPath,
        hint: str = "",
        is_key: bool = False,
        position: Position | None = None,
        level: Level = "error",
    ) -> None:
        where = position or self.source.locate(path, prefer_key=is_key)
        self.findings.append(Finding(rule, message, where, hint, level))

    def run(self) -> list[Finding]:
        checks: dict[Ref, Callable[[Reference], None]] = {
            Ref.FAILURE_TYPE: self._named(
                self.pack.failure_types, "failure type", "declare it under `failure_types:`"
            ),
            Ref.SEVERITY: self._named(
                self.pack.severities, "severity", "declare it under `severities:`"
            ),
            Ref.TEMPLATE: self._named(
                self.pack.templates, "template", "declare it under `templates:`"
            ),
            Ref.CONTRACT: self._named(
                self.pack.contracts, "contract", "declare it under `contracts:`"
            ),
            Ref.ACTION: self._named(
                {**STANDARD_ACTIONS, **self.pack.actions}, "action", "declare it under `actions:`"
            ),
            Ref.FILE: self._file,
            Ref.PATTERN: self._pattern,
            Ref.EXPRESSION: self._expression,
            Ref.GATE_EXPRESSION: lambda ref: self._expression(ref, GATE_VARIABLES),
            Ref.DETECT_EXPRESSION: lambda ref: self._expression(ref, DETECT_VARIABLES),
            Ref.ITEM_EXPRESSION: lambda ref: self._expression(ref, ITEM_VARIABLES),
            Ref.MESSAGE: lambda ref: None,
            Ref.CONTEXT_KEY: self._named(
                self.pack.context, "context key", "declare it under `context:`"
            ),
            Ref.ITEM_PART: self._named(
                {**dict.fromkeys(ITEM_PARTS), **self.pack.context},
                "item part",
                "use nonce, params or a key declared under `context:`",
            ),
        }
        for ref in walk_references(self.pack, Rulepack, (), ()):
            checks[ref.kind](ref)
        self._templates()
        self._rate_limits()
        self._retried_types()
        self._menus()
        self._conflicts()
        self._requires()
        self._without_behaviour()
        return self.findings

    # ----------------------------------------------------------------- engine fit

    def _requires(self) -> None:
        """``requires`` is a version range the running engine must be in."""
        from engine.core.version import VERSION

        failed = unmet_requirements(self.pack.requires, VERSION)
        if failed:
            self.add(
                "requires-unmet",
                f"the pack requires engine {', '.join(failed)}; this is engine {VERSION}",
                ("requires",),
                "install an engine in that range, or widen `requires` if the pack works",
            )

    def _without_behaviour(self) -> None:
        """Keys of the format that the engine accepts but does not act on yet: a pack that
        sets one is told, so nobody relies on a policy that does nothing."""
        for path, what in WITHOUT_BEHAVIOUR:
            if _is_set(self.pack, path):
                dotted = ".".join(str(part) for part in path)
                self.add(
                    "no-behaviour",
                    f"`{dotted}` has no effect yet: {what}",
                    path,
                    "remove it, or keep it for a later engine version",
                    is_key=True,
                    level="warning",
                )

    # ----------------------------------------------------------------- references

    def _named(
        self, table: typing.Mapping[str, Any], what: str, fix: str
    ) -> Callable[[Reference], None]:
        def check(ref: Reference) -> None:
            if ref.value in table:
                return
            close = difflib.get_close_matches(ref.value, list(table), n=1)
            hint = f"did you mean {close[0]!r}?" if close else fix
            self.add(
                f"unknown-{what.replace(' ', '-')}",
                f"unknown {what} {ref.value!r}",
                ref.path,
                hint,
                ref.is_key,
            )

        return check

    def pack_root(self, path: KeyPath) -> Path:
        """The folder of the pack file that declared the value at ``path``."""
        return Path(self.source.file_of(path)).resolve().parent

    def resolve_file(self, ref: Reference) -> Path | None:
        """The file a pack path names, or None (with a finding) if it is unsafe or absent."""
        value = ref.value
        if not value or value.startswith(("/", "\\")) or (len(value) > 1 and value[1] == ":"):
            self.add(
                "path-absolute",
                f"path {value!r} is absolute",
                ref.path,
                "write paths relative to the pack folder",
            )
            return None
        if ".." in value.replace("\\", "/").split("/"):
            self.add(
                "path-traversal",
                f"path {value!r} leaves the pack with '..'",
                ref.path,
                "keep every file the pack uses inside the pack folder",
            )
            return None
        root = self.pack_root(ref.path)
        target = root / value
        real = Path(os.path.realpath(target))
        if real != root and root not in real.parents:
            self.add(
                "path-escape",
                f"path {value!r} resolves outside the pack (symlink)",
                ref.path,
                "copy the file into the pack instead of linking to it",
            )
            return None
        if not real.is_file():
            self.add(
                "file-missing",
                f"file {value!r} does not exist in {root.name}/",
                ref.path,
                "create the file or fix the path",
            )
            return None
        return real

    def _file(self, ref: Reference) -> None:
        self.resolve_file(ref)

    def _pattern(self, ref: Reference) -> None:
        try:
            compile_pattern(ref.value)
        except PatternError as exc:
            self.add(
                "invalid-pattern",
                f"pattern {ref.value!r} does not compile: {exc}",
                ref.path,
                "patterns use RE2 syntax: no look-arounds or back-references",
            )

    def _expression(self, ref: Reference, variables: frozenset[str] = CONDITION_VARIABLES) -> None:
        problem = expression_problem(ref.value)
        if problem is not None:
            self.add(
                "expression-too-large",
                f"expression is too large: {problem}",
                ref.path,
                "split the condition into several guards or simplify it",
            )
            return
        try:
            compile_condition(ref.value)
            names = undeclared_names(expression_source(ref.value))
        except (jinja2.TemplateError, RecursionError) as exc:
            self.add(
                "invalid-expression",
                f"expression {ref.value!r} does not compile: {exc}",
                ref.path,
                "conditions use Jinja2 expression syntax",
            )
            return
        for _, problem in unsafe_constructs(expression_source(ref.value)):
            self.add(
                "unsafe-expression",
                f"expression {ref.value!r}: {problem}",
                ref.path,
                "use only the variables conditions may use",
            )
        allowed = variables | self.context_names
        for name in sorted(names - allowed):
            close = difflib.get_close_matches(name, sorted(allowed), n=1)
            hint = (
                f"did you mean {close[0]!r}?"
                if close
                else f"conditions may use: {', '.join(sorted(allowed))}"
            )
            self.add(
                "unknown-variable", f"expression uses unknown variable {name!r}", ref.path, hint
            )

    # ----------------------------------------------------------------- rate limits

    def _purpose(self, name: str, purpose: str, path: KeyPath) -> None:
        template = self.pack.templates.get(name)
        if template is not None and template.purpose != purpose:
            self.add(
                "wrong-template-purpose",
                f"template {name!r} is a {template.purpose} template, not a {purpose} template",
                path,
                f"declare it with `purpose: {purpose}`",
            )

    def _conflicts(self) -> None:
        """First prompts and conflict templates have the right purpose; the conflict rules
        name checks of their block, unique option labels, known severities."""
        for block, name in self.pack.prompts.items():
            self._purpose(name, "initial", ("prompts", block))
        spec = self.pack.conflicts
        if spec is None:
            return
        base: KeyPath = ("conflicts",)
        self._purpose(spec.presentation, "conflicts", (*base, "presentation"))
        self._purpose(spec.decisions, "conflicts", (*base, "decisions"))
        contract = self.pack.contracts.get(spec.block)
        named = contract.named_checks() if contract is not None else {}
        for key, kind in (("explicit", "sections"), ("implicit", "coverage")):
            value = getattr(spec, key)
            if value is not None and contract is not None and named.get(value) != kind:
                self.add(
                    "unknown-check",
                    f"conflicts.{key} names {value!r}, which is no {kind} check of "
                    f"block {spec.block!r}",
                    (*base, key),
                    f"name the `name:` of a `check: {kind}` of that block's contract",
                )
        labels = [option.label for option in spec.options]
        for label in sorted({x for x in labels if labels.count(x) > 1}):
            self.add("duplicate-option", f"option {label} is declared twice", (*base, "options"))
        if spec.synthesis and not any(option.synthesis for option in spec.options):
            self.add(
                "no-behaviour",
                "synthesis rules are declared but no option has `synthesis: true`",
                (*base, "synthesis"),
                "add an option with `synthesis: true`",
                level="warning",
            )
        if spec.termination is not None:
            for index, rule in enumerate(spec.termination.rules):
                if rule.severity not in spec.severity_order:
                    self.add(
                        "unknown-severity",
                        f"termination rule for {rule.severity!r}, which is not in severity_order",
                        (*base, "termination", "rules", index, "severity"),
                        f"severities: {', '.join(spec.severity_order)}",
                    )
                for state in sorted({*rule.blocks, *rule.warns} - set(spec.termination.states)):
                    self.add(
                        "unknown-state",
                        f"termination state {state!r} is not in termination.states",
                        (*base, "termination", "rules", index),
                        f"states: {', '.join(spec.termination.states)}",
                    )

    def _menus(self) -> None:
        """Every `after_failure.menu` names a menu of `menus:`."""
        for block, trigger in self.pack.triggers.items():
            menu = trigger.after_failure.menu
            if menu is not None and menu not in self.pack.menus:
                self.add(
                    "unknown-menu",
                    f"trigger {block!r} offers menu {menu!r}, which is not declared",
                    ("triggers", block, "after_failure", "menu"),
                    f"declare it under `menus:` (menus: {', '.join(self.pack.menus) or 'none'})",
                )

    def _retried_types(self) -> None:
        """A trigger never retries a failure type declared ``retriable: false``: listing
        one under ``on:`` would never act, so it is a finding."""
        for block, trigger in self.pack.triggers.items():
            for index, name in enumerate(trigger.on):
                declared = self.pack.failure_types.get(name)
                if declared is not None and not declared.retriable:
                    self.add(
                        "not-retriable",
                        f"trigger {block!r} retries {name}, which is declared "
                        "`retriable: false`: it goes to the after-failure policy instead",
                        ("triggers", block, "on", index),
                        f"remove it from `on:`, or declare `failure_types: {{{name}: "
                        "{retriable: true, ...}}` to retry it",
                    )

    def _rate_limits(self) -> None:
        """Limit messages name known figures with valid format specs; presentations are
        templates of purpose `presentation`."""
        from engine.core.placeholders import FIGURES, FigureError, compile_figures

        for block, spec in self.pack.rate_limits.items():
            for index, limit in enumerate(spec.limits):
                path: KeyPath = ("rate_limits", block, "limits", index)
                for key in ("message", "recommendation"):
                    try:
                        compile_figures(getattr(limit, key), FIGURES)
                    except FigureError as exc:
                        self.add(
                            "invalid-message",
                            f"{key} of limit {limit.name!r}: {exc}",
                            (*path, key),
                            f"figures: {', '.join(sorted(FIGURES))}",
                        )
                template = self.pack.templates.get(limit.presentation or "")
                if template is not None and template.purpose != "presentation":
                    self.add(
                        "wrong-template-purpose",
                        f"template {limit.presentation!r} is "
                        f"a {template.purpose} template, not a presentation template",
                        (*path, "presentation"),
                        "declare it with `purpose: presentation`",
                    )
            names = [limit.name for limit in spec.limits]
            for name in sorted({n for n in names if names.count(n) > 1}):
                self.add(
                    "duplicate-limit",
                    f"limit {name!r} is declared twice for {block!r}",
                    ("rate_limits", block, "limits"),
                    "give each limit its own name",
                )
            if spec.window.min_rounds > spec.window.rounds:
                self.add(
                    "invalid-window",
                    "min_rounds exceeds the window's rounds",
                    ("rate_limits", block, "window"),
                    "lower min_rounds",
                )

    # ----------------------------------------------------------------- templates

    def _templates(self) -> None:
        for name, spec in self.pack.templates.items():
            path: KeyPath = ("templates", name, "file")
            target = self.quiet_resolve(spec.file, path)
            if target is None:
                continue
            shown = _display(target)
            if target.stat().st_size > MAX_TEMPLATE_BYTES:
                self.add(
                    "template-too-large",
                    f"template {name!r} is over {MAX_TEMPLATE_BYTES} bytes",
                    path,
                    "shorten the template",
                )
                continue
            try:
                source = target.read_text(encoding="utf-8")
                names = undeclared_names(source)
            except RecursionError:
                self.add(
                    "template-syntax",
                    f"template {name!r} is nested too deeply to compile",
                    path,
                    "flatten the template",
                )
                continue
            except UnicodeDecodeError:
                self.add(
                    "template-encoding",
                    f"template {name!r} is not valid UTF-8",
                    path,
                    "save it as UTF-8",
                )
                continue
            except jinja2.TemplateSyntaxError as exc:
                self.add(
                    "template-syntax",
                    f"template {name!r}: {exc.message}",
                    path,
                    "fix the Jinja2 syntax",
                    position=Position(shown, exc.lineno or 1, 1),
                )
                continue
            if "\x00" in source:
                before = source[: source.index("\x00")]
                self.add(
                    "template-encoding",
                    f"template {name!r} holds a NUL byte",
                    path,
                    "remove it (a NUL byte often means a binary or UTF-16 file)",
                    position=Position(
                        shown, before.count("\n") + 1, len(before) - before.rfind("\n")
                    ),
                )
                continue
            for line, problem in unsafe_constructs(source):
                self.add(
                    "unsafe-template",
                    f"template {name!r}: {problem}",
                    path,
                    "use only the variables the engine provides, and bounded loops",
                    position=Position(shown, line, 1),
                )
            allowed = TEMPLATE_VARIABLES[spec.purpose] | self.context_names
            for unknown in sorted(names - allowed):
                line, column = first_use(source, unknown)
                close = difflib.get_close_matches(unknown, sorted(allowed), n=1)
                hint = (
                    f"did you mean {close[0]!r}?"
                    if close
                    else f"{spec.purpose} templates may use: {', '.join(sorted(allowed))}"
                )
                self.add(
                    "unknown-template-variable",
                    f"template {name!r} uses {unknown!r}, which the engine does not "
                    f"provide to {spec.purpose} templates",
                    path,
                    hint,
                    position=Position(shown, line, column),
                )

    def quiet_resolve(self, value: str, path: KeyPath) -> Path | None:
        """Resolve a path already checked by the generic walk, without a second finding."""
        before = len(self.findings)
        target = self.resolve_file(Reference(Ref.FILE, value, path))
        del self.findings[before:]
        return target

    def unknown_field(self, name: str, path: KeyPath, fields: typing.Mapping[str, Any]) -> None:
        close = difflib.get_close_matches(name, list(fields), n=1)
        self.add(
            "unknown-field",
            f"unknown field {name!r}",
            path,
            f"did you mean {close[0]!r}?" if close else "declare it under `fields:`",
        )


def _display(path: Path) -> str:
    try:
        return os.path.relpath(path)
    except ValueError:  # pragma: no cover
        return str(path)


# Keys the format declares ahead of their behaviour, and what is missing.
WITHOUT_BEHAVIOUR: list[tuple[KeyPath, str]] = [  # none today: every key acts
]


def _is_set(model: BaseModel, path: KeyPath) -> bool:
    """Whether the pack wrote the key at ``path`` (defaults do not count)."""
    node: Any = model
    for name in path:
        if not isinstance(node, BaseModel) or name not in node.model_fields_set:
            return False
        node = getattr(node, str(name))
    return node not in ({}, [], None) or isinstance(node, int)


def _version(text: str) -> tuple[int, ...]:
    parts = []
    for piece in text.split("+")[0].split("-")[0].split("."):
        parts.append(int(piece) if piece.isdigit() else 0)
    return tuple(parts)


def unmet_requirements(requires: str, version: str) -> list[str]:
    """The constraints of a ``requires`` range (``>=0.1, <2``) that ``version`` breaks."""
    have = _version(version)
    failed = []
    for op, number in re.findall(r"([<>]=?|==|!=)\s*(\d+(?:\.\d+)*)", requires):
        wanted = _version(number)
        width = max(len(have), len(wanted))
        ours, theirs = have + (0,) * (width - len(have)), wanted + (0,) * (width - len(wanted))
        holds = {
            ">=": ours >= theirs,
            ">": ours > theirs,
            "<=": ours <= theirs,
            "<": ours < theirs,
            "==": ours == theirs,
            "!=": ours != theirs,
        }[op]
        if not holds:
            failed.append(f"{op}{number}")
    return failed


def check_semantics(pack: Rulepack, source: SourceMap) -> list[Finding]:
    """The format-level findings (contracts are checked by their kinds: engine.contracts)."""
    return PackChecker(pack, source).run()
