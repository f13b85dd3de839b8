"""A pack's prompts, ready to render: every template, contract text and example file of the
pack read, every hint pattern compiled, once, at load; each prompt template compiled once,
when it is first rendered (a command that evaluates one output renders none of them, one
that renders a prompt one or two).

Rendering then reads no pack file; only session example files (written during a session,
outside the pack) are read when a prompt is rendered. Log templates (views of the ledger,
not prompts) are compiled only where a log is rendered.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path
from typing import TYPE_CHECKING, Any

import jinja2

from engine.core.errors import PackError
from engine.core.lazy import BuiltOnUse
from engine.core.patterns import CompiledPattern, compile_pattern
from engine.core.placeholders import fill
from engine.prompts.examples.select import PackFiles, example_files
from engine.sandbox.environment import ENVIRONMENT

if TYPE_CHECKING:
    from engine.format.model import Rulepack


@dataclass(frozen=True)
class CompiledHint:
    """A micro-hint whose pattern is compiled once (at load, or when first matched);
    ``blocks`` empty means every block."""

    blocks: frozenset[str]
    pattern: str
    hint: str

    @cached_property
    def match(self) -> CompiledPattern:
        return compile_pattern(self.pattern)


@dataclass(frozen=True)
class CompiledPrompts:
    """Everything rendering needs from a pack, compiled or read at load."""

    pack: Rulepack
    templates: BuiltOnUse[jinja2.Template]
    """Compiled in the sandbox once: all at load (``build_all``), or each on first use."""
    log_sources: Mapping[str, str]
    contract_texts: Mapping[str, str]
    id_patterns: Callable[[str], Mapping[str, str]]
    """The kinds of id a block's outputs reference (name → pattern), as its compiled
    contract says (``CompiledContract.id_patterns``)."""
    hints: tuple[CompiledHint, ...]
    files: PackFiles
    generated_texts: Callable[[str], str] = lambda block: ""
    """The contract text a block's compiled contract writes itself (a tool-call contract:
    its tools and their schemas), used when the pack gives no ``contract_text`` file."""

    def build_all(self) -> None:
        """Compile every template and hint pattern now (a process that renders many)."""
        self.templates.build_all()
        for hint in self.hints:
            hint.match  # noqa: B018 (reading the property compiles the pattern)

    def micro_hint(self, block: str, error: str) -> str:
        """The first hint whose pattern matches ``error`` (and that applies to ``block``)."""
        for hint in self.hints:
            if hint.blocks and block not in hint.blocks:
                continue
            if hint.match.search(error) is not None:
                return hint.hint
        return ""

    def contract_text(self, block: str, nonce: str, params: Mapping[str, str]) -> str:
        """The block's contract text with the nonce and params filled in, without its
        trailing line breaks (they are not content); empty when the contract has none."""
        raw = self.contract_texts.get(block, "") or self.generated_texts(block)
        return fill(raw, {"nonce": nonce, **params}).rstrip("\n") if raw else ""


def contract_text_file(contract: Any) -> str | None:
    """The pack file holding a contract's authoritative text, if it names one."""
    value = getattr(contract, "contract_text", None)
    return value if isinstance(value, str) else None


FolderOf = Callable[[tuple[str | int, ...]], Path]
"""The folder of the pack file that declared the value at a key path (``extends`` merges
packs from several folders; a file a pack names is relative to the pack that names it)."""


def _read_text(root: Path, file: str, what: str) -> str:
    try:
        return (root / file).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise PackError(f"{root / file}: cannot read {what}: {exc}") from None


def compile_prompts(
    pack: Rulepack,
    root: Path,
    id_patterns: Callable[[str], Mapping[str, str]],
    folder_of: FolderOf | None = None,
    generated_texts: Callable[[str], str] = lambda block: "",
) -> CompiledPrompts:
    """Compile every prompt template, read every log template, contract text and example
    file of ``pack``; ``id_patterns`` gives the kinds of id of a block's outputs.

    Files are relative to ``folder_of(key path)`` when given, else to ``root``.
    """

    def folder(*path: str | int) -> Path:
        return folder_of(path) if folder_of is not None else root

    sources: dict[str, tuple[str, str, Path]] = {}  # name -> (source, file as named, path)
    log_sources = {}
    for name, spec in pack.templates.items():
        base = folder("templates", name, "file")
        source = _read_text(base, spec.file, f"template {name!r}")
        if spec.purpose == "log":
            log_sources[name] = source
        else:
            sources[name] = (source, spec.file, base / spec.file)

    def compile_template(name: str) -> jinja2.Template:
        source, file, path = sources[name]
        try:
            template = ENVIRONMENT.from_string(source)
        except jinja2.TemplateError as exc:
            raise PackError(f"{path}: template {name!r}: {exc}") from None
        template.origin = f"template {name!r} ({file})"  # type: ignore[attr-defined]
        return template

    contract_texts = {}
    for block, contract in pack.contracts.items():
        file = contract_text_file(contract)
        if file:
            contract_texts[block] = _read_text(
                folder("contracts", block, "contract_text"), file, f"the contract text of {block!r}"
            )
    return CompiledPrompts(
        pack=pack,
        templates=BuiltOnUse(sources, compile_template),
        log_sources=log_sources,
        contract_texts=contract_texts,
        id_patterns=id_patterns,
        generated_texts=generated_texts,
        hints=tuple(CompiledHint(frozenset(h.blocks), h.match, h.hint) for h in pack.hints),
        files=PackFiles(
            root, {file: folder(*where) for file, where in example_files(pack.examples).items()}
        ),
    )
