"""The packs a server serves: loaded and checked at start, reloaded all at once.

A ``PackSet`` is immutable; reloading builds a new one and swaps it in only when every pack
loads cleanly, so a request sees one revision of every pack from start to end and a pack
that now fails its check leaves the running revision serving.
"""

from __future__ import annotations

import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from engine.core.errors import EngineError, PackError
from engine.core.textio import MAX_OUTPUT_BYTES
from engine.format.findings import Finding
from engine.pack.compiled import Pack
from engine.pack.loaded import load_pack
from engine.report.json import finding
from engine.report.text import finding_line


class PackLoadFailed(Exception):
    """One or more packs do not load: each reference with its findings."""

    def __init__(self, failures: Sequence[tuple[str, str, Sequence[Finding]]]) -> None:
        super().__init__("; ".join(f"{ref}: {message}" for ref, message, _ in failures))
        self.failures = list(failures)

    def to_json(self) -> list[dict[str, Any]]:
        return [
            {"pack": ref, "message": message, "findings": [finding(f) for f in findings]}
            for ref, message, findings in self.failures
        ]

    def text(self) -> str:
        """The findings as `rules check` prints them, one a line."""
        lines = []
        for ref, message, findings in self.failures:
            if not any(f.level == "error" for f in findings):
                lines.append(f"{ref}: {message}")
            lines += [finding_line(f) for f in findings]
        return "\n".join(lines)


@dataclass(frozen=True)
class PackSet:
    """Packs by name, each with the revision it was loaded at."""

    packs: Mapping[str, Pack]
    refs: tuple[str, ...]

    def get(self, name: str) -> Pack | None:
        return self.packs.get(name)

    def body_limit(self) -> int:
        """The largest request body taken: twice the largest output a served pack reads
        (``limits.max_output_bytes``, else the engine's default) for JSON's escapes, plus
        1 MiB for the other fields."""
        largest = max(
            (p.model.limits.max_output_bytes or MAX_OUTPUT_BYTES for p in self.packs.values()),
            default=MAX_OUTPUT_BYTES,
        )
        return 2 * largest + (1 << 20)


def load_pack_set(refs: Sequence[str], locked: bool | None = None) -> PackSet:
    """Load and check every pack of ``refs``; ``PackLoadFailed`` naming each one that fails
    (or two that share a name)."""
    packs: dict[str, Pack] = {}
    failures: list[tuple[str, str, Sequence[Finding]]] = []
    for ref in refs:
        try:
            pack = load_pack(ref, locked)
        except PackError as exc:
            findings = [f for f in exc.findings if isinstance(f, Finding)]
            failures.append((ref, str(exc), findings))
            continue
        except EngineError as exc:
            failures.append((ref, str(exc), []))
            continue
        if pack.name in packs:
            failures.append((ref, f"a second pack named {pack.name!r} (one name, one pack)", []))
            continue
        _ = pack.revision  # the files as they were loaded, not as they are on first use
        packs[pack.name] = pack
    if failures:
        raise PackLoadFailed(failures)
    return PackSet(packs, tuple(refs))


class LivePacks:
    """The pack set being served, swapped whole by ``reload``."""

    def __init__(self, current: PackSet, locked: bool | None = None) -> None:
        self._current = current
        self._locked = locked
        self._reloading = threading.Lock()

    @property
    def current(self) -> PackSet:
        return self._current

    def reload(self) -> PackSet:
        """Load every pack again; swap the new set in when all load (``PackLoadFailed``
        otherwise, and the old set keeps serving)."""
        with self._reloading:
            fresh = load_pack_set(self._current.refs, self._locked)
            self._current = fresh
            return fresh
