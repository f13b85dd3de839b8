"""The finding rules of reading a pack: its YAML (loader.py) and the packs it extends."""

from __future__ import annotations

from engine.format.findings import FindingRule

YAML_SYNTAX = FindingRule(
    "yaml-syntax",
    "The YAML does not parse, or holds a control character.",
    "Fix the YAML at the position shown; control characters (NUL...) are not allowed.",
)

YAML_DUPLICATE_KEY = FindingRule(
    "yaml-duplicate-key",
    "A mapping has the same key twice.",
    "Keep one of the two; the later one would silently win.",
)

YAML_TOO_LARGE = FindingRule(
    "yaml-too-large",
    "The file or its alias expansion is over the size or node limit.",
    "Split the pack or remove the aliases that multiply nodes.",
)

YAML_ENCODING = FindingRule(
    "yaml-encoding",
    "The file is not UTF-8 text.",
    "Save the file as UTF-8.",
)

YAML_UNSUPPORTED_TAG = FindingRule(
    "yaml-unsupported-tag",
    "A YAML tag (e.g. !!python/object) the engine does not read.",
    "Remove the tag: packs are plain data.",
)

YAML_COMPLEX_KEY = FindingRule(
    "yaml-complex-key",
    "A mapping key that is not a scalar.",
    "Use a string key.",
)

YAML_MERGE_KEY = FindingRule(
    "yaml-merge-key",
    "A YAML merge key (<<:).",
    "Write the keys out, or use `extends`.",
)

FILE_UNREADABLE = FindingRule(
    "file-unreadable",
    "A pack file cannot be read.",
    "Check the path and its permissions.",
)

PACK_EMPTY = FindingRule(
    "pack-empty",
    "The pack file is empty.",
    "Start from `rules init` or add `rulepack: NAME`.",
)

PACK_NOT_MAPPING = FindingRule(
    "pack-not-mapping",
    "The pack file is not a YAML mapping.",
    "A pack is a mapping with `rulepack:` and its sections.",
)

EXTENDS_CYCLE = FindingRule(
    "extends-cycle",
    "Packs extend each other in a cycle.",
    "Remove one of the `extends` entries in the cycle.",
)

EXTENDS_NOT_FOUND = FindingRule(
    "extends-not-found",
    "An `extends` entry names no pack.",
    "Use builtin:NAME, a pack folder or a pack file.",
)

EXTENDS_ABSOLUTE = FindingRule(
    "extends-absolute",
    "An `extends` entry is an absolute path.",
    "Use a path relative to the pack file.",
)

EXTENDS_OUTSIDE_WORKSPACE = FindingRule(
    "extends-outside-workspace",
    "An `extends` entry points outside the workspace.",
    "Extend builtin packs or packs inside the repository.",
)

NUMBER_OUT_OF_RANGE = FindingRule(
    "number-out-of-range",
    "A number is an infinity, NaN, or an integer beyond 64 bits.",
    "Write a finite number within 64 bits, or quote it to make it a string.",
)
