"""Semantic checks of a validated pack, the generic part: every reference resolves, every
file is inside the pack, every pattern compiles, the engine is in the pack's ``requires``.

The walk is generic: fields of the models that refer to something carry a ``Ref`` marker
(fields.py), the walker (references.py) finds them, and each kind of reference has one
checking function here. ``PackChecker`` collects the findings; each section checks the rest
itself (``Section.check``: templates, its own expressions with the variables it provides...),
run by ``engine.pack.loaded``.

The finding rules of these checks are defined here; sections that raise the same ones (an
unknown severity, a template that does not compile...) import them from here.
"""

from __future__ import annotations

import os
import re
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import jinja2
from packaging.specifiers import Specifier
from packaging.version import Version
from pydantic import BaseModel

from engine.core.errors import Position
from engine.core.files import path_problem
from engine.core.patterns import PatternError, compile_pattern
from engine.core.suggest import did_you_mean
from engine.core.version import VERSION
from engine.format.actions import STANDARD_ACTIONS
from engine.format.context_reads import UNDECLARED_CONTEXT_READ, context_problems
from engine.format.fields import ITEM_PARTS, Ref
from engine.format.findings import Finding, FindingRule, Level
from engine.format.model import Rulepack
from engine.format.packfolder import PATH_ESCAPE as PATH_ESCAPE  # re-exported
from engine.format.references import Reference, _refs_in
from engine.format.references import walk_references as walk_references  # re-exported
from engine.format.sourcemap import KeyPath, SourceMap
from engine.sandbox.environment import (
    ENVIRONMENT,
    compile_condition,
    expression_problem,
    expression_source,
    undeclared_names,
    unsafe_constructs,
)

REQUIRES_UNMET = FindingRule(
    "requires-unmet",
    "The running engine is outside the pack's `requires` range.",
    "Upgrade the engine or relax `requires`.",
)

NO_BEHAVIOUR = FindingRule(
    "no-behaviour",
    "A key this engine does not act on yet (warning).",
    "Remove it, or keep it for a later engine version.",
    level="warning",
)

UNKNOWN_FAILURE_TYPE = FindingRule(
    "unknown-failure-type",
    "A failure type that is not declared.",
    "Declare it under `failure_types:` or fix the name.",
)

UNKNOWN_SEVERITY = FindingRule(
    "unknown-severity",
    "A severity that is not declared.",
    "Declare it under `severities:` or fix the name.",
)

UNKNOWN_TEMPLATE = FindingRule(
    "unknown-template",
    "A template that is not declared.",
    "Declare it under `templates:` or fix the name.",
)

UNKNOWN_CONTRACT = FindingRule(
    "unknown-contract",
    "A block that has no contract.",
    "Declare it under `contracts:` or fix the name.",
)

UNKNOWN_ACTION = FindingRule(
    "unknown-action",
    "An action that is neither standard nor declared.",
    "Declare it under `actions:` or use a standard action.",
)

UNKNOWN_CONTEXT_KEY = FindingRule(
    "unknown-context-key",
    "A context key that is not declared.",
    "Declare it under `context:`.",
)

UNKNOWN_ITEM_PART = FindingRule(
    "unknown-item-part",
    "`session.item` names something unknown.",
    "Use nonce, params or a declared context key.",
)

UNKNOWN_FIELD = FindingRule(
    "unknown-field",
    "A field a contract does not have.",
    "Use one of the contract's fields.",
)

FILE_MISSING = FindingRule(
    "file-missing",
    "A file the pack names does not exist.",
    "Create the file or fix the path.",
)

PATH_ABSOLUTE = FindingRule(
    "path-absolute",
    "A pack path is absolute.",
    "Use a path relative to the pack file.",
)

PATH_TRAVERSAL = FindingRule(
    "path-traversal",
    "A pack path climbs out with `..`.",
    "Keep files inside the pack folder.",
)

WRONG_TEMPLATE_PURPOSE = FindingRule(
    "wrong-template-purpose",
    "A template is used for a purpose it was not declared for.",
    "Fix the template's `purpose:`.",
)

TEMPLATE_SYNTAX = FindingRule(
    "template-syntax",
    "A template does not compile in the Jinja2 sandbox.",
    "Fix the template at the line shown.",
)

UNKNOWN_TEMPLATE_VARIABLE = FindingRule(
    "unknown-template-variable",
    "A template uses a variable the engine does not provide.",
    "Use the variables of its purpose or declared context keys.",
)

INVALID_PATTERN = FindingRule(
    "invalid-pattern",
    "A pattern does not compile on RE2.",
    "No look-arounds or back-references: RE2 syntax, linear time.",
)

INVALID_EXPRESSION = FindingRule(
    "invalid-expression",
    "A condition expression does not compile.",
    "Fix the expression (Jinja2 expression syntax).",
)

UNKNOWN_VARIABLE = FindingRule(
    "unknown-variable",
    "An expression uses a variable it does not have.",
    "Use the variables the message lists.",
)

UNSAFE_EXPRESSION = FindingRule(
    "unsafe-expression",
    "An expression does something the sandbox refuses.",
    "Remove `_` attributes and unsafe calls.",
)

EXPRESSION_TOO_LARGE = FindingRule(
    "expression-too-large",
    "An expression is over 4,000 characters or 40 brackets deep.",
    "Split it into several conditions.",
)

# Variables of a condition on one context-list item (which items a coverage check, a
# rate limit or a conflict option counts): ``Ref.ITEM_EXPRESSION``, a reference kind of the
# format, checked by the generic walk. Each section checks its other expressions itself.
ITEM_VARIABLES: frozenset[str] = frozenset({"item", "context"})


class PackChecker:
    """Collects the semantic findings of one pack."""

    def __init__(
        self,
        pack: Rulepack,
        source: SourceMap,
        template_variables: Mapping[str, frozenset[str]] | None = None,
        written_contracts: typing.Collection[str] = (),
    ) -> None:
        """``written_contracts``: the contract names the file holds, also those validation
        dropped (an unknown kind): a reference to one is not reported again."""
        self.pack = pack
        self.source = source
        self.template_variables: Mapping[str, frozenset[str]] = template_variables or {}
        """What templates of each purpose see, as the sections defining the purposes say."""
        self.contract_names = {**dict.fromkeys(written_contracts), **pack.contracts}
        self.findings: list[Finding] = []
        self.context_names = set(pack.context)

    def add(
        self,
        rule: FindingRule,
        message: str,
        path: KeyPath,
        hint: str = "",
        is_key: bool = False,
        position: Position | None = None,
        level: Level | None = None,
    ) -> None:
        where = position or self.source.locate(path, prefer_key=is_key)
        self.findings.append(rule.at(message, where, hint, level))

    def context_reads(
        self,
        tree: jinja2.nodes.Template,
        what: str,
        path: KeyPath,
        position: Position | None = None,
        line_offset: int = 0,
    ) -> None:
        """A finding for each read of ``context`` in ``tree`` (the template or expression
        ``what`` names, declared at ``path``) the pack's declared context does not allow;
        ``position``: the template file, whose line each finding takes."""
        for message, hint, line in context_problems(self.pack.context, tree):
            where = None
            if position is not None:
                where = Position(position.file, line + line_offset, 1)
            self.add(UNDECLARED_CONTEXT_READ, f"{what} {message}", path, hint, position=where)

    def run(self) -> list[Finding]:
        checks: dict[Ref, Callable[[Reference], None]] = {
            Ref.FAILURE_TYPE: self._named(
                UNKNOWN_FAILURE_TYPE,
                self.pack.failure_types,
                "failure type",
                "declare it under `failure_types:`",
            ),
            Ref.SEVERITY: self._named(
                UNKNOWN_SEVERITY, self.pack.severities, "severity", "declare it under `severities:`"
            ),
            Ref.TEMPLATE: self._named(
                UNKNOWN_TEMPLATE, self.pack.templates, "template", "declare it under `templates:`"
            ),
            Ref.CONTRACT: self._named(
                UNKNOWN_CONTRACT, self.contract_names, "contract", "declare it under `contracts:`"
            ),
            Ref.ACTION: self._named(
                UNKNOWN_ACTION,
                {**STANDARD_ACTIONS, **self.pack.actions},
                "action",
                "declare it under `actions:`",
            ),
            Ref.FILE: self._file,
            Ref.PATTERN: self._pattern,
            Ref.ITEM_EXPRESSION: lambda ref: self.expression(ref, ITEM_VARIABLES),
            Ref.MESSAGE: lambda ref: None,
            Ref.CONTEXT_KEY: self._named(
                UNKNOWN_CONTEXT_KEY, self.pack.context, "context key", "declare it under `context:`"
            ),
            Ref.ITEM_PART: self._named(
                UNKNOWN_ITEM_PART,
                {**dict.fromkeys(ITEM_PARTS), **self.pack.context},
                "item part",
                "use nonce, params or a key declared under `context:`",
            ),
        }
        for ref in walk_references(self.pack, Rulepack, (), ()):
            check = checks.get(ref.kind)
            if check is not None:  # the other expressions: the section that owns them checks
                check(ref)
        self._requires()
        self._without_behaviour()
        return self.findings

    # ----------------------------------------------------------------- engine fit

    def _requires(self) -> None:
        """``requires`` is a version range the running engine must be in."""
        failed = unmet_requirements(self.pack.requires, VERSION)
        if failed:
            self.add(
                REQUIRES_UNMET,
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
                    NO_BEHAVIOUR,
                    f"`{dotted}` has no effect yet: {what}",
                    path,
                    "remove it, or keep it for a later engine version",
                    is_key=True,
                    level="warning",
                )

    # ----------------------------------------------------------------- references

    def _named(
        self, rule: FindingRule, table: typing.Mapping[str, Any], what: str, fix: str
    ) -> Callable[[Reference], None]:
        def check(ref: Reference) -> None:
            if ref.value in table:
                return
            hint = did_you_mean(ref.value, table, fix)
            self.add(
                rule,
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
                PATH_ABSOLUTE,
                f"path {value!r} is absolute",
                ref.path,
                "write paths relative to the pack folder",
            )
            return None
        if ".." in value.replace("\\", "/").split("/"):
            self.add(
                PATH_TRAVERSAL,
                f"path {value!r} leaves the pack with '..'",
                ref.path,
                "keep every file the pack uses inside the pack folder",
            )
            return None
        unusable = path_problem(value)
        if unusable is not None:
            self.add(
                FILE_MISSING,
                f"file {value[:200]!r} is no usable file name: {unusable}",
                ref.path,
                "fix the path",
            )
            return None
        root = self.pack_root(ref.path)
        target = root / value
        real = Path(os.path.realpath(target))
        if real != root and root not in real.parents:
            self.add(
                PATH_ESCAPE,
                f"path {value!r} resolves outside the pack (symlink)",
                ref.path,
                "copy the file into the pack instead of linking to it",
            )
            return None
        if not real.is_file():
            self.add(
                FILE_MISSING,
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
                INVALID_PATTERN,
                f"pattern {ref.value!r} does not compile: {exc}",
                ref.path,
                "patterns use RE2 syntax: no look-arounds or back-references",
            )

    def expressions(self, key: str, variables: typing.Mapping[Ref, frozenset[str]]) -> None:
        """Check the expressions of the section ``key`` whose kinds ``variables`` names, each
        with the variables of its kind (a section owns what its conditions may see)."""
        if key not in self.pack.model_fields_set:
            return
        annotation = type(self.pack).model_fields[key].annotation
        for ref in walk_references(
            getattr(self.pack, key), annotation, _refs_in(annotation), (key,)
        ):
            if ref.kind in variables:
                self.expression(ref, variables[ref.kind])

    def expression(self, ref: Reference, variables: frozenset[str]) -> None:
        problem = expression_problem(ref.value)
        if problem is not None:
            self.add(
                EXPRESSION_TOO_LARGE,
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
                INVALID_EXPRESSION,
                f"expression {ref.value!r} does not compile: {exc}",
                ref.path,
                "conditions use Jinja2 expression syntax",
            )
            return
        for _, problem in unsafe_constructs(expression_source(ref.value)):
            self.add(
                UNSAFE_EXPRESSION,
                f"expression {ref.value!r}: {problem}",
                ref.path,
                "use only the variables conditions may use",
            )
        allowed = variables | self.context_names
        for name in sorted(names - allowed):
            hint = did_you_mean(name, allowed, f"conditions may use: {', '.join(sorted(allowed))}")
            self.add(UNKNOWN_VARIABLE, f"expression uses unknown variable {name!r}", ref.path, hint)
        if "context" in variables:
            tree = ENVIRONMENT.parse(expression_source(ref.value))
            self.context_reads(tree, f"expression {ref.value!r}", ref.path)

    def template_purpose(
        self,
        name: str,
        purpose: str,
        path: KeyPath,
        rule: FindingRule = WRONG_TEMPLATE_PURPOSE,
        message: str = "template {name!r} is a {declared} template, not a {purpose} template",
    ) -> None:
        """A finding of ``rule`` when the template ``name`` is declared with another purpose;
        ``message`` may use ``name``, ``declared`` (its purpose) and ``purpose``."""
        template = self.pack.templates.get(name)
        if template is not None and template.purpose != purpose:
            self.add(
                rule,
                message.format(name=name, declared=template.purpose, purpose=purpose),
                path,
                f"declare it with `purpose: {purpose}`",
            )

    def quiet_resolve(self, value: str, path: KeyPath) -> Path | None:
        """Resolve a path already checked by the generic walk, without a second finding."""
        before = len(self.findings)
        target = self.resolve_file(Reference(Ref.FILE, value, path))
        del self.findings[before:]
        return target

    def unknown_field(self, name: str, path: KeyPath, fields: typing.Mapping[str, Any]) -> None:
        self.add(
            UNKNOWN_FIELD,
            f"unknown field {name!r}",
            path,
            did_you_mean(name, fields, "declare it under `fields:`"),
        )


def display(path: Path) -> str:
    """``path`` relative to the working folder when it can be (as findings show files)."""
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


def unmet_requirements(requires: str, version: str) -> list[str]:
    """The constraints of a ``requires`` range (``>=0.1, <2``) that ``version`` breaks, in the
    order written, compared as PEP 440 versions (``0.1`` equals ``0.1.0``; an engine
    pre-release is compared too, before its release)."""
    have = Version(version)
    failed = []
    # The model's pattern admits constraints without commas between them (`>=0.1 <2`).
    for op, number in re.findall(r"([<>]=?|==|!=)\s*(\d+(?:\.\d+)*)", requires):
        if not Specifier(op + number).contains(have, prereleases=True):
            failed.append(f"{op}{number}")
    return failed


def check_semantics(pack: Rulepack, source: SourceMap) -> list[Finding]:
    """The format-level findings (contracts are checked by their kinds: engine.contracts)."""
    return PackChecker(pack, source).run()
