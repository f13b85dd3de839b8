"""Validating a loaded tree against the format models, with findings placed in the source.

Pydantic reports errors by location inside the models; those locations are mapped back to
key paths of the YAML tree (tags of discriminated unions and union member names are not
keys, so they are skipped) and from there to file:line:column. To keep checking the rest of
a broken pack, the offending keys are pruned and validation is repeated; only the first
round's errors are reported, the later rounds only serve to obtain a model.
"""

from __future__ import annotations

import copy
import re
import types
import typing
from typing import Any, Union, get_args, get_origin

from pydantic import BaseModel, ValidationError

from engine.core.errors import Position
from engine.core.suggest import did_you_mean
from engine.format.findings import Finding, FindingRule
from engine.format.model import Rulepack
from engine.format.sourcemap import KeyPath, SourceMap

UNKNOWN_KEY = FindingRule(
    "unknown-key",
    "A key the format does not have here.",
    "Fix the spelling (the message suggests the closest key) or remove it.",
)

MISSING_KEY = FindingRule(
    "missing-key",
    "A required key is missing.",
    "Add the key (see `rules schema`).",
)

INVALID_VALUE = FindingRule(
    "invalid-value",
    "A value of the wrong type or form.",
    "See `rules schema` for what the key accepts.",
)

OUT_OF_RANGE = FindingRule(
    "out-of-range",
    "A number outside its allowed range.",
    "Use a value inside the range the message gives.",
)

UNKNOWN_KIND = FindingRule(
    "unknown-kind",
    "A contract `kind` the engine does not know.",
    "Use sentinel, markdown, json or text.",
)

MAX_PRUNE_ROUNDS = 100

_RANGE_ERRORS = {
    "greater_than",
    "greater_than_equal",
    "less_than",
    "less_than_equal",
    "too_short",
    "too_long",
    "string_too_short",
    "string_too_long",
}


def data_path(data: Any, loc: tuple[int | str, ...]) -> tuple[KeyPath, str | None]:
    """Map a pydantic ``loc`` to a key path of ``data``, and the key it names but lacks."""
    path: list[str | int] = []
    node = data
    missing: str | None = None
    for element in loc:
        if isinstance(node, dict) and isinstance(element, str) and element in node:
            path.append(element)
            node = node[element]
        elif isinstance(node, list) and isinstance(element, int) and 0 <= element < len(node):
            path.append(element)
            node = node[element]
        elif isinstance(node, dict) and isinstance(element, str):
            missing = element
    return tuple(path), missing


def _unwrap(annotation: Any) -> list[Any]:
    """The concrete types an annotation may stand for (Annotated and unions opened)."""
    origin = get_origin(annotation)
    if origin is typing.Annotated:
        return _unwrap(get_args(annotation)[0])
    if origin is Union or origin is types.UnionType:
        out: list[Any] = []
        for arg in get_args(annotation):
            out.extend(_unwrap(arg))
        return out
    return [annotation]


def model_at(root: type[BaseModel], data: Any, path: KeyPath) -> type[BaseModel] | None:
    """The model class that describes the mapping at ``path`` (for "allowed keys" hints)."""
    candidates: list[Any] = [root]
    node = data
    for element in path:
        next_candidates: list[Any] = []
        for candidate in candidates:
            if isinstance(candidate, type) and issubclass(candidate, BaseModel):
                field = candidate.model_fields.get(str(element))
                if field is not None:
                    next_candidates.extend(_unwrap(field.annotation))
            elif get_origin(candidate) in (dict, list):
                next_candidates.extend(_unwrap(get_args(candidate)[-1]))
        if isinstance(node, dict):
            node = node.get(element)
        elif isinstance(node, list) and isinstance(element, int) and element < len(node):
            node = node[element]
        else:
            node = None
        candidates = _pick(next_candidates, node)
    for candidate in candidates:
        if isinstance(candidate, type) and issubclass(candidate, BaseModel):
            return candidate
    return None


def _pick(candidates: list[Any], node: Any) -> list[Any]:
    """Among union members, keep the model whose discriminator value the data names."""
    models = [c for c in candidates if isinstance(c, type) and issubclass(c, BaseModel)]
    if len(models) <= 1 or not isinstance(node, dict):
        return candidates
    for tag in ("kind", "check"):
        chosen = [
            m
            for m in models
            if tag in m.model_fields and node.get(tag) in get_args(m.model_fields[tag].annotation)
        ]
        if chosen:
            return chosen
    return candidates


def _label(path: KeyPath) -> str:
    parts = []
    for element in path:
        parts.append(f"[{element}]" if isinstance(element, int) else f".{element}")
    return "".join(parts).lstrip(".") or "the pack"


def _finding_for(
    root: type[BaseModel], error: Any, data: Any, source: SourceMap
) -> tuple[KeyPath, Finding]:
    kind = error["type"]
    path, missing = data_path(data, tuple(error["loc"]))
    where = _label(path)
    if kind == "extra_forbidden":
        key = str(path[-1]) if path else "?"
        model = model_at(root, data, path[:-1])
        allowed = sorted(model.model_fields) if model else []
        hint = did_you_mean(
            key, allowed, f"allowed keys here: {', '.join(allowed)}" if allowed else "remove it"
        )
        parent = _label(path[:-1])
        return path, UNKNOWN_KEY.at(
            f"unknown key {key!r} in {parent}",
            source.locate(path, prefer_key=True),
            hint,
        )
    if kind == "missing":
        return path, MISSING_KEY.at(
            f"{where}: missing required key {missing!r}",
            source.locate(path, prefer_key=True),
            f"add `{missing}:`",
        )
    message = str(error["msg"]).removeprefix("Value error, ")
    if kind == "union_tag_invalid":
        return path, _unknown_kind(error, where, source.locate(path, prefer_key=False))
    if kind == "union_tag_not_found":
        rule = UNKNOWN_KIND
    elif kind in _RANGE_ERRORS:
        rule = OUT_OF_RANGE
    else:
        rule = INVALID_VALUE
    hint = "see `rules schema` for what this key accepts"
    return path, rule.at(f"{where}: {message}", source.locate(path, prefer_key=False), hint)


def _unknown_kind(error: Any, where: str, position: Position) -> Finding:
    """``unknown contract kind 'jsn' (did you mean 'json'?)``, naming the kinds there are."""
    context = error.get("ctx") or {}
    tag = str(context.get("tag", ""))
    kinds = re.findall(r"'([^']*)'", str(context.get("expected_tags", "")))
    listed = f"the kinds are: {', '.join(kinds)}"
    return UNKNOWN_KIND.at(
        f"{where}: unknown contract kind {tag!r} ({did_you_mean(tag, kinds, listed)})",
        position,
        f"use one of: {', '.join(kinds)}",
    )


def _collapse(entries: list[tuple[KeyPath, str, Finding]]) -> list[Finding]:
    """Keep the most specific error of a cascade: drop one whose place holds a deeper one."""
    kept: list[Finding] = []
    seen: set[tuple[KeyPath, str]] = set()
    for path, kind, finding in entries:
        deeper = any(
            other[: len(path)] == path and len(other) > len(path)
            for other, other_kind, _ in entries
            if other_kind not in ("missing",)
        )
        if deeper and kind not in ("extra_forbidden", "missing"):
            continue
        if (path, finding.message) in seen:
            continue
        seen.add((path, finding.message))
        kept.append(finding)
    return kept


def _prune(data: Any, path: KeyPath) -> bool:
    """Remove what an error points at (up to the first list above it), keeping the rest."""
    cut: list[str | int] = []
    for element in path:
        if isinstance(element, int):
            break
        cut.append(element)
    if not cut:
        return False
    node = data
    for element in cut[:-1]:
        if not isinstance(node, dict) or element not in node:
            return False
        node = node[element]
    if isinstance(node, dict) and cut[-1] in node:
        del node[cut[-1]]
        return True
    return False


def validate_tree(
    data: Any, source: SourceMap, root: type[Rulepack]
) -> tuple[Rulepack | None, list[Finding]]:
    """Validate a pack tree against the composed root model; return the model (of the pruned
    tree if needed) and findings."""
    findings: list[Finding] = []
    work = copy.deepcopy(data)
    for round_number in range(MAX_PRUNE_ROUNDS):
        try:
            return root.model_validate(work), findings
        except ValidationError as exc:
            errors = exc.errors(include_url=False)
            if round_number == 0:
                entries = []
                for error in errors:
                    path, finding = _finding_for(root, error, work, source)
                    if path in source.refused:
                        continue  # the loader's finding says why this number is not there
                    entries.append((path, str(error["type"]), finding))
                findings.extend(_collapse(entries))
            paths = [data_path(work, tuple(error["loc"]))[0] for error in errors]
            pruned = False
            for path in paths:
                pruned = _prune(work, path) or pruned
            if not pruned:
                return None, findings
    return None, findings
