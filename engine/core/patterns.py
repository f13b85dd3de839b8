"""Patterns from packs, matched in time linear in the input, always.

Packs write patterns in RE2 syntax. A shared pack must never make the engine backtrack for
minutes on a hostile output, so every pattern runs on one of two engines:

* **stdlib ``re``** when a static check *proves* the pattern cannot backtrack
  super-linearly and its meaning is the same in both engines (``plan_pattern``
  decides). A pattern it cannot prove safe is not rejected, it simply runs on RE2.
  Stdlib ``re`` costs a tenth of the RE2 wrapper per call on short lines, which is what the
  sentinel grammars do all day.
* **RE2** otherwise. ``re2`` is imported only when a pattern needs it (start-up time matters).

Constructs RE2 cannot compile (look-arounds, back-references) raise ``PatternError``.

Planning a pattern (``plan_pattern``): a pattern in RE2 syntax runs on stdlib ``re`` only
when it is translated to a stdlib pattern with IDENTICAL match results and a static check
*proves* that pattern cannot backtrack super-linearly. The check is deliberately
conservative: a pattern it cannot prove safe is not rejected, it simply runs on RE2.

``pattern_engine(p)`` says which engine a pattern gets and why (for ``rules explain``).
"""

from __future__ import annotations

import re
import string
import warnings
from functools import lru_cache
from typing import Any, NamedTuple, Protocol

try:  # Python >= 3.11
    from re import _parser as _sre_parse  # type: ignore[attr-defined]
except ImportError:  # pragma: no cover - Python 3.10
    import sre_parse as _sre_parse

STDLIB = "re"
RE2 = "re2"

MAX_REPEAT_COUNT = 1000
"""RE2 refuses repeat counts above 1000; the translation refuses them too."""

UNANCHORED_SPAN = 16
"""An unanchored pattern may hold variable repetitions only if their maxima add up to at
most this: `search` then spends a bounded number of steps at each start position."""


class PatternPlan(NamedTuple):
    """Which engine runs a pattern, why, and (for stdlib) the translated source."""

    engine: str
    reason: str
    source: str | None = None


class _Refused(Exception):
    """The static check cannot prove a pattern safe; the message says why."""


# --------------------------------------------------------------------------- translation
#
# RE2 syntax -> stdlib syntax with IDENTICAL match results. Only a whitelist of constructs
# whose meaning agrees is translated; anything else is refused (and runs on RE2):
#   $ -> \Z        RE2's '$' is end of text; stdlib's also matches before a final LF.
#   \z -> \Z       end of text.
#   \d \w \s       ASCII in RE2 (\s = [\t\n\f\r ], no \v), Unicode in stdlib: expanded to
#                  explicit ASCII classes; their negations only outside classes.
#   (?flags), \b, \pN, \Q..\E, \x.., \C, octal/back-references, POSIX [[:alpha:]],
#   possessive or doubled quantifiers, {,n} and counts > 1000: refused.

_PUNCTUATION = frozenset(string.punctuation)
_SHORTHAND_IN_CLASS = {"d": "0-9", "w": "0-9A-Za-z_", "s": "\\t\\n\\f\\r "}
_SHORTHAND = {
    "d": "[0-9]",
    "D": "[^0-9]",
    "w": "[0-9A-Za-z_]",
    "W": "[^0-9A-Za-z_]",
    "s": "[\\t\\n\\f\\r ]",
    "S": "[^\\t\\n\\f\\r ]",
}
_CONTROL_ESCAPES = frozenset("ntrfv")
# Single characters with a meaning of their own: their stdlib text, and whether a
# quantifier may follow them.
_OPERATORS = {")": (")", True), "|": ("|", False), "^": ("^", False), "$": ("\\Z", False)}
_COUNT = re.compile(r"\{([0-9]{1,4})(,([0-9]{1,4})?)?\}")
_GROUP_NAME = re.compile(r"\(\?P<([A-Za-z_][A-Za-z0-9_]*)>")


def _check_char(char: str) -> None:
    code = ord(char)
    if 0xD800 <= code <= 0xDFFF:
        raise _Refused(f"surrogate character U+{code:04X}")


def _translate_class(pattern: str, index: int) -> tuple[str, int]:
    """Translate the class starting at ``pattern[index] == '['``; return it and the index
    after its ']'."""
    out = ["["]
    index += 1
    if index < len(pattern) and pattern[index] == "^":
        out.append("^")
        index += 1
    atoms: list[str] = []  # each a translated single char, '-', or a shorthand expansion
    last_single = False  # may the previous atom start a range?
    after_range = False
    first = True
    while True:
        if index >= len(pattern):
            raise _Refused("unterminated character class")
        char = pattern[index]
        if char == "]":
            if first:
                raise _Refused("']' first in a class")
            break
        first = False
        if char == "[":
            raise _Refused("'[' inside a class (POSIX classes differ)")
        if char in "&~|" and index + 1 < len(pattern) and pattern[index + 1] == char:
            raise _Refused(f"'{char}{char}' inside a class")
        if char == "\\":
            if index + 1 >= len(pattern):
                raise _Refused("trailing backslash")
            follower = pattern[index + 1]
            index += 2
            if follower in _SHORTHAND_IN_CLASS:
                atoms.append(_SHORTHAND_IN_CLASS[follower])
                last_single, after_range = False, False
                continue
            if follower in _PUNCTUATION or follower in _CONTROL_ESCAPES:
                atoms.append("\\" + follower)
                last_single, after_range = False, False
                continue
            raise _Refused(f"escape '\\{follower}' inside a class")
        if char == "-":
            next_char = pattern[index + 1] if index + 1 < len(pattern) else "]"
            if next_char == "-":
                raise _Refused("'--' inside a class")
            if next_char != "]" and atoms:
                # a range: the previous atom must be a single char, the next one too
                if not last_single or after_range:
                    raise _Refused("ambiguous '-' inside a class")
                if next_char in "[\\^":
                    raise _Refused("range ending in an escape or '['")
                _check_char(next_char)
                low = atoms[-1][-1]
                if ord(low) > ord(next_char):
                    raise _Refused("reversed range")
                atoms.append("-" + next_char)
                index += 2
                last_single, after_range = False, True
                continue
            atoms.append("\\-")
            index += 1
            last_single, after_range = False, False
            continue
        _check_char(char)
        atoms.append("\\" + char if char in "^" else char)
        index += 1
        last_single, after_range = True, False
    out.extend(atoms)
    out.append("]")
    return "".join(out), index + 1


def translate(pattern: str) -> str:
    """The stdlib source with the same match results as RE2's ``pattern``, or ``_Refused``."""
    out: list[str] = []
    index = 0
    length = len(pattern)
    quantifiable = False  # may a quantifier follow the previous token?
    quantified = 0  # 1: the previous token is a quantifier, 2: a lazy one
    while index < length:
        char = pattern[index]
        if char in "*+?":
            if quantified == 1 and char == "?":
                out.append("?")  # lazy
                index += 1
                quantified = 2
                continue
            if quantified:
                raise _Refused("a quantifier after a quantifier")
            if not quantifiable:
                raise _Refused(f"'{char}' with nothing to repeat")
            out.append(char)
            index += 1
            quantified, quantifiable = 1, False
            continue
        if char == "{":
            match = _COUNT.match(pattern, index)
            if match is None:
                raise _Refused("'{' that is not a {n}, {n,} or {n,m} count")
            if quantified:
                raise _Refused("a quantifier after a quantifier")
            if not quantifiable:
                raise _Refused("a count with nothing to repeat")
            low = int(match.group(1))
            high = match.group(3)
            if low > MAX_REPEAT_COUNT or (high is not None and int(high) > MAX_REPEAT_COUNT):
                raise _Refused(f"a repeat count above {MAX_REPEAT_COUNT}")
            if high is not None and int(high) < low:
                raise _Refused("a count with max < min")
            out.append(match.group(0))
            index = match.end()
            quantified, quantifiable = 1, False
            continue
        quantified = 0
        if char == "\\":
            if index + 1 >= length:
                raise _Refused("trailing backslash")
            follower = pattern[index + 1]
            index += 2
            if follower in _SHORTHAND:
                out.append(_SHORTHAND[follower])
                quantifiable = True
            elif follower in _PUNCTUATION or follower in _CONTROL_ESCAPES:
                out.append("\\" + follower)
                quantifiable = True
            elif follower == "A":
                out.append("\\A")
                quantifiable = False
            elif follower == "z":
                out.append("\\Z")
                quantifiable = False
            else:
                raise _Refused(f"escape '\\{follower}'")
            continue
        if char == "[":
            translated, index = _translate_class(pattern, index)
            out.append(translated)
            quantifiable = True
            continue
        if char == "(":
            if pattern.startswith("(?:", index):
                out.append("(?:")
                index += 3
            elif pattern.startswith("(?", index):
                named = _GROUP_NAME.match(pattern, index)
                if named is None:
                    raise _Refused("a '(?' group other than (?: or (?P<name>")
                out.append(named.group(0))
                index = named.end()
            else:
                out.append("(")
                index += 1
            quantifiable = False
            continue
        operator = _OPERATORS.get(char)
        if operator is not None:
            out.append(operator[0])
            index += 1
            quantifiable = operator[1]
            continue
        if char in "]}":
            raise _Refused(f"a lone '{char}'")
        _check_char(char)
        out.append("\\" + char if char in "#" else char)
        index += 1
        quantifiable = True
    return "".join(out)


# --------------------------------------------------------------------------- safety
#
# A backtracking matcher is linear on a pattern when every variable repetition has a
# FORCED length: once it starts, only its longest (or, lazily, shortest) run can lead
# anywhere. The check accepts a pattern only if:
#   * every variable repetition (*, +, ?, {n,m}) repeats ONE character matcher (a literal,
#     a class, '.'): no nested quantifiers, no quantified groups or alternations;
#   * every item that may follow a variable repetition, up to and including the first
#     mandatory one, matches no character the repetition matches (no adjacent overlap);
#   * alternations are deterministic: non-empty, quantifier-free alternatives that start
#     with pairwise different characters (at most one can match at a position; otherwise
#     a chain of alternations could backtrack exponentially);
#   * no back-references, look-arounds, conditionals, atomic groups or flags;
#   * the pattern cannot match the empty string (finditer differs after an empty match);
#   * a pattern with an unbounded (or long) variable repetition is anchored at the start
#     ('^' or '\A' first): `search` would otherwise retry the repetition from every position
#     (quadratic); short bounded ones ({2,10}) cost a constant per position.

_Set = tuple[bool, tuple[tuple[int, int], ...]]  # (negated, ranges)
_ANY_BUT_LF: _Set = (True, ((10, 10),))
_NOTHING: _Set = (False, ())


def _char_set(op: Any, value: Any) -> _Set | None:
    """The characters a single-character item matches, or None if it is not one."""
    name = str(op)
    if name == "LITERAL":
        return (False, ((value, value),))
    if name == "NOT_LITERAL":
        return (True, ((value, value),))
    if name == "ANY":
        return _ANY_BUT_LF
    if name == "IN":
        negated = False
        ranges: list[tuple[int, int]] = []
        for item_op, item_value in value:
            item = str(item_op)
            if item == "NEGATE":
                negated = True
            elif item == "LITERAL":
                ranges.append((item_value, item_value))
            elif item == "RANGE":
                ranges.append((item_value[0], item_value[1]))
            elif item == "CATEGORY":  # \d, \w, \s of a Python pattern: assume any char
                return (True, ())
            else:
                raise _Refused(f"class item {item}")
        return (negated, tuple(ranges))
    return None


def _overlaps(a: _Set, b: _Set) -> bool:
    a_negated, a_ranges = a
    b_negated, b_ranges = b
    if a_negated and b_negated:
        return True
    if not a_negated and not b_negated:
        return any(lo1 <= hi2 and lo2 <= hi1 for lo1, hi1 in a_ranges for lo2, hi2 in b_ranges)
    positive, excluded = (b_ranges, a_ranges) if a_negated else (a_ranges, b_ranges)
    # the positive set overlaps the negated one unless every positive char is excluded
    for low, high in positive:
        code = low
        while code <= high:
            cover = next((hi for lo, hi in excluded if lo <= code <= hi), None)
            if cover is None:
                return True
            code = cover + 1
    return False


class _Item(NamedTuple):
    """One flattened item of a sequence: what it can match and how often."""

    chars: _Set  # every character it may consume (over-approximated)
    min: int
    variable: bool  # its length may vary (a quantifier with max > min)
    end_anchor: bool = False
    max: int = 1  # the most characters it may consume (MAXREPEAT when unbounded)


def _flatten(tree: Any, out: list[_Item], anchored: list[bool]) -> None:
    for op, value in tree:
        name = str(op)
        single = _char_set(op, value)
        if single is not None:
            out.append(_Item(single, 1, False))
            continue
        if name == "AT":
            at = str(value)
            if at in ("AT_BEGINNING", "AT_BEGINNING_STRING"):
                if not out:
                    anchored.append(True)
                continue
            if at in ("AT_END_STRING", "AT_END"):
                out.append(_Item(_NOTHING, 1, False, end_anchor=True))
                continue
            raise _Refused(f"anchor {at}")
        if name in ("ASSERT", "ASSERT_NOT"):
            direction, inner = value
            inner_items = list(inner)
            if direction != 1 or len(inner_items) != 1 or _char_set(*inner_items[0]) is None:
                raise _Refused("a look-around other than one character ahead")
            continue  # zero-width, one character tested: a constant cost
        if name == "SUBPATTERN":
            _group, add_flags, del_flags, inner = value
            if add_flags or del_flags:
                raise _Refused("inline flags")
            _flatten(inner, out, anchored)
            continue
        if name in ("MAX_REPEAT", "MIN_REPEAT"):
            low, high, inner = value
            inner_items = list(inner)
            if len(inner_items) != 1:
                raise _Refused("a quantified group")
            body = _char_set(*inner_items[0])
            if body is None:
                raise _Refused("a quantifier on a group or alternation")
            if low == high:
                out.extend(_Item(body, 1, False) for _ in range(min(low, 1)))
                continue
            out.append(_Item(body, low, True, max=high))
            continue
        if name == "BRANCH":
            _none, branches = value
            chars: list[tuple[int, int]] = []
            firsts: list[_Set] = []
            anything = False
            for branch in branches:
                items: list[_Item] = []
                _flatten(branch, items, [])
                if any(item.variable or item.end_anchor for item in items):
                    raise _Refused("a quantifier or anchor inside an alternation")
                if not items:
                    raise _Refused("an empty alternative")
                if any(_overlaps(items[0].chars, first) for first in firsts):
                    raise _Refused("alternatives that may start with the same character")
                firsts.append(items[0].chars)
                for item in items:
                    negated, ranges = item.chars
                    anything = anything or negated
                    chars.extend(ranges)
            # at most one alternative can match at a position: a fixed, mandatory item
            union: _Set = (True, ()) if anything else (False, tuple(chars))
            out.append(_Item(union, 1, False))
            continue
        raise _Refused(f"construct {name}")


def _check_safe(source: str) -> None:
    tree = _sre_parse.parse(source)
    if tree.getwidth()[0] == 0:
        # after an empty match, stdlib's finditer may match again at the same position
        # (non-empty), RE2's moves on: refuse what could match the empty string
        raise _Refused("the pattern may match the empty string")
    items: list[_Item] = []
    anchored: list[bool] = []
    _flatten(tree, items, anchored)
    variable = [index for index, item in enumerate(items) if item.variable]
    if variable and not anchored and sum(items[i].max for i in variable) > UNANCHORED_SPAN:
        raise _Refused("a repetition in a pattern not anchored at its start ('^')")
    for index in variable:
        repeated = items[index].chars
        for follower in items[index + 1 :]:
            if follower.end_anchor:
                break
            if _overlaps(repeated, follower.chars):
                raise _Refused("a repetition followed by an item that overlaps it")
            if follower.min > 0:
                break


@lru_cache(maxsize=4096)
def proven_linear(source: str) -> str | None:
    """None if stdlib ``re`` runs the Python pattern ``source`` in linear time (the check
    of ``plan_pattern``, on Python syntax: JSON Schema patterns), else why not."""
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            _check_safe(source)
    except _Refused as refused:
        return str(refused)
    except (re.error, RecursionError, OverflowError, Warning) as exc:
        return f"stdlib cannot take it ({exc})"
    return None


@lru_cache(maxsize=4096)
def plan_pattern(pattern: str) -> PatternPlan:
    """Decide the engine of ``pattern``: stdlib ``re`` if proven safe, else RE2."""
    try:
        source = translate(pattern)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            _check_safe(source)
            re.compile(source)
    except _Refused as refused:
        return PatternPlan(RE2, f"RE2: {refused}")
    except (re.error, RecursionError, OverflowError, Warning) as exc:
        return PatternPlan(RE2, f"RE2: stdlib cannot take it ({exc})")
    return PatternPlan(
        STDLIB,
        "stdlib re: proven linear (each repetition repeats one "
        "character and cannot overlap what follows it)",
        source,
    )


def pattern_engine(pattern: str) -> tuple[str, str]:
    """``(engine, reason)``: which engine runs ``pattern`` ("re" or "re2") and why."""
    plan = plan_pattern(pattern)
    return plan.engine, plan.reason


# ------------------------------------------------------------ compiling and running


class PatternError(ValueError):
    """A pattern RE2 cannot compile; the message names the construct."""


class CompiledPattern(Protocol):
    def search(self, text: str) -> Any: ...

    def fullmatch(self, text: str) -> Any: ...

    def finditer(self, text: str) -> Any: ...


_RE2_OPTIONS: Any = None


def _compile_re2(pattern: str) -> CompiledPattern:
    global _RE2_OPTIONS
    import re2  # lazily: most packs never need it at parse time

    if _RE2_OPTIONS is None:
        _RE2_OPTIONS = re2.Options()
        _RE2_OPTIONS.log_errors = False
    try:
        compiled: CompiledPattern = re2.compile(pattern, options=_RE2_OPTIONS)
    except re2.error as exc:
        detail = exc.args[0] if exc.args else exc
        if isinstance(detail, bytes):
            detail = detail.decode("utf-8", "replace")
        raise PatternError(str(detail)) from None
    except (TypeError, ValueError) as exc:
        raise PatternError(str(exc)) from None
    return compiled


@lru_cache(maxsize=4096)
def compile_pattern(pattern: str) -> CompiledPattern:
    """Compile ``pattern`` on stdlib ``re`` when proven linear, else on RE2; raise
    ``PatternError`` saying why if RE2 cannot compile it either."""
    plan = plan_pattern(pattern)
    if plan.source is not None:
        return re.compile(plan.source)
    return _compile_re2(pattern)


def extract_ids(text: str, pattern: str) -> list[str]:
    """The distinct matches of ``pattern`` in ``text``, sorted (the ids an output
    references)."""
    return sorted({m.group(0) for m in compile_pattern(pattern).finditer(text)})


def search(pattern: str, text: str) -> bool:
    return compile_pattern(pattern).search(text) is not None
