"""Loading a pack file with everything it `extends` (local, builtin, installed and git
packs), merged into one tree with the positions of every file.

Problems are collected as findings rather than raised, so that `rules check` can report all
of them at once.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from engine.core.errors import Position
from engine.core.files import path_problem
from engine.core.resources import builtin_pack_names, data_dir
from engine.format.findings import Finding
from engine.format.gitpacks import (
    GIT_HASH_MISMATCH,
    GIT_LOCK_INVALID,
    GIT_UNLOCKED,
    GitPackError,
    checkout_root,
    is_git_ref,
    resolve_git_pack,
)
from engine.format.loader_rules import (
    EXTENDS_ABSOLUTE,
    EXTENDS_CYCLE,
    EXTENDS_NOT_FOUND,
    EXTENDS_OUTSIDE_WORKSPACE,
    PACK_EMPTY,
    PACK_NOT_MAPPING,
)
from engine.format.locate import (
    BUILTIN_PREFIX,
    PACKAGE_PREFIX,
    bare_name,
    display_path,
    resolve_pack_file,
)
from engine.format.packfolder import PACK_TOO_LARGE, PATH_ESCAPE
from engine.format.sourcemap import KeyPath, SourceMap
from engine.format.yamldoc import read_yaml


@dataclass
class PackTree:
    """A pack's YAML after `extends` is resolved: one merged tree, positions from every file."""

    root_file: Path
    data: dict[str, Any]
    source: SourceMap
    findings: list[Finding]
    files: list[Path] = field(default_factory=list)


def merge_trees(base: Any, over: Any) -> Any:
    """Maps merge deeply, a later pack wins, lists replace, an explicit null removes a key."""
    if isinstance(base, dict) and isinstance(over, dict):
        out = dict(base)
        for key, value in over.items():
            if value is None:
                out.pop(key, None)
            elif key in out:
                out[key] = merge_trees(out[key], value)
            else:
                out[key] = value
        return out
    return over


def _merge_sources(data: Any, base: SourceMap, over: SourceMap) -> SourceMap:
    merged = SourceMap(refused=base.refused | over.refused)

    def walk(node: Any, path: KeyPath) -> None:
        for table, target in ((over.values, merged.values), (base.values, merged.values)):
            if path in table:
                target[path] = table[path]
                break
        for table in (over.keys, base.keys):
            if path in table:
                merged.keys[path] = table[path]
                break
        if isinstance(node, dict):
            for key, value in node.items():
                walk(value, (*path, key))
        elif isinstance(node, list):
            for index, value in enumerate(node):
                walk(value, (*path, index))

    walk(data, ())
    return merged


def load_pack_tree(pack_file: Path, locked: bool | None = None) -> PackTree:
    """Load ``pack_file`` and everything it extends, merged, with all findings. ``locked``:
    every git reference needs a rules.lock entry (default: when CI=true).

    Each pack of the `extends` graph is read and merged once, however many paths reach it
    (a diamond of 12 levels would otherwise load 2**12 packs)."""
    return _Loading(locked).pack(pack_file.resolve(), [], pack_file)


def _unique(items: list[Any]) -> list[Any]:
    """``items`` without repeats, in first-seen order (a pack reached twice adds nothing)."""
    return list(dict.fromkeys(items))


_WORKSPACE_HINT = (
    "extend a `builtin:` pack, or a pack.yaml / .yaml file inside the workspace (the "
    "nearest folder with .git above the pack, else the folder above the pack's own)"
)


def workspace_root(pack_file: Path) -> Path:
    """The folder a pack's `extends` may reach: the nearest folder holding ``.git`` above
    the pack file, else the folder above the pack's own (so sibling packs can share)."""
    folder = pack_file.resolve().parent
    for candidate in (folder, *folder.parents):
        if (candidate / ".git").exists():
            return candidate
    return folder.parent


def _outside_workspace(ref: str, declaring: Path, stack: list[Path]) -> str | None:
    """Why ``ref`` may not be opened (not a pack file, outside the workspace), or None.
    Decided from the path alone: nothing outside is opened or read to decide it."""
    top = stack[0] if stack else declaring
    builtin = data_dir("rules").resolve()
    if declaring.resolve().is_relative_to(builtin):
        return None  # builtin packs extend each other
    target = (declaring.parent / ref).resolve()
    if not target.exists():
        return None  # reported as not found
    if target.suffix not in (".yaml", ".yml") and not target.is_dir():
        return f"extends {ref!r} is not a pack (a pack.yaml, a folder holding one, or .yaml)"
    root = checkout_root(declaring) or workspace_root(top)
    if not target.is_relative_to(root):
        return f"extends {ref!r} is outside the workspace {root}"
    return None


@dataclass
class _Loading:
    """One load of an `extends` graph: its git lock mode and the packs loaded so far."""

    locked: bool | None
    loaded: dict[Path, PackTree] = field(default_factory=dict)

    def pack(self, pack_file: Path, stack: list[Path], shown: Path) -> PackTree:
        doc = read_yaml(shown if not stack else pack_file)
        findings = list(doc.findings)
        data = doc.data
        if doc.data is None and not findings:
            findings.append(
                PACK_EMPTY.at(
                    "pack file is empty",
                    Position(display_path(shown)),
                    "start from `rules init` or add `rulepack: NAME`",
                )
            )
        if not isinstance(data, dict):
            if data is not None:
                findings.append(
                    PACK_NOT_MAPPING.at(
                        "a pack file must be a YAML mapping",
                        doc.source.locate(()),
                        "write `rulepack: NAME` and the sections of the pack as top-level keys",
                    )
                )
            return PackTree(pack_file, {}, doc.source, findings, [pack_file])

        extends = data.get("extends")
        tree: Any = None
        source = SourceMap()
        files = [pack_file]
        if isinstance(extends, list):
            for index, ref in enumerate(extends):
                if not isinstance(ref, str):
                    continue  # the model check reports the wrong type
                where = doc.source.locate(("extends", index))
                base = self.extended(ref, pack_file, [*stack, pack_file], where, findings)
                if base is None:
                    continue
                files.extend(base.files)
                findings.extend(base.findings)
                base_data = {k: v for k, v in base.data.items() if k != "extends"}
                tree = base_data if tree is None else merge_trees(tree, base_data)
                source = _merge_sources(tree, source, base.source)
        merged = data if tree is None else merge_trees(tree, data)
        merged_source = _merge_sources(merged, source, doc.source)
        return PackTree(pack_file, merged, merged_source, _unique(findings), _unique(files))

    def extended(
        self, ref: str, declaring: Path, stack: list[Path], where: Position, findings: list[Finding]
    ) -> PackTree | None:
        if is_git_ref(ref):
            try:
                fetched = resolve_git_pack(ref, stack[0] if stack else declaring, self.locked)
            except GitPackError as exc:
                hint = {
                    GIT_UNLOCKED: "run `rules lock` beside the top pack and commit rules.lock",
                    GIT_HASH_MISMATCH: "run `rules lock --upgrade` if the change is intended",
                    GIT_LOCK_INVALID: "run `rules lock --upgrade` to write rules.lock afresh",
                    PATH_ESCAPE: "a git pack holds its files: remove the link from the repository",
                    PACK_TOO_LARGE: "keep only the pack's own files in its folder",
                }.get(exc.rule, "write git+URL@REV#path/to/pack; the path stays in the repository")
                findings.append(exc.rule.at(str(exc), where, hint))
                return None
            return self.checked(fetched.resolve(), stack, where, findings)
        unusable = path_problem(ref)
        if unusable is not None:
            findings.append(
                EXTENDS_NOT_FOUND.at(
                    f"extends {ref[:200]!r} is no usable pack name or path: {unusable}",
                    where,
                    "use builtin:NAME, a pack folder or a pack file",
                )
            )
            return None
        installed = ref.startswith(PACKAGE_PREFIX) or (
            bare_name(ref) and not (declaring.parent / ref).exists() and not Path(ref).suffix
        )
        if not ref.startswith(BUILTIN_PREFIX) and not installed and Path(ref).is_absolute():
            findings.append(
                EXTENDS_ABSOLUTE.at(
                    f"extends {ref!r} is an absolute path",
                    where,
                    "write the path relative to this pack file",
                )
            )
            return None
        if not ref.startswith(BUILTIN_PREFIX) and not installed:
            outside = _outside_workspace(ref, declaring, stack)
            if outside is not None:
                findings.append(EXTENDS_OUTSIDE_WORKSPACE.at(outside, where, _WORKSPACE_HINT))
                return None
        found = resolve_pack_file(ref, declaring.parent)
        if found is None:
            known = ", ".join(BUILTIN_PREFIX + n for n in builtin_pack_names())
            hint = (
                f"builtin packs are: {known}"
                if ref.startswith(BUILTIN_PREFIX)
                else "`rules packs` lists the installed packs"
                if installed
                else "give a folder holding pack.yaml or a YAML file, relative to this file"
            )
            findings.append(EXTENDS_NOT_FOUND.at(f"extends {ref!r}: no such pack", where, hint))
            return None
        return self.checked(found.resolve(), stack, where, findings)

    def checked(
        self, target: Path, stack: list[Path], where: Position, findings: list[Finding]
    ) -> PackTree | None:
        """Load an extended pack file unless it closes a cycle (a finding then); a pack loaded
        before in this load is reused."""
        if target in stack:
            cycle = [*stack[stack.index(target) :], target]
            chain = " -> ".join(display_path(p) for p in cycle)
            findings.append(
                EXTENDS_CYCLE.at(
                    f"extends cycle: {chain}",
                    where,
                    "remove one of the `extends` entries in this cycle",
                )
            )
            return None
        if target not in self.loaded:
            self.loaded[target] = self.pack(target, stack, target)
        return self.loaded[target]
