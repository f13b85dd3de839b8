"""A registry of named plugins (contract kinds, rulepack sections): those a program or a test
registers, and those the entry points of installed distributions name, read once.

The engine's own plugins are the owner's business (``taken`` tells their names apart);
``version`` changes whenever what is registered does, so a cache of what was composed from
a registry knows when to compose again.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from engine.core.errors import EngineError, load_plugins

if TYPE_CHECKING:
    from importlib.metadata import EntryPoint

T = TypeVar("T")


class Registry(Generic[T]):
    """Name -> plugin, for the plugins of entry point group ``group`` (each a ``what``)."""

    def __init__(
        self,
        group: str,
        what: str,
        taken: Callable[[str], bool],
        check: Callable[[T], None] | None = None,
    ) -> None:
        self.group = group
        self.what = what
        self.registered: dict[str, T] = {}
        self.loaded_entry_points = False
        self.version = 0
        self._taken = taken  # a name of the engine's own
        self._check = check  # raises when a plugin is not fit to register

    def register(self, name: str, plugin: T) -> None:
        """Add ``plugin`` as ``name``; an EngineError when the name is taken or ``check``
        refuses it."""
        if name in self.registered or self._taken(name):
            raise EngineError(f"a {self.what} {name!r} is already registered")
        if self._check is not None:
            self._check(plugin)
        self.registered[name] = plugin
        self.version += 1

    def unregister(self, name: str) -> None:
        """Remove a plugin added with ``register`` (tests clean up this way)."""
        if self.registered.pop(name, None) is not None:
            self.version += 1

    def load_entry_points(self, accept: Callable[[EntryPoint, Any], None]) -> None:
        """The first time only: each entry point of the group, with the object it names,
        handed to ``accept`` (which registers it or not)."""
        if self.loaded_entry_points:
            return
        self.loaded_entry_points = True
        for point, plugin in load_plugins(self.group, self.what):
            accept(point, plugin)
