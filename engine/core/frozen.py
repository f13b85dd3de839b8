"""A validated model read back from plain data, without the library that validated it.

The runtime reads a loaded pack's models through their fields only (deciding, rendering,
evaluating), so a model can be written down once it is valid, as plain JSON data and the
places in it where a model stands, and read back as ``Frozen`` records: the same fields
with the same values, read-only. A command that evaluates one output starts from such a
record (engine.pack.image) instead of validating the pack's YAML again, and imports
neither YAML nor pydantic.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

Place = tuple[str | int, ...]
"""Where a value stands in the data: the keys and list indexes that lead to it."""


class Frozen:
    """A model's fields as plain values (models within it as ``Frozen`` too), read-only."""

    __slots__ = ("_fields",)

    def __init__(self, fields: dict[str, Any]) -> None:
        object.__setattr__(self, "_fields", fields)

    def __getattr__(self, name: str) -> Any:
        try:
            return self._fields[name]
        except KeyError:
            raise AttributeError(f"the model has no field {name!r}") from None

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"a frozen model is read-only (field {name!r})")

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Frozen) and self._fields == other._fields

    def __hash__(self) -> int:
        return hash(tuple(self._fields))

    def __repr__(self) -> str:
        return f"Frozen({self._fields!r})"

    def model_dump(self, mode: str = "json") -> dict[str, Any]:
        """The plain data of the fields, as the validated model's ``model_dump(mode="json")``
        gave it (models within it as plain dicts too)."""
        return {name: plain(value) for name, value in self._fields.items()}


def plain(value: Any) -> Any:
    """``value`` with every ``Frozen`` in it as the plain dict of its fields."""
    if isinstance(value, Frozen):
        return value.model_dump()
    if isinstance(value, dict):
        return {key: plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [plain(item) for item in value]
    return value


def thaw(data: Any, models: Iterable[Place]) -> Any:
    """``data`` with a ``Frozen`` at each place of ``models`` (which hold dicts of fields)."""
    places = {tuple(place) for place in models}

    def build(value: Any, place: Place) -> Any:
        if isinstance(value, dict):
            items = {key: build(item, (*place, key)) for key, item in value.items()}
            return Frozen(items) if place in places else items
        if isinstance(value, list):
            return [build(item, (*place, index)) for index, item in enumerate(value)]
        return value

    return build(data, ())
