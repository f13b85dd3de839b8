"""Semantic checks of a validated pack, the generic part: every reference resolves, every
file is inside the pack, every pattern compiles, the engine is in the pack's ``requires``.

The walk is generic: fields of the models that refer to something carry a ``Ref`` marker
(fields.py), and each kind of reference has one checking function here. ``PackChecker``
collects the findings; each section checks the rest itself (``Section.check``: templates,
its own expressions with the variables it provides...), run by ``engine.pack.loaded``.
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
from packaging.specifiers import Specifier
from packaging.version import Version
from pydantic import BaseModel

from engine.core.errors import Position
from engine.core.patterns import PatternError, compile_pattern
from engine.format.findings import Finding, Level
from engine.format.loader import KeyPath, SourceMap
from engine.format.model import ITEM_PARTS, Ref, Rulepack
from engine.format.vocabulary import STANDARD_ACTIONS
from engine.sandbox.environment import (
    compile_condition,
    expression_problem,
    expression_source,
    undeclared_names,
    unsafe_constructs,
)

# Variables of a condition on one context-list item (which items a coverage check, a
# rate limit or a conflict option counts): ``Ref.ITEM_EXPRESSION``, a reference kind of the
# format, checked by the generic walk. Each section checks its other expressions itself.
ITEM_VARIABLES: frozenset[str] = frozenset({"item", "context"})


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
            Ref.ITEM_EXPRESSION: lambda ref: self.expression(ref, ITEM_VARIABLES),
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
            check = checks.get(ref.kind)
            if check is not None:  # the other expressions: the section that owns them checks
                check(ref)
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

    def template_purpose(self, name: str, purpose: str, path: KeyPath) -> None:
        """A finding when the template ``name`` is declared with another purpose."""
        template = self.pack.templates.get(name)
        if template is not None and template.purpose != purpose:
            self.add(
                "wrong-template-purpose",
                f"template {name!r} is a {template.purpose} template, not a {purpose} template",
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
        close = difflib.get_close_matches(name, list(fields), n=1)
        self.add(
            "unknown-field",
            f"unknown field {name!r}",
            path,
            f"did you mean {close[0]!r}?" if close else "declare it under `fields:`",
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
