"""The line syntax of sentinel payloads: section headers, field lines, names and item keys.

A grammar may override each of these patterns. The engine's own defaults (those of
``SentinelGrammar``) have exact string-method equivalents here, so the per-line dispatch
runs a few ``str`` tests instead of regex calls; any other pattern is compiled with
``engine.core.patterns.compile_pattern`` (stdlib ``re`` when proven linear, RE2 otherwise).
Each equivalence is tested against the pattern it replaces (tests/test_sentinel_syntax.py).
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any, TypeVar

from engine.core.patterns import compile_pattern

HeaderMatcher = Callable[[str], "str | None"]
"""A line -> the section name it introduces (the pattern's group 1), or None."""
FieldLineMatcher = Callable[[str], "tuple[str, str] | None"]
"""A line -> (key, raw value after the match), or None."""
NameCheck = Callable[[str], bool]
"""A name -> does the pattern find a match in it."""
T = TypeVar("T")

_UPPER = "ABCDEFGHIJKLMNOPQRSTUVWXYZ"
_UPPER_UNDERSCORE = _UPPER + "_"
_UPPER_DIGIT_UNDERSCORE = _UPPER + "0123456789_"
_LOWER_UNDERSCORE = "abcdefghijklmnopqrstuvwxyz_"

# `not s.strip(chars)` is True exactly when every character of s is in chars.


def _default_header(line: str) -> str | None:
    """``^([A-Z_]+):$``"""
    if line[-1:] != ":":
        return None
    name = line[:-1]
    return name if name and not name.strip(_UPPER_UNDERSCORE) else None


def _default_field_line(line: str) -> tuple[str, str] | None:
    """``^([A-Z][A-Z0-9_]*)=``: the key is everything before the first '=' (the class
    excludes '='), so the regex matches exactly when that prefix has the key's form."""
    key, equals, raw = line.partition("=")
    if equals and "A" <= key[:1] <= "Z" and not key.strip(_UPPER_DIGIT_UNDERSCORE):
        return key, raw
    return None


def _default_field_name(name: str) -> bool:
    """``^[A-Z]``"""
    return "A" <= name[:1] <= "Z"


def _default_item_key(key: str) -> bool:
    """``^[a-z][a-z_]*$``"""
    return "a" <= key[:1] <= "z" and not key.strip(_LOWER_UNDERSCORE)


_HEADERS: dict[str, HeaderMatcher] = {"^([A-Z_]+):$": _default_header}
_FIELD_LINES: dict[str, FieldLineMatcher] = {"^([A-Z][A-Z0-9_]*)=": _default_field_line}
_NAME_CHECKS: dict[str, NameCheck] = {
    "^[A-Z]": _default_field_name,
    "^[a-z][a-z_]*$": _default_item_key,
}


def _matcher(
    pattern: str, fast: Mapping[str, Callable[[str], T | None]], found: Callable[[Any, str], T]
) -> Callable[[str], T | None]:
    """The string-method equivalent of ``pattern`` in ``fast``, else a search of the compiled
    pattern: a line -> ``found(match, line)``, or None when it does not match."""
    known = fast.get(pattern)
    if known is not None:
        return known
    search = compile_pattern(pattern).search

    def match(line: str) -> T | None:
        hit = search(line)
        return None if hit is None else found(hit, line)

    return match


def header_matcher(pattern: str) -> HeaderMatcher:
    return _matcher(pattern, _HEADERS, lambda hit, line: str(hit.group(1)))


def field_line_matcher(pattern: str) -> FieldLineMatcher:
    return _matcher(pattern, _FIELD_LINES, lambda hit, line: (str(hit.group(1)), line[hit.end() :]))


def name_check(pattern: str) -> NameCheck:
    fast = _NAME_CHECKS.get(pattern)
    if fast is not None:
        return fast
    search = compile_pattern(pattern).search
    return lambda name: search(name) is not None


def splits_at_first_equals(section_header: str, field_line: str) -> bool:
    """True for the engine's default line syntax: a line holding '=' is never a section
    header, and a field line's key is exactly the text before its first '='. The payload loop
    then recognises a declared key with ``str.partition`` and one dict lookup."""
    return (
        _HEADERS.get(section_header) is _default_header
        and _FIELD_LINES.get(field_line) is _default_field_line
    )
