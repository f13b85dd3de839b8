"""Conditions run as Python closures (engine.sandbox.conditions) compute what Jinja computes: every
shipped condition is native, and over generated expressions and values a closure that
finishes gives Jinja's value while Jinja raises nothing."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from jinja2 import Undefined

from conftest import REPO
from engine.sandbox.conditions import native_condition
from engine.sandbox.environment import ENVIRONMENT, compile_condition


def _shipped_conditions() -> list[str]:
    found: list[str] = []

    def walk(value: Any) -> None:
        if isinstance(value, dict):
            for key, item in value.items():
                if key in ("when", "where", "recommended") and isinstance(item, str):
                    found.append(item)
                walk(item)
        elif isinstance(value, list):
            for item in value:
                walk(item)

    for path in sorted(Path(REPO / "rules").rglob("*.yaml")):
        walk(yaml.safe_load(path.read_text(encoding="utf-8")))
    return sorted(set(found))


SHIPPED = _shipped_conditions()


def test_the_shipped_packs_have_conditions() -> None:
    assert len(SHIPPED) >= 8


@pytest.mark.parametrize("expression", SHIPPED)
def test_every_shipped_condition_runs_natively(expression: str) -> None:
    assert native_condition(ENVIRONMENT, expression) is not None


def test_a_guard_gives_jinjas_answers() -> None:
    guard = compile_condition("output | length < 50")
    assert guard(output="short") is True
    assert guard(output="x" * 60) is False
    crash = compile_condition("error is search('Traceback [(]most recent call last[)]')")
    assert crash(error="Traceback (most recent call last):\n  ...") is True
    assert crash(error="expected exactly 1 block") is False


def test_what_the_closure_cannot_finish_jinja_reports() -> None:
    from engine.core.errors import ConditionError

    with pytest.raises(ConditionError, match="'missing' is undefined"):
        compile_condition("missing | length > 1")(output="x")
    with pytest.raises(ConditionError, match="'<' not supported between instances"):
        compile_condition("attempt < 'x'")(attempt=1)
    assert compile_condition("item.absent")(item={}) is None  # Jinja: undefined -> None
    assert compile_condition("missing is defined")() is False


NAMES = ["a", "b", "c", "missing", "a.k", "a['k']", "b[0]", "c.upper"]
CONSTANTS = ["0", "1", "-1", "50", "'x'", "'abc'", "true", "false", "none", "[1, 2]", "('x', 1)"]
ATOMS = st.sampled_from([*NAMES, *CONSTANTS])
FILTERS = st.sampled_from(["length", "lower", "upper", "first", "string", "int", "abs", "list"])
TESTS = st.sampled_from(
    ["search('a')", "fullmatch('[a-z]+')", "defined", "none", "string", "number", "sameas 1"]
)
OPS = st.sampled_from(["==", "!=", "<", "<=", ">", ">=", "in", "not in"])


def _expressions() -> st.SearchStrategy[str]:
    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        return st.one_of(
            st.builds(lambda e, f: f"({e}) | {f}", inner, FILTERS),
            st.builds(lambda e, t: f"({e}) is {t}", inner, TESTS),
            st.builds(lambda e, t: f"({e}) is not {t}", inner, TESTS),
            st.builds(lambda x, op, y: f"({x}) {op} ({y})", inner, OPS, inner),
            st.builds(lambda x, y, z: f"({x}) < ({y}) <= ({z})", inner, inner, inner),
            st.builds(lambda x, y: f"({x}) and ({y})", inner, inner),
            st.builds(lambda x, y: f"({x}) or ({y})", inner, inner),
            st.builds(lambda x: f"not ({x})", inner),
            st.builds(lambda x: f"-({x})", inner),
        )

    return st.recursive(ATOMS, extend, max_leaves=6)


VALUES = st.one_of(
    st.integers(-3, 60),
    st.text(alphabet="abcxyzA ", max_size=5),
    st.lists(st.integers(0, 3), max_size=3),
    st.dictionaries(st.sampled_from(["k", "upper"]), st.integers(0, 3), max_size=2),
    st.none(),
    st.booleans(),
)


def _outcome(function: Any, variables: dict[str, Any]) -> tuple[str, Any]:
    from engine.core.errors import ConditionError

    try:
        return "value", function(**variables)
    except ConditionError as exc:  # a compiled condition's: Jinja's error, named
        return "error", exc.reason
    except Exception as exc:  # which error is compared
        return "error", str(exc) or type(exc).__name__


@pytest.mark.heavy
@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expression=_expressions(), a=VALUES, b=VALUES, c=VALUES)
def test_a_closure_that_finishes_gives_jinjas_value(
    expression: str, a: Any, b: Any, c: Any
) -> None:
    native = native_condition(ENVIRONMENT, expression)
    jinja = ENVIRONMENT.compile_expression(expression)
    variables = {"a": a, "b": b, "c": c}
    expected = _outcome(jinja, variables)
    assert _outcome(compile_condition(expression), variables) == expected
    if native is None:
        return
    try:
        value = native(variables)
    except Exception:  # the fallback (checked above) answers
        return
    assert expected[0] == "value", (expression, variables, value, expected)
    assert expected[1] == (None if isinstance(value, Undefined) else value)
