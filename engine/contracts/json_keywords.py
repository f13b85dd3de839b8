"""JSON Schema keywords whose cost must stay linear: patterns and enums.

jsonschema runs ``pattern`` and ``patternProperties`` on Python's backtracking ``re``
(``^(\\w+\\s?)*$`` against 60 characters runs for minutes) and quotes a whole ``enum`` in
each error (an enum of 300,000 values costs megabytes per failing document). The keyword
functions here replace those of the validator class:

* A schema pattern runs on stdlib ``re`` when proven linear (the check of pack patterns,
  ``engine.core.patterns``, on Python syntax), else on RE2. On RE2, ``$`` is the end of the
  text as in JSON Schema's ECMA-262 (Python's also matches before a final newline) and
  ``\\d \\w \\s`` keep Python's Unicode meaning. A pattern neither can run (a look-around,
  a back-reference) is a ``rules check`` finding naming its JSON Pointer, and the schema
  does not load.
* ``enum`` and ``const`` messages quote at most a few values and say how many there are.
"""

from __future__ import annotations

import re
import reprlib
from collections.abc import Iterator
from functools import lru_cache
from typing import Any

from engine.core.patterns import CompiledPattern, PatternError, compile_pattern, proven_linear

ENUM_QUOTED = 5
"""An ``enum`` error message quotes at most this many values (then the count)."""
_MAX_QUOTE = 200
_SKIPPED = frozenset({"enum", "const", "default", "examples"})  # data, not schemas


# Python's Unicode classes in RE2 syntax: \w is str.isalnum() or '_', \d a decimal digit,
# \s str.isspace(). Inside a class only the positive ones can be written (a union).
_SPACE = "\\t\\n\\x{0b}\\f\\r\\x{1c}-\\x{1f}\\x{85}\\p{Z}"
_OUTSIDE = {
    "Z": "\\z",
    "w": "[\\p{L}\\p{N}_]",
    "W": "[^\\p{L}\\p{N}_]",
    "d": "\\p{Nd}",
    "D": "\\P{Nd}",
    "s": f"[{_SPACE}]",
    "S": f"[^{_SPACE}]",
}
_IN_CLASS = {"w": "\\p{L}\\p{N}_", "d": "\\p{Nd}", "s": _SPACE}


def _for_re2(pattern: str) -> str:
    """A Python pattern in RE2 syntax, with Python's meaning: ``\\Z`` and ``$(?!\\n)`` (the end
    of the text) become ``\\z``, ``\\uXXXX`` becomes ``\\x{XXXX}``, ``\\w \\d \\s`` and their
    negations match what they match in Python (Unicode); the rest is left to RE2."""
    out: list[str] = []
    index, in_class = 0, False
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            follower = pattern[index + 1]
            if follower == "u" and index + 6 <= len(pattern):
                out.append("\\x{" + pattern[index + 2 : index + 6] + "}")
                index += 6
                continue
            table = _IN_CLASS if in_class else _OUTSIDE
            out.append(table.get(follower, char + follower))
            index += 2
            continue
        if char == "[" and not in_class:
            in_class = True
            out.append(char)
            index += 1
            if pattern.startswith("^", index):
                out.append("^")
                index += 1
            if pattern.startswith("]", index):
                out.append("\\]")
                index += 1
            continue
        if char == "]" and in_class:
            in_class = False
        elif char == "$" and not in_class and pattern.startswith("(?!\\n)", index + 1):
            out.append("\\z")
            index += 7
            continue
        out.append(char)
        index += 1
    return "".join(out)


@lru_cache(maxsize=4096)
def schema_pattern(pattern: str) -> CompiledPattern:
    """``pattern`` of a schema compiled to run in linear time; ``PatternError`` if it cannot."""
    if proven_linear(pattern) is None:
        try:
            return re.compile(pattern)
        except re.error as exc:
            raise PatternError(str(exc)) from None
    return compile_pattern(_for_re2(pattern))


def _escape(part: Any) -> str:
    return str(part).replace("~", "~0").replace("/", "~1")


def pattern_problems(schema: Any) -> list[str]:
    """Each pattern of ``schema`` that cannot run in linear time, with its JSON Pointer."""
    problems: list[str] = []
    patterned: list[tuple[str, str]] = []  # patternProperties: (pointer, pattern)
    unevaluated = False
    stack: list[tuple[Any, str]] = [(schema, "")]
    while stack:
        node, pointer = stack.pop()
        if isinstance(node, list):
            stack.extend((item, f"{pointer}/{i}") for i, item in enumerate(node))
            continue
        if not isinstance(node, dict):
            continue
        found: list[tuple[str, str]] = []
        if isinstance(node.get("pattern"), str):
            found.append((f"{pointer}/pattern", node["pattern"]))
        if isinstance(node.get("patternProperties"), dict):
            keyed = [
                (f"{pointer}/patternProperties/{_escape(key)}", key)
                for key in node["patternProperties"]
            ]
            found.extend(keyed)
            patterned.extend(keyed)
        unevaluated = unevaluated or "unevaluatedProperties" in node
        for where, pattern in found:
            try:
                schema_pattern(pattern)
            except PatternError as exc:
                problems.append(
                    f"{where}: pattern {_quote(pattern)} cannot run in linear time: stdlib re "
                    f"cannot be proven linear on it ({proven_linear(pattern)}) and RE2 refuses "
                    f"it ({exc}); rewrite it without look-arounds or back-references"
                )
        stack.extend(
            (value, f"{pointer}/{_escape(key)}")
            for key, value in node.items()
            if key not in _SKIPPED
        )
    if unevaluated:
        # jsonschema matches patternProperties on Python's re inside unevaluatedProperties
        problems.extend(
            f"{where}: pattern {_quote(pattern)} is matched by Python's backtracking re "
            f"under unevaluatedProperties and cannot be proven linear "
            f"({proven_linear(pattern)}); simplify it or drop unevaluatedProperties"
            for where, pattern in patterned
            if proven_linear(pattern) is not None
        )
    return sorted(problems)


def _bounded_repr() -> reprlib.Repr:
    bounded = reprlib.Repr()
    bounded.maxstring = bounded.maxother = bounded.maxlong = _MAX_QUOTE
    bounded.maxlist = bounded.maxtuple = bounded.maxdict = ENUM_QUOTED
    bounded.maxlevel = 3
    return bounded


_quote = _bounded_repr().repr
"""``repr`` of a value cut to a bounded size, computed in time bounded by that size."""


def _search(pattern: str, text: str) -> bool:
    return schema_pattern(pattern).search(text) is not None


def _pattern(validator: Any, pattern: str, instance: Any, schema: Any) -> Iterator[Any]:
    # Deferred for start-up time: jsonschema is heavy and only json contracts use it.
    from jsonschema.exceptions import ValidationError

    if validator.is_type(instance, "string") and not _search(pattern, instance):
        yield ValidationError(f"{instance!r} does not match {pattern!r}")


def _pattern_properties(
    validator: Any, patterns: dict[str, Any], instance: Any, schema: Any
) -> Iterator[Any]:
    if not validator.is_type(instance, "object"):
        return
    for pattern, subschema in patterns.items():
        for key, value in instance.items():
            if _search(pattern, key):
                yield from validator.descend(value, subschema, path=key, schema_path=pattern)


def _additional_properties(
    validator: Any, additional: Any, instance: Any, schema: Any
) -> Iterator[Any]:
    """jsonschema's ``additionalProperties``, its patterns matched in linear time."""
    # Deferred for start-up time: jsonschema is heavy and only json contracts use it.
    from jsonschema._utils import extras_msg
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    properties = schema.get("properties", {})
    patterns = list(schema.get("patternProperties", {}))
    extras = {
        key
        for key in instance
        if key not in properties and not any(_search(p, key) for p in patterns)
    }
    if validator.is_type(additional, "object"):
        for extra in extras:
            yield from validator.descend(instance[extra], additional, path=extra)
    elif not additional and extras:
        if "patternProperties" in schema:
            verb = "does" if len(extras) == 1 else "do"
            joined = ", ".join(repr(each) for each in sorted(extras))
            quoted = ", ".join(repr(each) for each in sorted(patterns))
            yield ValidationError(f"{joined} {verb} not match any of the regexes: {quoted}")
        else:
            error = "Additional properties are not allowed (%s %s unexpected)"
            yield ValidationError(error % extras_msg(sorted(extras, key=str)))


def bounded_values(values: list[Any]) -> str:
    """``values`` quoted as jsonschema does, or its first few and how many there are."""
    if len(values) <= ENUM_QUOTED:
        return _quote(values)
    shown = ", ".join(_quote(value) for value in values[:ENUM_QUOTED])
    return f"[{shown}, ...] ({len(values)} values)"


_STRING_SETS: dict[int, tuple[list[Any], frozenset[str]]] = {}


def _strings(values: list[Any]) -> frozenset[str]:
    """The strings of an ``enum`` list, built once per list (kept while the list lives)."""
    cached = _STRING_SETS.get(id(values))
    if cached is None or cached[0] is not values:
        if len(_STRING_SETS) >= 256:
            _STRING_SETS.clear()
        cached = (values, frozenset(v for v in values if isinstance(v, str)))
        _STRING_SETS[id(values)] = cached
    return cached[1]


def _enum(validator: Any, enums: Any, instance: Any, schema: Any) -> Iterator[Any]:
    # Deferred for start-up time: jsonschema is heavy and only json contracts use it.
    from jsonschema._utils import equal
    from jsonschema.exceptions import ValidationError

    if isinstance(enums, list) and isinstance(instance, str):
        # jsonschema's equality on a string is ==: a set answers it in constant time
        found = instance in _strings(enums)
    else:
        found = any(equal(each, instance) for each in enums)
    if found:
        return
    if isinstance(enums, list) and len(enums) > ENUM_QUOTED:
        yield ValidationError(f"{_quote(instance)} is not one of {bounded_values(enums)}")
    else:
        yield ValidationError(f"{instance!r} is not one of {enums!r}")


def _const(validator: Any, const: Any, instance: Any, schema: Any) -> Iterator[Any]:
    # Deferred for start-up time: jsonschema is heavy and only json contracts use it.
    from jsonschema._utils import equal
    from jsonschema.exceptions import ValidationError

    if not equal(instance, const):
        yield ValidationError(f"{_quote(const)} was expected")  # bounded: const may be huge


def linear_keywords(cls: Any) -> Any:
    """``cls`` with the keywords above replacing its own (only those it has)."""
    # Deferred for start-up time: jsonschema is heavy and only json contracts use it.
    import jsonschema

    replaced = {
        "pattern": _pattern,
        "patternProperties": _pattern_properties,
        "additionalProperties": _additional_properties,
        "enum": _enum,
        "const": _const,
    }
    known = cls.VALIDATORS
    return jsonschema.validators.extend(  # type: ignore[no-untyped-call]
        cls, {name: function for name, function in replaced.items() if name in known}
    )
