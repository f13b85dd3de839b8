"""The public entry points: find, check and load rulepacks."""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from typing import Any

from engine.compile import compile_parsers
from engine.contracts.markdown import Output, run_checks
from engine.contracts.sentinel.parser import SentinelParser
from engine.errors import EngineError, EvaluationError, PackError, Position
from engine.format.context import build_context
from engine.format.findings import Finding, has_errors
from engine.format.loader import (
    BUILTIN_PREFIX,
    PACK_FILE,
    PackTree,
    SourceMap,
    display_path,
    load_pack_tree,
    resolve_pack_file,
)
from engine.format.model import MarkdownContract, Rulepack, SentinelContract
from engine.format.semantics import check_semantics
from engine.format.validate import validate_tree
from engine.policy.decide import CompiledPolicy, Decision, compile_policy, decide
from engine.prompts.compiled import CompiledPrompts, compile_prompts
from engine.prompts.render import RenderedPrompt, render_prompt
from engine.resources import builtin_pack_names
from engine.results import ParseResult
from engine.textio import clean_text, decode_output
from engine.verdict import (
    Verdict,
    verdict_from_checks,
    verdict_from_error,
    verdict_from_parse,
)


@dataclass
class CheckResult:
    """What `rules check` found in one pack."""

    target: str
    findings: list[Finding]
    model: Rulepack | None = None
    tree: PackTree | None = None

    @property
    def ok(self) -> bool:
        return not has_errors(self.findings)


@dataclass
class Pack:
    """A loaded, checked rulepack, compiled once: parsers, guards, templates, contract texts,
    hint patterns and example files are ready; deciding and rendering compile and read
    nothing of the pack."""

    model: Rulepack
    root: Path
    source: SourceMap = field(repr=False)
    parsers: dict[str, SentinelParser] = field(default_factory=dict, repr=False)
    policy: CompiledPolicy = field(init=False, repr=False)
    prompts: CompiledPrompts = field(init=False, repr=False)

    def __post_init__(self) -> None:
        if not self.parsers:
            self.parsers = compile_parsers(self.model)
        self.policy = compile_policy(self.model)
        self.prompts = compile_prompts(self.model, self.root, self._folder_of)

    def _folder_of(self, path: tuple[str | int, ...]) -> Path:
        """The folder of the pack file that declared ``path`` (packs it extends included)."""
        declared = self.source.file_of(path)
        return Path(declared).resolve().parent if declared != "<unknown>" else self.root

    @property
    def name(self) -> str:
        return self.model.rulepack

    @property
    def blocks(self) -> list[str]:
        return list(self.model.contracts)

    def contract_kind(self, block: str) -> str:
        if block not in self.model.contracts:
            known = ", ".join(self.model.contracts) or "none"
            raise EngineError(f"pack {self.name!r} has no block {block!r} (blocks: {known})")
        return self.model.contracts[block].kind

    def parse(self, block: str, text: str | bytes, nonce: str | None = None,
              vars: Mapping[str, str] | None = None) -> ParseResult:
        """Deterministically parse one block of ``text``; never raises for any text."""
        kind = self.contract_kind(block)
        parser = self.parsers.get(block)
        if parser is None:
            raise EngineError(f"block {block!r} is a {kind} contract; `parse` needs a "
                              "sentinel contract (use `evaluate`)")
        params = {k: clean_text(v) for k, v in (vars or {}).items()}
        return parser.parse(decode_output(text), None if nonce is None else clean_text(nonce),
                            params)

    def split_inputs(self, block: str, context: Mapping[str, Any] | None = None,
                     strings: Mapping[str, str] | None = None
                     ) -> tuple[dict[str, str], dict[str, Any]]:
        """``--var`` values that are block params, and the checked context (file + the rest)."""
        self.contract_kind(block)
        contract = self.model.contracts[block]
        param_names = set(contract.params) if isinstance(contract, SentinelContract) else set()
        params = {k: v for k, v in (strings or {}).items() if k in param_names}
        rest = {k: v for k, v in (strings or {}).items() if k not in param_names}
        return params, build_context(self.model.context, context, rest)

    def evaluate(self, block: str, text: str | bytes | None, nonce: str | None = None,
                 vars: Mapping[str, str] | None = None, *,
                 context: Mapping[str, Any] | None = None, path: str | None = None) -> Verdict:
        """Check an output against the block's contract; never raises for any text.

        ``text`` None means the output file ``path`` does not exist. ``context`` must fit
        the keys the pack declares (ContextError otherwise).
        """
        kind = self.contract_kind(block)
        contract = self.model.contracts[block]
        checked = build_context(self.model.context, context)
        if isinstance(contract, MarkdownContract):
            shown = decode_output(text) if text is not None else None
            outcome = run_checks(contract, Output(shown, path, checked))
            return verdict_from_checks(block, outcome.failures, outcome.warnings,
                                       outcome.data, self.severities)
        if text is None:
            raise EvaluationError(f"{path}: no such file")
        if kind != "sentinel":
            raise EvaluationError(f"evaluating {kind} contracts is not implemented yet")
        return verdict_from_parse(block, self.parse(block, text, nonce, vars), self.severities)

    @cached_property
    def severities(self) -> dict[str, str]:
        return {name: ft.severity for name, ft in self.model.failure_types.items()}

    def verdict_for_error(self, block: str, message: str,
                          failure_type: str = "PARSE_ERROR") -> Verdict:
        """A failed verdict for an error reported by another tool (e.g. its own parser)."""
        self.contract_kind(block)
        if failure_type not in self.model.failure_types:
            raise EngineError(f"unknown failure type {failure_type!r} "
                              f"(known: {', '.join(self.model.failure_types)})")
        return verdict_from_error(block, message, failure_type, self.severities)

    def decide(self, verdict: Verdict, *, output: str | bytes, attempt: int = 1,
               previous_errors: Sequence[str] = (), nonce: str | None = None,
               model: str | None = None, context: Mapping[str, Any] | None = None) -> Decision:
        """What happens next for ``verdict`` (see engine.decide for attempt counting)."""
        carry = {"nonce": nonce, "model": model}
        return decide(self.policy, verdict, output=decode_output(output), attempt=attempt,
                      previous_errors=previous_errors, carry=carry, context=context)

    def render(self, verdict: Verdict, decision: Decision, *, output: str | bytes,
               nonce: str | None = None, vars: Mapping[str, str] | None = None,
               context: Mapping[str, Any] | None = None,
               accepted_rounds: Collection[int] | None = None) -> str:
        """The prompt ``decision`` calls for (repair, retry or escalation); RenderError when
        none is due."""
        return self.render_prompt(verdict, decision, output=output, nonce=nonce, vars=vars,
                                  context=context, accepted_rounds=accepted_rounds).text

    def render_prompt(self, verdict: Verdict, decision: Decision, *, output: str | bytes,
                      nonce: str | None = None, vars: Mapping[str, str] | None = None,
                      context: Mapping[str, Any] | None = None,
                      accepted_rounds: Collection[int] | None = None) -> RenderedPrompt:
        """Like ``render``, with what went into the prompt (example tier, size, cut).

        ``accepted_rounds``: the rounds whose output for the block the session's ledger
        accepted, for example tiers with ``validated_in_ledger``. The Pack reads no ledger:
        without them every earlier round counts (``engine.state.session`` passes them).
        """
        return render_prompt(self.prompts, verdict, decision,
                             output=decode_output(output), nonce=nonce or "",
                             params=dict(vars or {}),
                             context=build_context(self.model.context, context),
                             accepted_rounds=accepted_rounds)


def find_pack_files(target: str) -> list[Path]:
    """The pack files ``target`` names: a pack file, a pack folder, a folder of packs, or
    ``builtin:NAME``. An unknown target raises ``PackError``."""
    if target.startswith(BUILTIN_PREFIX):
        found = resolve_pack_file(target, Path.cwd())
        if found is None:
            known = ", ".join(BUILTIN_PREFIX + n for n in builtin_pack_names())
            raise PackError(f"{target}: no such builtin pack (known: {known})")
        return [found]
    path = Path(target)
    if path.is_file():
        return [path]
    if path.is_dir():
        if (path / PACK_FILE).is_file():
            return [path / PACK_FILE]
        packs = sorted(p / PACK_FILE for p in path.iterdir() if (p / PACK_FILE).is_file())
        if packs:
            return packs
        raise PackError(f"{target}: no {PACK_FILE} here or in its sub-folders")
    if "/" not in target and target in builtin_pack_names():
        return find_pack_files(BUILTIN_PREFIX + target)
    raise PackError(f"{target}: no such file, folder or builtin pack")


def check_pack_file(pack_file: Path) -> CheckResult:
    """Load, validate and check one pack; every problem is a finding, nothing raises."""
    tree = load_pack_tree(pack_file)
    findings = list(tree.findings)
    model = None
    if tree.data:
        model, invalid = validate_tree(tree.data, tree.source)
        findings.extend(invalid)
        if model is not None:
            findings.extend(check_semantics(model, tree.source))
    unique = sorted(set(findings), key=Finding.sort_key)
    return CheckResult(display_path(pack_file), unique, model, tree)


def check_packs(targets: list[str]) -> list[CheckResult]:
    results = []
    for target in targets:
        for pack_file in find_pack_files(target):
            results.append(check_pack_file(pack_file))
    return results


def load_pack(ref: str | Path) -> Pack:
    """Load the pack ``ref`` names (path, folder or ``builtin:NAME`` / bare builtin name).

    Raises ``PackError`` carrying every finding if the pack has errors.
    """
    files = find_pack_files(str(ref))
    if len(files) != 1:
        raise PackError(f"{ref}: names {len(files)} packs; give one")
    result = check_pack_file(files[0])
    if not result.ok or result.model is None or result.tree is None:
        errors = [f for f in result.findings if f.level == "error"]
        first = errors[0] if errors else Finding("pack-invalid", "pack is invalid",
                                                 Position(result.target))
        more = f" (and {len(errors) - 1} more; run `rules check {ref}`)" if len(errors) > 1 else ""
        raise PackError(f"{first.position}: {first.message}{more}", tuple(result.findings))
    return Pack(result.model, files[0].resolve().parent, result.tree.source)
