"""A registry of named plugins (contract kinds, rulepack sections): those a program or a test
registers, and those the entry points of installed distributions name, read once.

The engine's own plugins are the owner's business (``taken`` tells their names apart);
``version`` changes whenever what is registered does, so a cache of what was composed from
a registry knows when to compose again. An entry point that cannot be loaded or registered
(``engine.core.plugins``) is set aside in ``broken`` with the reason, and the others are
registered: only what uses it fails (``broken_plugins``).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Generic, TypeVar

from engine.core.errors import EngineError
from engine.core.plugins import load_entry_points

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
        self.broken: dict[str, str] = {}
        """Entry point name -> why it could not be loaded or registered."""
        _REGISTRIES.append(self)

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
        self.broken = {}
        for point, plugin in load_entry_points(self.group, self.what):
            if isinstance(plugin, EngineError):
                self.broken[point.name] = str(plugin)
                continue
            try:
                accept(point, plugin)
            except EngineError as exc:  # accept names the entry point (plugin_errors)
                self.broken[point.name] = str(exc)


_REGISTRIES: list[Registry[Any]] = []


def broken_plugins(group: str | None = None) -> dict[str, str]:
    """The entry points (of ``group``, else of every registry) that could not be loaded
    or registered so far, by name: why, naming the entry point."""
    return {
        name: reason
        for registry in _REGISTRIES
        if group is None or registry.group == group
        for name, reason in registry.broken.items()
    }


def plugin_of(module: str) -> str | None:
    """The entry point (of a registry's group) whose object lives in ``module``'s
    top-level package, described as load errors describe it; None when none does."""
    from importlib.metadata import entry_points  # only when a plugin misbehaved

    top = module.split(".")[0]
    for registry in _REGISTRIES:
        for point in entry_points(group=registry.group):
            if point.value.split(":")[0].split(".")[0] == top:
                return f"the {registry.what} {point.name!r} ({point.value})"
    return None
