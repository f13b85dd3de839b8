"""The context a pack reads (from --context FILE, --var KEY=VALUE or the Python API),
checked against the keys and types the pack declares."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from engine.core.errors import ContextError
from engine.core.numbers import MAX_INT_CHARS, first_out_of_range
from engine.core.suggest import did_you_mean

if TYPE_CHECKING:
    from engine.core.errors import Position
    from engine.format.vocabulary import ContextKey
    from engine.format.yamldoc import Document


class ContextFile(dict[str, Any]):
    """The mapping of a --context file, knowing where each key's value is written, so an
    error about a key names the file and line."""

    def __init__(self, data: Mapping[str, Any], positions: Mapping[str, Position]) -> None:
        super().__init__(data)
        self.positions = dict(positions)

    @classmethod
    def of(cls, document: Document) -> ContextFile:
        data = document.data
        assert isinstance(data, dict)
        return cls(data, {key: document.source.locate((key,)) for key in data})


def _placed(given: Mapping[str, Any] | None, name: str, error: ContextError) -> ContextError:
    """``error`` about key ``name``, prefixed with where ``given`` (a ContextFile) has it."""
    where = given.positions.get(name) if isinstance(given, ContextFile) else None
    return ContextError(f"{where}: {error}") if where is not None else error


_PYTHON_TYPES: dict[str, tuple[type, ...]] = {
    "string": (str,),
    "path": (str,),
    "int": (int,),
    "number": (int, float),
    "bool": (bool,),
    "list": (list,),
    "map": (dict,),
}


def _coerce(name: str, spec: ContextKey, raw: str) -> Any:
    """A --var string as the declared type."""
    if spec.type in ("string", "path", "any"):
        return raw
    if spec.type == "int":
        wrong = ContextError(f"context key {name!r} must be an int, got {raw[:40]!r}")
        if len(raw) > MAX_INT_CHARS:  # longer than any 64-bit integer: refused unread
            raise wrong
        try:
            return int(raw)
        except ValueError:
            raise wrong from None
    if spec.type == "number":
        try:
            return float(raw)
        except ValueError:
            raise ContextError(f"context key {name!r} must be a number, got {raw[:40]!r}") from None
    if spec.type == "bool":
        if raw.lower() in ("true", "false"):
            return raw.lower() == "true"
        raise ContextError(f"context key {name!r} must be true or false, got {raw!r}")
    if spec.type == "list":
        return [part.strip() for part in raw.split(",") if part.strip()]
    raise ContextError(f"context key {name!r} is a {spec.type}; give it in a --context file")


def _a(kind: str) -> str:
    return f"an {kind}" if kind[0] in "aeiou" else f"a {kind}"


def _check_numbers(name: str, value: Any) -> None:
    """Refuse a NaN, an infinity or an integer beyond 64 bits anywhere in ``value``."""
    found = first_out_of_range(value)
    if found is not None:
        path, why = found
        where = name + "".join(f"[{part!r}]" for part in path)
        raise ContextError(f"context key {where}: {why}")


def _check_type(name: str, spec: ContextKey, value: Any) -> None:
    items: Any = value
    if spec.type == "any" or value is None:
        return
    expected = _PYTHON_TYPES[spec.type]
    if not isinstance(value, expected) or (
        spec.type in ("int", "number") and isinstance(value, bool)
    ):
        raise ContextError(
            f"context key {name!r} must be {_a(spec.type)}, got {type(value).__name__}"
        )
    if spec.type == "list" and spec.items not in (None, "any"):
        item_types = _PYTHON_TYPES[spec.items] if spec.items != "map" else (dict,)
        for index, item in enumerate(items):
            if not isinstance(item, item_types):
                raise ContextError(
                    f"context key {name!r}[{index}] must be "
                    f"{_a(spec.items)}, got {type(item).__name__}"
                )


def build_context(
    declared: Mapping[str, ContextKey],
    given: Mapping[str, Any] | None = None,
    strings: Mapping[str, str] | None = None,
    environ: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """Merge ``given`` (typed) and ``strings`` (--var, coerced), then check them all.

    A key with no value given takes the environment variable its declaration names in
    ``env:`` (when set; ``environ`` defaults to the process environment), else its default.
    Only variables a pack declares are ever read.
    """
    context: dict[str, Any] = {}
    if not declared and not given and not strings:
        return context
    typed = [(name, value, False) for name, value in (given or {}).items()]
    typed += [(name, value, True) for name, value in (strings or {}).items()]
    for name, value, from_string in typed:
        spec = declared.get(name)
        if spec is None:
            hint = did_you_mean(
                name, declared, f"the pack reads: {', '.join(declared) or 'no context keys'}"
            )
            error = ContextError(f"unknown context key {name!r} ({hint})")
            raise (error if from_string else _placed(given, name, error))
        context[name] = _coerce(name, spec, value) if from_string else value
    for name, spec in declared.items():
        if name not in context and spec.env is not None:
            variables = os.environ if environ is None else environ
            if spec.env in variables:
                context[name] = _coerce(name, spec, variables[spec.env])
        if name not in context:
            if spec.required:
                raise ContextError(
                    f"context key {name!r} is required ({spec.description or spec.type})"
                )
            if spec.default is not None:
                context[name] = spec.default
        if name in context:
            try:
                _check_numbers(name, context[name])
                _check_type(name, spec, context[name])
            except ContextError as exc:
                raise (exc if name in (strings or {}) else _placed(given, name, exc)) from None
    return context
