"""What every contract kind provides: its model, checks of it, compiling it, evaluating outputs.

A kind is an object implementing ``ContractKind``, registered by its ``kind:`` name
(registry.py): the engine's own are packages of this one, others come from programs
(``register_kind``) or installed distributions (entry point group ``rules_engine.kinds``).
Nothing outside this package asks which kind a contract is: callers hold a
``CompiledContract``.
"""

from __future__ import annotations

from types import MappingProxyType
from typing import TYPE_CHECKING, Any, NamedTuple, Protocol

from engine.core.errors import EvaluationError, no_parser_error
from engine.core.results import Failure
from engine.core.textio import output_problem
from engine.core.verdict import verdict_from_checks

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping
    from pathlib import Path

    from engine.contracts.model import ContractModel
    from engine.core.results import ParseResult
    from engine.core.verdict import Verdict
    from engine.format.model import Rulepack
    from engine.format.semantics import PackChecker
    from engine.format.sourcemap import KeyPath


class EvaluationInput(NamedTuple):
    """One output to evaluate and what it is evaluated with (a named tuple: built for every
    output evaluated, and cheaper to build than a frozen dataclass).

    ``text`` None means the output file ``path`` does not exist; ``context`` is already
    checked against the keys the pack declares.
    """

    text: str | None
    nonce: str | None = None
    params: Mapping[str, str] = MappingProxyType({})
    context: Mapping[str, Any] = MappingProxyType({})
    path: str | None = None
    shared: dict[str, Any] | None = None
    """Work on this same output (text, nonce, params) that contracts of other packs may
    reuse, keyed by everything it depends on (a backtest evaluates a record under two
    packs); None: nothing is shared."""


class CompiledContract(Protocol):
    """One contract of a loaded pack, ready to evaluate outputs (built once, at load).

    It may also have, read where it is there: ``generated_contract_text``, the contract
    text prompts show when the pack names no ``contract_text`` file (a tool-call contract
    writes its tools and their schemas); ``unknown_tool(name)``, whether a call naming
    ``name`` calls no tool of a tool-call contract (decidable on a streamed prefix).
    """

    @property
    def name(self) -> str: ...

    @property
    def param_names(self) -> frozenset[str]:
        """Names of the block's own parameters (values given with ``--var``)."""
        ...

    @property
    def id_patterns(self) -> Mapping[str, str]:
        """Kinds of ids an output of this contract references (name → pattern)."""
        ...

    def parse(self, text: str, nonce: str | None, params: Mapping[str, str]) -> ParseResult:
        """A deterministic parse; ``EngineError`` if the kind has no parser."""
        ...

    def evaluate(self, output: EvaluationInput) -> Verdict:
        """The verdict on one output; never raises for any text."""
        ...

    def failure_tier(self, failure_type: str) -> str:
        """Which tier of validation a failure of this type belongs to."""
        ...

    # Optional, read by ``prefix_reader`` when the contract has it:
    # ``prefix_reader(output) -> PrefixReader | None``, a reader of a streamed output of
    # this contract (``output.text`` is None: the text arrives through ``feed``). Without
    # it nothing is decidable on a prefix and a stream is evaluated whole.


class PrefixReader(Protocol):
    """A streamed output read as it arrives: what its prefix already decides."""

    def feed(self, text: str) -> Failure | None:
        """The failure the output has whatever follows ``text`` (the whole output so far,
        which only grows from one call to the next), or None while nothing is decided.
        Only a definite failure may be given: the stream is closed on it."""
        ...


def prefix_reader(contract: CompiledContract, output: EvaluationInput) -> PrefixReader | None:
    """The contract's reader of a streamed output with these inputs, or None: by default
    a kind decides nothing on a prefix (it may define ``prefix_reader``)."""
    make: Callable[[EvaluationInput], PrefixReader | None] | None = getattr(
        contract, "prefix_reader", None
    )
    return None if make is None else make(output)


class ContractKind(Protocol):
    """A kind of contract (``kind:`` in a pack): its model, its checks and its compiler.

    A kind may also say, by attributes the engine reads when they are there:

    * ``needs_nonce = True``: a caller must give a nonce to evaluate its outputs (its
      delimiters carry one); `rules eval` and the server then ask for it.
    * ``pack_inputs(contract, pack)``: what of the pack besides the contract evaluating
      its outputs reads (as plain data), so a backtest knows when two packs' contracts
      give the same verdicts.
    * ``parser_data(contract, pack)`` and ``parser_from_data(name, data)``: the plain JSON
      data of a contract's deterministic parser, and the parser rebuilt from it without
      pydantic (an object with ``parse``, ``param_names`` and ``required_params``). A pack
      whose kinds say so is parsed by a warm `rules parse` from the compiled-pack cache.
    """

    name: str

    @property
    def model(self) -> type[ContractModel]:
        """The pydantic model of its contracts: a ``ContractModel`` (the keys every contract
        has) with ``kind: Literal["<name>"]``."""
        ...

    def resolve(self, contract: Any, contracts: Mapping[str, Any]) -> Any:
        """The contract completed from the pack's other contracts (e.g. a grammar it shares),
        before it is checked and compiled; the same object when there is nothing to do."""
        ...

    def default_failures(self, contract: Any, pack: Rulepack) -> list[tuple[str, str]]:
        """(setting, failure type) the contract reports through settings left at default."""
        ...

    def check(self, name: str, contract: Any, checker: PackChecker) -> None:
        """Semantic checks of one contract's model; findings go to ``checker``."""
        ...

    def compile(
        self, name: str, contract: Any, pack: Rulepack, folder_of: Callable[[KeyPath], Path]
    ) -> CompiledContract:
        """The contract ready to evaluate outputs; pack files it names are read relative to
        ``folder_of(key path)``, the folder of the pack file that declared them."""
        ...


class WithoutParser:
    """What a compiled contract shares whose kind has no deterministic parser (``parse`` is
    an error); its outputs reference no kinds of ids unless it says otherwise."""

    name: str
    contract: ContractModel

    @property
    def id_patterns(self) -> Mapping[str, str]:
        return {}

    def parse(self, text: str, nonce: str | None, params: Mapping[str, str]) -> ParseResult:
        raise no_parser_error(self.name, self.contract.kind)


class ChecksText(WithoutParser):
    """What a compiled contract shares that checks the output's text: an output no check
    can read (``readable_text``: empty, not text, ...) is its verdict before
    ``evaluate_text`` sees it."""

    severities: Mapping[str, str]

    def evaluate(self, output: EvaluationInput) -> Verdict:
        text = readable_text(self.name, output, self.severities)
        if not isinstance(text, str):
            return text
        return self.evaluate_text(text)

    def evaluate_text(self, text: str) -> Verdict:
        """The verdict on the output's readable ``text``."""
        raise NotImplementedError


class StandaloneKind:
    """What a kind shares whose contracts stand alone (take nothing from other contracts)
    and report failure types only through their own failure-type settings."""

    def resolve(self, contract: Any, contracts: Mapping[str, Any]) -> Any:
        return contract

    def default_failures(self, contract: Any, pack: Rulepack) -> list[tuple[str, str]]:
        # Deferred: checking needs the models (pydantic), compiling and evaluating do not:
        # 0.24 s of `rules eval` from a pack's image (python -X importtime).
        from engine.contracts.model import declared_default_failures

        return declared_default_failures(contract)


def readable_text(
    name: str, output: EvaluationInput, severities: Mapping[str, str]
) -> str | Verdict:
    """The output's text, or the verdict of an output no check can read (``output_problem``:
    empty, not text, ...); EvaluationError when its file does not exist."""
    if output.text is None:
        raise EvaluationError(f"{output.path}: no such file")
    problem = output_problem(output.text)
    if problem is None:
        return output.text
    return verdict_from_checks(name, [Failure(*problem)], [], None, dict(severities))
