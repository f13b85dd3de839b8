"""Where each node of a loaded pack stands in its YAML files, by key path."""

from __future__ import annotations

from dataclasses import dataclass, field

from engine.core.errors import Position

KeyPath = tuple[str | int, ...]


@dataclass
class SourceMap:
    """Positions of the nodes of a loaded tree, by key path."""

    values: dict[KeyPath, Position] = field(default_factory=dict)
    keys: dict[KeyPath, Position] = field(default_factory=dict)
    refused: set[KeyPath] = field(default_factory=set)
    """Where a number was refused (a finding said so; the tree holds null there)."""

    def locate(self, path: KeyPath, prefer_key: bool = False) -> Position:
        """The position of ``path``, or of its nearest ancestor that has one."""
        probe = tuple(path)
        while True:
            if prefer_key and probe in self.keys:
                return self.keys[probe]
            if probe in self.values:
                return self.values[probe]
            if probe in self.keys:
                return self.keys[probe]
            if not probe:
                return Position("<unknown>")
            probe = probe[:-1]

    def file_of(self, path: KeyPath) -> str:
        return self.locate(path).file
