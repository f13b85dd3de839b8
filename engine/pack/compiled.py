"""A loaded, checked rulepack compiled once: ``Pack``, what every command and the Python API
evaluate, decide and render with.

This module imports nothing heavy at its top: a pack read back from the compiled-pack
cache (engine.pack.image) is a ``Pack`` built without YAML or pydantic, and a command that
evaluates one output imports only what that output needs.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cached_property
from pathlib import Path
from types import ModuleType
from typing import TYPE_CHECKING, Any, cast

from engine.contracts.kind import CompiledContract, EvaluationInput
from engine.contracts.registry import needs_nonce
from engine.core.clock import now as clock_now
from engine.core.errors import ContextError, EngineError, ParamError, unknown_block_error
from engine.core.patterns import compile_pattern
from engine.core.suggest import did_you_mean
from engine.core.textio import clean_text, decode_output, holds_lone_surrogate
from engine.core.verdict import Verdict, verdict_from_error
from engine.format.context import build_context
from engine.format.section import Compiling
from engine.pack.arguments import check
from engine.pack.parsing import Parsing
from engine.pack.revision import pack_revision
from engine.pack.sections import BUILTIN, section
from engine.policy.gates.inputs import GateError, GateInput
from engine.policy.triggers.decide import decide
from engine.policy.triggers.section import TRIGGERS

if TYPE_CHECKING:
    from datetime import datetime

    from engine.format.model import Rulepack
    from engine.format.sourcemap import SourceMap
    from engine.policy.conflicts.runtime import CompiledConflicts
    from engine.policy.gates.runtime import CompiledGates, GateOutcome
    from engine.policy.limits.rates import Measure
    from engine.policy.triggers.decide import CompiledPolicy, Decision
    from engine.prompts.compiled import CompiledPrompts
    from engine.prompts.examples.select import ReviewedExample
    from engine.prompts.render import RenderedPrompt


def prepared_output(
    text: str | bytes | None,
    nonce: str | None = None,
    vars: Mapping[str, str] | None = None,
    *,
    path: str | None = None,
    shared: dict[str, Any] | None = None,
    context: Mapping[str, Any] | None = None,
) -> EvaluationInput:
    """An output and its inputs made clean text once (``Pack.evaluate_prepared``): the
    text decoded, lone surrogates replaced in text, nonce and params; ``context``, when
    given, already checked (so ``evaluate_prepared`` need not copy the tuple to add it)."""
    decoded = None if text is None else decode_output(text)
    cleaned = None if nonce is None else clean_text(nonce)
    params = {k: clean_text(v) for k, v in (vars or {}).items()}
    if context:
        return EvaluationInput(decoded, cleaned, params, context, path, shared)
    return EvaluationInput(decoded, cleaned, params, path=path, shared=shared)


@dataclass(frozen=True)
class _BlockInputs:
    """What a block takes from a caller: its params' patterns, the params it requires and
    whether it needs a nonce (``Pack.split_inputs``, ``Pack.missing_inputs``)."""

    patterns: dict[str, str]
    required: tuple[str, ...]
    needs_nonce: bool


@dataclass
class Pack(Parsing):
    """A loaded, checked rulepack, compiled once: contracts, guards, templates, contract texts,
    hint patterns and example files are ready; deciding and rendering compile and read
    nothing of the pack."""

    model: Rulepack
    root: Path
    source: SourceMap = field(repr=False)
    contracts: Mapping[str, CompiledContract] = field(default_factory=dict, repr=False)
    files: tuple[Path, ...] = field(default=(), repr=False)
    """The YAML files the pack was loaded from (the pack file and what it extends)."""
    lazy: bool = field(default=False, repr=False)
    """Compile each contract and prompt template when it is first used, and read the
    prompts' files then, instead of all at load: for a command that evaluates or renders
    one output."""

    _sections: dict[str, Any] = field(default_factory=dict, init=False, repr=False)
    _inputs: dict[str, _BlockInputs] = field(default_factory=dict, init=False, repr=False)

    def __post_init__(self) -> None:
        if self.contracts:
            self._sections["contracts"] = self.contracts
        self.contracts = self.section("contracts")
        # Eager sections build everything now; a lazy pack builds each when first used,
        # the trigger policy now (its guards still on first use).
        for builtin in BUILTIN if not self.lazy else (TRIGGERS,):
            self.section(builtin.key)

    def section(self, key: str) -> Any:
        """The section ``key`` compiled by its ``Section.compile`` (once, on first use):
        the engine's own sections and those registered from outside alike."""
        if key not in self._sections:
            found = section(key)
            if found is None:
                raise EngineError(f"no rulepack section {key!r} is registered")
            compiling = Compiling(
                self.root, self.folder_of, self.source.locate, self.lazy, self.section
            )
            self._sections[key] = found.compile(self.model, compiling)
        return self._sections[key]

    @property
    def policy(self) -> CompiledPolicy:
        """The triggers and rate limits, compiled: what ``decide`` runs."""
        policy: CompiledPolicy = self.section("triggers")
        return policy

    @property
    def prompts(self) -> CompiledPrompts:
        """Everything rendering needs from the pack: templates, contract texts, hints and
        example files, read (and compiled) once."""
        prompts: CompiledPrompts = self.section("templates")
        return prompts

    @property
    def gates(self) -> CompiledGates | None:
        """The quality gates, compiled (None when the pack declares none)."""
        gates: CompiledGates | None = self.section("gates")
        return gates

    @property
    def conflicts(self) -> CompiledConflicts | None:
        """The conflict rules, compiled (None when the pack declares none)."""
        conflicts: CompiledConflicts | None = self.section("conflicts")
        return conflicts

    def folder_of(self, path: tuple[str | int, ...]) -> Path:
        """The folder of the pack file that declared ``path`` (packs it extends included)."""
        declared = self.source.file_of(path)
        return Path(declared).resolve().parent if declared != "<unknown>" else self.root

    @property
    def name(self) -> str:
        return self.model.rulepack

    @cached_property
    def revision(self) -> str:
        """A hash of the pack's files and of the packs it extends (``pack_revision``): the
        same in every process, changed by any change of those files. Computed once, on
        first use, from the files as they are then."""
        return pack_revision(self.files)

    @property
    def blocks(self) -> list[str]:
        return list(self.model.contracts)

    def contract(self, block: str) -> CompiledContract:
        """The compiled contract of ``block``; ``EngineError`` naming the blocks if unknown."""
        compiled = self.contracts.get(block)
        if compiled is None:
            raise unknown_block_error(self.name, block, list(self.model.contracts))
        return compiled

    def contract_kind(self, block: str) -> str:
        self.contract(block)
        kind: str = self.model.contracts[block].kind
        return kind

    def block_parser(self, block: str) -> CompiledContract:
        """The parser of ``block`` for ``parse``: its compiled contract."""
        return self.contract(block)

    def split_inputs(
        self,
        block: str,
        context: Mapping[str, Any] | None = None,
        strings: Mapping[str, str] | None = None,
    ) -> tuple[dict[str, str], dict[str, Any]]:
        """``--var`` values that are block params, and the checked context (file + the rest)."""
        param_names = self.contract(block).param_names
        params: dict[str, str] = {}
        rest: dict[str, str] = {}
        for name, value in (strings or {}).items():
            (params if name in param_names else rest)[name] = value
        self._check_params(block, params)
        if not rest:
            return params, self._checked_context(context)
        self._check_misspelt_params(param_names, rest)
        return params, build_context(self.model.context, context, rest)

    def _checked_context(self, context: Mapping[str, Any] | None) -> dict[str, Any]:
        """``build_context`` of the pack's keys and ``context``; when it is empty, a copy
        of the defaults built once (``_context_defaults``)."""
        if not context:
            defaults = self._context_defaults
            if defaults is not None:
                return dict(defaults)
        return build_context(self.model.context, context)

    @cached_property
    def _context_defaults(self) -> dict[str, Any] | None:
        """The context of a caller who gives none (each declared key's default), built and
        checked once: evaluating one output would otherwise spend as much on it as on
        reading the output's fields. None when it must be built each time: a key read from
        the environment (which may change), a required key (the error is raised each
        time), a default other than a plain value (each call gets the pack's own object,
        checked again)."""
        declared = self.model.context
        plain = (str, int, float, bool)
        for spec in declared.values():
            if spec.env is not None or spec.required:
                return None
            if spec.default is not None and type(spec.default) not in plain:
                return None
        try:
            return build_context(declared)
        except EngineError:
            return None

    def _block_inputs(self, block: str) -> _BlockInputs:
        """What ``block`` takes from a caller, read from its contract's model once."""
        found = self._inputs.get(block)
        if found is None:
            contract = self.model.contracts.get(block)
            declared = getattr(contract, "params", None) or {}
            found = self._inputs[block] = _BlockInputs(
                {name: spec.pattern for name, spec in declared.items()},
                tuple(name for name, spec in declared.items() if spec.required),
                contract is not None and needs_nonce(contract),
            )
        return found

    def _check_misspelt_params(self, param_names: Collection[str], rest: Mapping[str, str]) -> None:
        """A --var that is no context key but close to a block parameter's name is most
        likely that parameter misspelt: say so, rather than list the context keys."""
        for name in rest:
            if name in self.model.context or not param_names:
                continue
            if did_you_mean(name, self.model.context):
                continue  # build_context names the close context key
            hint = did_you_mean(name, param_names, shown=lambda x: f"the block parameter {x!r}")
            if hint:
                raise ContextError(f"unknown context key {name!r} ({hint})")

    def _check_params(self, block: str, params: Mapping[str, str]) -> None:
        """ParamError for a param that does not match its declared pattern: the caller
        gave it, so asking the model to repair it would ask the wrong party. A value that
        is not text at all (a lone surrogate) is left to the check that says so."""
        patterns = self._block_inputs(block).patterns
        for name, value in params.items():
            pattern = patterns.get(name)
            if pattern is None or not isinstance(value, str) or holds_lone_surrogate(value):
                continue
            if compile_pattern(pattern).search(value) is None:
                raise ParamError(
                    f"block {block!r}: parameter {name}={value!r} does not match its pattern "
                    f"{pattern} (a caller's input, not the model's: nothing was "
                    "evaluated)",
                    f"vars.{name}",
                )

    def required_params(self, block: str) -> tuple[str, ...]:
        """The params a caller must give for ``block`` (its delimiters name them)."""
        return self._block_inputs(block).required

    def missing_inputs(
        self, block: str, nonce: str | None, vars: Mapping[str, str] | None
    ) -> list[str]:
        """What the caller must give for ``block`` and did not, named as the fields of its
        input: ``nonce`` for a delimited block, ``vars.NAME`` for each required param. Each
        front door says them in its own words (`--nonce`, `--var NAME=...`)."""
        inputs = self._block_inputs(block)
        if not inputs.needs_nonce:
            return []
        missing = ["nonce"] if nonce is None else []
        missing += [f"vars.{name}" for name in inputs.required if name not in (vars or {})]
        return missing

    def evaluate(
        self,
        block: str,
        text: str | bytes | None,
        nonce: str | None = None,
        vars: Mapping[str, str] | None = None,
        *,
        context: Mapping[str, Any] | None = None,
        path: str | None = None,
        shared: dict[str, Any] | None = None,
    ) -> Verdict:
        """Check an output against the block's contract; never raises for any text.

        ``text`` None means the output file ``path`` does not exist. ``context`` must fit
        the keys the pack declares (ContextError otherwise). ``shared``: a dict kept for
        this one output while other packs evaluate it too, so work that does not differ
        between them is done once (see ``EvaluationInput.shared``).
        """
        check("Pack.evaluate", block=block, text=text, nonce=nonce, vars=vars, context=context)
        compiled = self.contract(block)  # an unknown block is said before a wrong context
        checked = self._checked_context(context)
        return compiled.evaluate(
            prepared_output(text, nonce, vars, path=path, shared=shared, context=checked)
        )

    def evaluate_prepared(
        self,
        block: str,
        output: EvaluationInput,
        context: Mapping[str, Any] | None = None,
        *,
        checked: bool = False,
    ) -> Verdict:
        """``evaluate`` of an output prepared once (``prepared_output``) for several packs;
        ``context`` is checked against this pack's keys unless ``checked`` says it already
        was (``split_inputs`` built it: checking it again costs as much as reading a short
        output)."""
        compiled = self.contract(block)
        if not checked:
            context = self._checked_context(context)
        if context and output.context is not context:
            output = output._replace(context=context)
        return compiled.evaluate(output)

    def gate(
        self,
        gate: str,
        outputs: Sequence[Any],
        *,
        retry: int = 0,
        context: Mapping[str, Any] | None = None,
        strings: Mapping[str, str] | None = None,
        now: datetime | str | None = None,
        input_errors: Sequence[str] = (),
    ) -> GateOutcome:
        """Run quality gate ``gate`` on ``outputs`` (JSON values): result, reprompt and
        artifact. ``now`` fixes the clock (else SOURCE_DATE_EPOCH, else the real time)."""
        if self.gates is None:
            raise GateError(f"pack {self.name!r} declares no gates (`gates.steps`)")
        checked = build_context(self.model.context, context, strings)
        return self.gates.run(
            GateInput(gate, outputs, retry, checked, input_errors), clock_now(now)
        )

    @cached_property
    def severities(self) -> dict[str, str]:
        return {name: ft.severity for name, ft in self.model.failure_types.items()}

    def verdict_for_error(
        self, block: str, message: str, failure_type: str = "PARSE_ERROR"
    ) -> Verdict:
        """A failed verdict for an error reported by another tool (e.g. its own parser)."""
        self.contract_kind(block)
        if failure_type not in self.model.failure_types:
            raise EngineError(
                f"unknown failure type {failure_type!r} "
                f"(known: {', '.join(self.model.failure_types)})"
            )
        return verdict_from_error(block, message, failure_type, self.severities)

    def decide(
        self,
        verdict: Verdict,
        *,
        output: str | bytes,
        attempt: int = 1,
        previous_errors: Sequence[str] = (),
        nonce: str | None = None,
        model: str | None = None,
        context: Mapping[str, Any] | None = None,
        measure: Measure | None = None,
        earlier: Sequence[tuple[int, int, int]] | None = None,
        extra_attempts: int = 0,
    ) -> Decision:
        """What happens next for ``verdict`` (see engine.decide for attempt counting;
        ``measure`` and ``earlier``: a block's rate-limit counts, engine.policy.limits.rates;
        ``extra_attempts``: more repairs/retries a user's choice allowed)."""
        check(
            "Pack.decide",
            verdict=verdict,
            output=output,
            attempt=attempt,
            previous_errors=previous_errors,
            nonce=nonce,
            model=model,
            context=context,
            extra_attempts=extra_attempts,
        )
        carry = {"nonce": nonce, "model": model}
        return decide(
            self.policy,
            verdict,
            output=decode_output(output),
            attempt=attempt,
            previous_errors=previous_errors,
            carry=carry,
            context=context,
            measure=measure,
            earlier=earlier,
            extra_attempts=extra_attempts,
        )

    def initial_prompt(
        self,
        block: str,
        *,
        vars: Mapping[str, str] | None = None,
        context: Mapping[str, Any] | None = None,
        nonce: str | None = None,
    ) -> str:
        """The first prompt of ``block`` (the pack's ``prompts:`` template) with the
        decisions of the previous round: the items of the ``session.decided`` context key
        whose round is the context's round minus one (all of them when no round is known),
        and the block's contract text (``format_contract``, with ``nonce`` and ``vars``
        filled in, as repair templates see it)."""
        check("Pack.initial_prompt", block=block, vars=vars, context=context, nonce=nonce)
        template = self.model.prompts.get(block)
        if template is None:
            known = ", ".join(sorted(self.model.prompts)) or "none"
            raise EngineError(
                f"pack {self.name!r} declares no first prompt for block {block!r} "
                f"(`prompts:` has: {known})"
            )
        values = self._checked_context(context)
        decided_key = self.model.session.decided
        round_key = self.model.session.round
        decided = values.get(decided_key) if decided_key else None
        round_value = values.get(round_key) if round_key else None
        resolutions = [
            item
            for item in (decided if isinstance(decided, list) else [])
            if isinstance(item, Mapping)
            and (not isinstance(round_value, int) or item.get("round") == round_value - 1)
        ]
        initial_example = _rendering().initial_example
        return self.prompts.templates[template].render(
            {
                **values,
                "context": values,
                "block": block,
                "nonce": nonce or "",
                "params": dict(vars or {}),
                "format_contract": self.contract_text(block, nonce, vars),
                "resolutions": resolutions,
                **initial_example(self.prompts, self.model, block, values),
            }
        )

    def contract_text(
        self, block: str, nonce: str | None = None, vars: Mapping[str, str] | None = None
    ) -> str:
        """The block's contract text (``contract_text``), with the nonce and params filled
        in; empty when the contract has none."""
        return self.prompts.contract_text(block, nonce or "", vars or {})

    def render_conflicts(self, template: str, variables: Mapping[str, Any]) -> str:
        """A template of purpose ``conflicts`` (presentation, decisions record) filled."""
        return self.prompts.templates[template].render(dict(variables))

    def present(
        self, verdict: Verdict, decision: Decision, context: Mapping[str, Any] | None = None
    ) -> str:
        """The presentation of the rate limit that decided (for the user); RenderError
        when no limit decided or the limit names no presentation."""
        presented = _rendering().render_presentation(
            self.prompts, verdict, decision, self._checked_context(context)
        )
        return cast(str, presented)

    def render(
        self,
        verdict: Verdict,
        decision: Decision,
        *,
        output: str | bytes,
        nonce: str | None = None,
        vars: Mapping[str, str] | None = None,
        context: Mapping[str, Any] | None = None,
        accepted_rounds: Collection[int] | None = None,
    ) -> str:
        """The prompt ``decision`` calls for (repair, retry or escalation); RenderError when
        none is due."""
        return self.render_prompt(
            verdict,
            decision,
            output=output,
            nonce=nonce,
            vars=vars,
            context=context,
            accepted_rounds=accepted_rounds,
        ).text

    def render_prompt(
        self,
        verdict: Verdict,
        decision: Decision,
        *,
        output: str | bytes,
        nonce: str | None = None,
        vars: Mapping[str, str] | None = None,
        context: Mapping[str, Any] | None = None,
        accepted_rounds: Collection[int] | None = None,
        user_context: str = "",
        reviewed: Sequence[ReviewedExample] = (),
    ) -> RenderedPrompt:
        """Like ``render``, with what went into the prompt (example tier, size, cut).
        ``user_context``: the user's text a choice added (retry templates' `user_context`).
        ``reviewed``: outputs people wrote for the block in the session (edited reviews,
        newest first), for the examples' ``reviewed`` tier.

        ``accepted_rounds``: the rounds whose output for the block the session's ledger
        accepted, for example tiers with ``validated_in_ledger``. The Pack reads no ledger:
        without them every earlier round counts (``engine.session.recording`` passes them).
        """
        check(
            "Pack.render",
            verdict=verdict,
            decision=decision,
            output=output,
            nonce=nonce,
            vars=vars,
            context=context,
        )
        rendering = _rendering()
        inputs = rendering.PromptInputs(
            decode_output(output),
            nonce or "",
            dict(vars or {}),
            self._checked_context(context),
            accepted_rounds,
            user_context,
            tuple(reviewed),
        )
        return cast(
            "RenderedPrompt", rendering.render_prompt(self.prompts, verdict, decision, inputs)
        )


def _rendering() -> ModuleType:
    """The prompt renderer, imported when a Pack first renders a prompt."""
    # Deferred: rendering is 5 ms of imports that `rules eval` from an image does not need,
    # 4% of it (python -X importtime).
    import engine.prompts.render

    return engine.prompts.render
