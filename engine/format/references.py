"""The reference walker: fields of the models that refer to something carry a ``Ref`` marker
(fields.py); this finds every marked value of a pack, with its key path, for `rules check`
(semantics.py) and `rules explain`."""

from __future__ import annotations

import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, get_args, get_origin

from pydantic import BaseModel

from engine.format.fields import Ref
from engine.format.sourcemap import KeyPath


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
