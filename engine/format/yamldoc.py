"""Reading rulepack YAML safely, with limits, keeping file:line:column for every node.

The result of reading is a plain tree (dicts, lists, scalars) plus a ``SourceMap`` from key
paths to positions. Problems are collected as findings rather than raised, so that
`rules check` can report all of them at once.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from engine.core.errors import Position
from engine.core.files import read_file_capped
from engine.core.numbers import NumberOutOfRange, float_of_text, int_of_text
from engine.core.textio import holds_lone_surrogate
from engine.format.findings import Finding, FindingRule
from engine.format.loader_rules import (
    FILE_UNREADABLE,
    NUMBER_OUT_OF_RANGE,
    YAML_COMPLEX_KEY,
    YAML_DUPLICATE_KEY,
    YAML_ENCODING,
    YAML_MERGE_KEY,
    YAML_SYNTAX,
    YAML_TOO_LARGE,
    YAML_UNSUPPORTED_TAG,
)
from engine.format.locate import display_path
from engine.format.sourcemap import KeyPath, SourceMap

MAX_YAML_BYTES = 1024 * 1024
MAX_NODES = 100_000
MAX_DEPTH = 64


class _Loader(yaml.SafeLoader):
    """Safe loading with YAML 1.2 core scalars: `YES`, `on`, `12:30` stay strings."""


# libyaml's parser when it is installed: the same nodes and marks, several times faster. Its
# error wording differs, so a document it refuses is parsed again by the pure-Python parser,
# whose message is the one users see.
_FastLoader: type[yaml.SafeLoader] = _Loader
if getattr(yaml, "__with_libyaml__", False):

    class _CLoader(yaml.CSafeLoader):
        """libyaml with the same YAML 1.2 core scalars as ``_Loader``."""

    _FastLoader = _CLoader  # type: ignore[assignment]

for _loader_class in (_Loader, _FastLoader):
    _loader_class.yaml_implicit_resolvers = {}
for _tag, _pattern, _first in (
    ("bool", r"^(?:true|True|TRUE|false|False|FALSE)$", "tTfF"),
    ("int", r"^(?:[-+]?[0-9]+|0o[0-7]+|0x[0-9a-fA-F]+)$", "-+0123456789"),
    (
        "float",
        r"^(?:[-+]?(?:\.[0-9]+|[0-9]+(?:\.[0-9]*)?)(?:[eE][-+]?[0-9]+)?"
        r"|[-+]?\.(?:inf|Inf|INF)|\.(?:nan|NaN|NAN))$",
        "-+.0123456789",
    ),
    ("null", r"^(?:~|null|Null|NULL|)$", ["~", "n", "N", ""]),
):
    for _loader_class in (_Loader, _FastLoader):
        _loader_class.add_implicit_resolver(
            f"tag:yaml.org,2002:{_tag}", re.compile(_pattern), list(_first)
        )

_STR = "tag:yaml.org,2002:str"
_SCALAR_TAGS = {
    _STR,
    "tag:yaml.org,2002:bool",
    "tag:yaml.org,2002:int",
    "tag:yaml.org,2002:float",
    "tag:yaml.org,2002:null",
}
_COLLECTION_TAGS = {"tag:yaml.org,2002:seq", "tag:yaml.org,2002:map"}


@dataclass
class Document:
    """One YAML file: its tree, where each node is, and what went wrong reading it."""

    data: Any
    source: SourceMap
    findings: list[Finding]


def _position(display: str, mark: yaml.Mark | None) -> Position:
    if mark is None:
        return Position(display)
    return Position(display, mark.line + 1, mark.column + 1)


def _scalar_value(node: yaml.ScalarNode) -> Any:
    tag, text = node.tag, node.value
    if tag == _STR:
        return text
    if tag.endswith(":bool"):
        if text.lower() not in ("true", "false"):  # `!!bool maybe`: refused, never False
            raise ValueError(f"{text[:40]!r} is not true or false")
        return text.lower() == "true"
    if tag.endswith(":int"):
        return int_of_text(text)
    if tag.endswith(":float"):
        return float_of_text(text)
    return None


class _TreeBuilder:
    """Turns a composed node graph into a plain tree, counting nodes to bound aliases."""

    def __init__(self, display: str) -> None:
        self.display = display
        self.source = SourceMap()
        self.findings: list[Finding] = []
        self.nodes = 0

    def finding(
        self, rule: FindingRule, message: str, mark: yaml.Mark | None, hint: str = ""
    ) -> None:
        self.findings.append(rule.at(message, _position(self.display, mark), hint))

    def build(self, node: yaml.Node, path: KeyPath) -> Any:
        self.nodes += 1
        if self.nodes > MAX_NODES:
            raise _TooBig(
                f"document expands to more than {MAX_NODES} nodes (alias expansion?)",
                node.start_mark,
            )
        if len(path) > MAX_DEPTH:
            raise _TooBig(
                f"nesting deeper than {MAX_DEPTH} levels (recursive alias?)", node.start_mark
            )
        self.source.values[path] = _position(self.display, node.start_mark)
        if isinstance(node, yaml.ScalarNode):
            if node.tag not in _SCALAR_TAGS:
                self.finding(
                    YAML_UNSUPPORTED_TAG,
                    f"unsupported YAML tag {node.tag!r}",
                    node.start_mark,
                    "remove the tag; packs hold plain strings, numbers, booleans, lists and maps",
                )
                return node.value
            try:
                value = _scalar_value(node)
                if isinstance(value, str) and holds_lone_surrogate(value):
                    self.source.refused.add(path)
                    self._surrogate(value, node.start_mark)
                    return None
                return value
            except NumberOutOfRange as exc:
                self.source.refused.add(path)
                self.finding(
                    NUMBER_OUT_OF_RANGE,
                    str(exc),
                    node.start_mark,
                    "write a finite number within 64 bits, or quote it to make it a string",
                )
                return None
            except ValueError:  # an explicit tag on a value it cannot hold: `!!int abc`
                self.source.refused.add(path)
                self.finding(
                    YAML_SYNTAX,
                    f"{node.value[:100]!r} is no value of the tag {node.tag!r}",
                    node.start_mark,
                    "remove the tag or write a value of its type",
                )
                return None
        if node.tag not in _COLLECTION_TAGS:
            self.finding(
                YAML_UNSUPPORTED_TAG,
                f"unsupported YAML tag {node.tag!r}",
                node.start_mark,
                "remove the tag; packs hold plain lists and maps",
            )
        if isinstance(node, yaml.SequenceNode):
            return [self.build(item, (*path, i)) for i, item in enumerate(node.value)]
        if isinstance(node, yaml.MappingNode):
            return self._build_mapping(node, path)
        return None  # pragma: no cover - PyYAML has no other node kinds

    def _build_mapping(self, node: yaml.MappingNode, path: KeyPath) -> dict[str, Any]:
        out: dict[str, Any] = {}
        first_seen: dict[str, yaml.Mark] = {}
        for key_node, value_node in node.value:
            if not isinstance(key_node, yaml.ScalarNode):
                self.finding(
                    YAML_COMPLEX_KEY,
                    "mapping keys must be plain scalars",
                    key_node.start_mark,
                    "write the key as a plain string",
                )
                continue
            key = str(key_node.value)
            if holds_lone_surrogate(key):
                self._surrogate(key, key_node.start_mark)
                continue
            if key == "<<":
                self.finding(
                    YAML_MERGE_KEY,
                    "YAML merge keys (<<) are not supported",
                    key_node.start_mark,
                    "use `extends:` to build on another pack",
                )
                continue
            if key in first_seen:
                first = _position(self.display, first_seen[key])
                self.finding(
                    YAML_DUPLICATE_KEY,
                    f"duplicate key {key!r} (first defined at {first})",
                    key_node.start_mark,
                    "keep only one of the two; the later one would silently win",
                )
            first_seen.setdefault(key, key_node.start_mark)
            key_path: KeyPath = (*path, key)
            self.source.keys[key_path] = _position(self.display, key_node.start_mark)
            out[key] = self.build(value_node, key_path)
        return out

    def _surrogate(self, text: str, mark: yaml.Mark | None) -> None:
        shown = text.encode("utf-8", "backslashreplace").decode()[:100]
        self.finding(
            YAML_SYNTAX,
            f"the text '{shown}' holds a lone surrogate (a \\uD800-\\uDFFF escape), not text",
            mark,
            "write the character itself, or escape it as \\U and 8 hex digits (\\U0001F600)",
        )


class _TooBig(Exception):
    def __init__(self, message: str, mark: yaml.Mark | None) -> None:
        super().__init__(message)
        self.message = message
        self.mark = mark


def read_text(path: Path, limit: int, display: str | None = None) -> str | Finding:
    """A UTF-8 text file of at most ``limit`` bytes, reading no further; a Finding naming
    the file when it is larger, unreadable, not UTF-8 or not a regular file (a FIFO would
    block, /dev/zero never ends)."""
    where = Position(display or display_path(path))
    try:
        raw, more = read_file_capped(path, limit)
    except OSError as exc:
        return FILE_UNREADABLE.at(
            f"cannot read file: {exc.strerror or exc}",
            where,
            "check the path and its permissions",
        )
    if more:
        return YAML_TOO_LARGE.at(
            f"file is over the {limit}-byte limit; it was not read further",
            where,
            "split the file, or move long text into files the pack references",
        )
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as exc:
        return YAML_ENCODING.at(
            f"file is not valid UTF-8 (byte {exc.start})",
            where,
            "save the file as UTF-8",
        )


def read_yaml(path: Path, display: str | None = None) -> Document:
    """Read one YAML file; never raises for anything the file can contain."""
    shown = display or display_path(path)
    text = read_text(path, MAX_YAML_BYTES, shown)
    if isinstance(text, Finding):
        return Document(None, SourceMap(), [text])
    return parse_yaml(text, shown)


_REFUSED = object()
# What YAML's reader refuses (its printable set): C0 controls but tab, LF, CR; DEL; C1 but NEL.
_NON_PRINTABLE = re.compile("[\x00-\x08\x0b\x0c\x0e-\x1f\x7f-\x84\x86-\x9f\ufffe\uffff]")


def _fast_node(text: str) -> Any:
    """The document's node from libyaml, or ``_REFUSED`` (no libyaml, or a YAML error)."""
    if _FastLoader is _Loader:
        return _REFUSED
    fast = _FastLoader(text)
    try:
        return fast.get_single_node()
    except (yaml.YAMLError, RecursionError):
        return _REFUSED
    finally:
        fast.dispose()


def parse_yaml(text: str, display: str) -> Document:
    builder = _TreeBuilder(display)
    special = _NON_PRINTABLE.search(text)
    if special is not None:
        line = text.count("\n", 0, special.start()) + 1
        column = special.start() - (text.rfind("\n", 0, special.start()) + 1) + 1
        return Document(
            None,
            builder.source,
            [
                YAML_SYNTAX.at(
                    f"invalid YAML: control character {special.group()!r} (YAML allows none)",
                    Position(display, line, column),
                    "remove the character (a NUL byte often means a binary or UTF-16 file)",
                )
            ],
        )
    try:
        loader = _Loader(text)
        node = _fast_node(text)
        if node is _REFUSED:
            node = loader.get_single_node()
        data = builder.build(node, ()) if node is not None else None
    except yaml.MarkedYAMLError as exc:
        message = " ".join(p for p in (exc.context, exc.problem) if p) or "invalid YAML"
        return Document(
            None,
            builder.source,
            [
                *builder.findings,
                YAML_SYNTAX.at(
                    f"invalid YAML: {message}",
                    _position(display, exc.problem_mark or exc.context_mark),
                    "fix the YAML syntax at this place",
                ),
            ],
        )
    except yaml.YAMLError as exc:
        return Document(
            None,
            builder.source,
            [
                *builder.findings,
                YAML_SYNTAX.at(f"invalid YAML: {exc}", Position(display), "fix the YAML syntax"),
            ],
        )
    except _TooBig as exc:
        return Document(
            None,
            builder.source,
            [
                *builder.findings,
                YAML_TOO_LARGE.at(
                    exc.message,
                    _position(display, exc.mark),
                    "remove the alias chain; packs do not need deep alias expansion",
                ),
            ],
        )
    except RecursionError:
        return Document(
            None,
            builder.source,
            [
                *builder.findings,
                YAML_TOO_LARGE.at(
                    "document nests too deeply",
                    Position(display),
                    "flatten the structure",
                ),
            ],
        )
    finally:
        loader.dispose()
    return Document(data, builder.source, builder.findings)
