"""Values by name built the first time each is asked for, once: what a process that uses
one or two of a pack's templates or contracts should not build all of."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping
from typing import TypeVar

V = TypeVar("V")


class BuiltOnUse(Mapping[str, V]):
    """The names are known up front; ``build(name)`` makes a value on its first use (an
    error it raises is raised again on the next use: nothing half-built is kept)."""

    def __init__(self, names: Iterable[str], build: Callable[[str], V]) -> None:
        self._names = tuple(names)
        self._build = build
        self._built: dict[str, V] = {}

    def __getitem__(self, name: str) -> V:
        value = self._built.get(name)
        if value is None:
            if name not in self._names:
                raise KeyError(name)
            value = self._built[name] = self._build(name)
        return value

    def build_all(self) -> None:
        """Build every value now (a process that uses many)."""
        for name in self._names:
            self[name]

    def __iter__(self) -> Iterator[str]:
        return iter(self._names)

    def __len__(self) -> int:
        return len(self._names)
