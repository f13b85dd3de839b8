"""The registry of contract kinds: ``kind:`` name → the object that implements it.

Three sources, one registry: the engine's own kinds (a module each, imported by name when
first used, so a command that parses sentinel blocks never imports the JSON Schema
machinery: the json kind is 0.43 s of imports under load, markdown 0.1 s, python -X
importtime), kinds a
program or a test registers with ``register_kind``, and kinds of installed distributions
(entry point group ``rules_engine.kinds``, each naming an object that implements
``ContractKind``; read once, when a kind the engine does not know is first asked for).

``version()`` changes whenever the registered kinds do, so a cache of what was composed from
them (the root model, engine.pack.sections) knows when to compose again. The section
``contracts:`` of the format is theirs (engine.contracts.section).
"""

from __future__ import annotations

import importlib
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from engine.core.errors import EngineError, plugin_errors
from engine.core.registry import Registry

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

    from engine.contracts.kind import CompiledContract, ContractKind
    from engine.format.model import Rulepack
    from engine.format.sourcemap import KeyPath

ENTRY_POINT_GROUP = "rules_engine.kinds"

# The engine's own kinds, in the order of the format's union: name → its package, whose
# `kind` module exposes the kind as ``KIND`` and whose `model` module holds the model class.
_ENGINE_KINDS: dict[str, tuple[str, str]] = {
    "sentinel": ("engine.contracts.kinds.sentinel", "SentinelContract"),
    "markdown": ("engine.contracts.kinds.markdown", "MarkdownContract"),
    "json": ("engine.contracts.kinds.json", "JsonContract"),
    "text": ("engine.contracts.kinds.text", "TextContract"),
    "tool_call": ("engine.contracts.kinds.tool_call", "ToolCallContract"),
}


def version() -> int:
    """A number that changes whenever a kind is registered or unregistered."""
    return _kinds.version


def register_kind(kind: ContractKind) -> None:
    """Add a kind (a program or a test registers one this way; entry points do the same)."""
    _kinds.register(kind.name, kind)


def unregister_kind(name: str) -> None:
    """Remove a kind registered with ``register_kind`` (tests clean up this way)."""
    _kinds.unregister(name)


def _check_model(kind: Any) -> None:
    """The kind's model is a ``ContractModel`` declaring ``kind: Literal[<its name>]`` (the
    union is told apart by it)."""
    # Deferred: registering a kind needs the models (pydantic), compiling a pack's
    # contracts does not: 0.24 s of `rules eval` from an image (python -X importtime).
    from engine.contracts.model import ContractModel

    model = getattr(kind, "model", None)
    field = getattr(model, "model_fields", {}).get("kind")
    if (
        not (isinstance(model, type) and issubclass(model, ContractModel))
        or field is None
        or getattr(field.annotation, "__args__", None) != (kind.name,)
    ):
        raise EngineError(
            f"contract kind {kind.name!r}: its `model` must be a subclass of "
            f'engine.plugins.ContractModel with `kind: Literal["{kind.name}"]`'
        )


_kinds: Registry[ContractKind] = Registry(
    ENTRY_POINT_GROUP, "contract kind", _ENGINE_KINDS.__contains__, _check_model
)


def _accept(point: EntryPoint, kind: Any) -> None:
    """Register the kind an entry point names, unless a kind of that name is there already."""
    with plugin_errors(_kinds.what, point):
        if isinstance(kind, type):  # its methods would be called unbound, as the engine's
            raise EngineError("it names a class, not an instance of it (KIND = MyKind())")
        if point.name != getattr(kind, "name", None):
            raise EngineError(f"it names itself {getattr(kind, 'name', None)!r}")
        if point.name not in _kinds.registered and point.name not in _ENGINE_KINDS:
            register_kind(kind)


def _load_entry_points() -> None:
    _kinds.load_entry_points(_accept)


def kind_names() -> list[str]:
    """Every registered kind's name: the engine's own first, then the others by name."""
    _load_entry_points()
    return [*_ENGINE_KINDS, *sorted(_kinds.registered)]


_imported: dict[str, ContractKind] = {}
"""The engine's own kinds imported so far: every evaluation asks for its kind, and asking
the import system again costs more than the rest of a short output's reading."""


def contract_kind(name: str) -> ContractKind:
    """The kind registered as ``name``."""
    if name in _imported:
        return _imported[name]
    if name in _ENGINE_KINDS:
        module = importlib.import_module(f"{_ENGINE_KINDS[name][0]}.kind")
        kind: ContractKind = module.KIND
        _imported[name] = kind
        return kind
    if name not in _kinds.registered:
        _load_entry_points()
    if name not in _kinds.registered:
        raise EngineError(
            f"no contract kind {name!r} is registered (known: {', '.join(kind_names())})"
        )
    return _kinds.registered[name]


def kind_of(contract: Any) -> ContractKind:
    """The kind of a validated contract model (its ``kind`` field)."""
    return contract_kind(contract.kind)


def contract_models(engine_only: bool = False) -> list[type[Any]]:
    """The model of every registered kind (or of the engine's own), in ``kind_names()``
    order (the engine's own from their model modules, without importing what evaluates
    them)."""
    models: list[type[Any]] = []
    for name in _ENGINE_KINDS if engine_only else kind_names():
        if name in _ENGINE_KINDS:
            package, model_name = _ENGINE_KINDS[name]
            models.append(getattr(importlib.import_module(f"{package}.model"), model_name))
        else:
            models.append(_kinds.registered[name].model)
    return models


def resolve_contracts(pack: Rulepack) -> Rulepack:
    """The pack with each contract as its kind completes it from the pack's other contracts
    (a sentinel contract's shared ``grammar:``); the same pack when nothing changes."""
    contracts = pack.contracts
    resolved = {
        name: kind_of(contract).resolve(contract, contracts) for name, contract in contracts.items()
    }
    if all(resolved[name] is contract for name, contract in contracts.items()):
        return pack
    return pack.model_copy(update={"contracts": resolved})


def needs_nonce(contract: Any) -> bool:
    """Whether a caller must give a nonce to evaluate outputs of ``contract`` (its kind's
    ``needs_nonce``; False for a kind that does not say)."""
    return bool(getattr(kind_of(contract), "needs_nonce", False))


def pack_inputs(contract: Any, pack: Rulepack) -> Any:
    """What of the pack besides ``contract`` its kind reads to evaluate outputs, as plain
    data (None when the kind reads nothing else or does not say)."""
    method = getattr(kind_of(contract), "pack_inputs", None)
    return None if method is None else method(contract, pack)


def parser_data(contract: Any, pack: Rulepack) -> Any:
    """The plain data the contract's parser is rebuilt from (``parser_from_data``), or None
    when its kind keeps no parser in the cache."""
    method = getattr(kind_of(contract), "parser_data", None)
    return None if method is None else method(contract, pack)


def parser_from_data(kind: str, name: str, data: Any) -> Any:
    """The parser of block ``name`` (a contract of ``kind``) rebuilt from ``parser_data``.

    The engine's own kinds rebuild their parsers in their package's `parser` module, so a
    warm `rules parse` imports nothing else of the kind (the kind module, with its finding
    rules and verdicts, costs 5 ms of its 0.08 s)."""
    if kind in _ENGINE_KINDS:
        module = importlib.import_module(f"{_ENGINE_KINDS[kind][0]}.parser")
        return module.parser_from_data(name, data)
    return contract_kind(kind).parser_from_data(name, data)  # type: ignore[attr-defined]


def compile_contract(
    name: str, contract: Any, pack: Rulepack, folder_of: Callable[[KeyPath], Path]
) -> CompiledContract:
    """A contract of a validated pack, compiled by its kind."""
    return kind_of(contract).compile(name, contract, pack, folder_of)
