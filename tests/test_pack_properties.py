"""Property (issue 13): whatever a pack file holds, within the format's shape, `rules check`
returns findings; it never raises and never hangs. Packs are built from the format's own
section names, random values, and template and condition text from hostile fragments."""

from __future__ import annotations

import tempfile
from pathlib import Path

import pytest
import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from engine.pack.loaded import check_pack_file

SECTIONS = [
    "rulepack",
    "version",
    "requires",
    "extends",
    "severities",
    "failure_types",
    "contracts",
    "triggers",
    "templates",
    "hints",
    "examples",
    "rate_limits",
    "gates",
    "context",
    "tests",
]
FRAGMENTS = [
    "{{ ",
    " }}",
    "{% for i in range(",
    "100000",
    ") %}",
    "{% endfor %}",
    "x",
    "'a' * ",
    "10**10",
    "__class__",
    ".",
    "|center(",
    "|format(",
    "'%*s'",
    "(",
    ")",
    "[",
    "]",
    "output",
    "error",
    " and ",
    " not ",
    "{% include 'a' %}",
    "lipsum()",
    "\x00",
    "\r",
    "\ufeff",
    "{#",
    "#}",
    "{% macro f() %}{{ f() }}",
]
SNIPPET = st.lists(st.sampled_from(FRAGMENTS), max_size=12).map("".join)
SCALAR = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-5, 10**12),
    SNIPPET,
    st.sampled_from(
        [
            "builtin:core",
            "builtin:sentinel",
            "../x",
            "t.j2",
            "kind",
            "text",
            "sentinel",
            "json",
            "markdown",
        ]
    ),
)
VALUE = st.recursive(
    SCALAR,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.dictionaries(
            st.sampled_from(
                [
                    "kind",
                    "on",
                    "when",
                    "file",
                    "purpose",
                    "template",
                    "max_attempts",
                    "skip_when",
                    "name",
                    "doc",
                    "t",
                ]
            )
            | SNIPPET,
            inner,
            max_size=3,
        ),
    ),
    max_leaves=12,
)
PACK = st.fixed_dictionaries(
    {
        "rulepack": st.just("p"),
        # A template and a condition that reach the template and expression checks.
        "templates": st.just({"rep": {"file": "t.j2", "purpose": "repair"}}),
        "triggers": st.fixed_dictionaries(
            {
                "doc": st.fixed_dictionaries(
                    {
                        "on": st.just(["WRONG_FORMAT"]),
                        "template": st.just("rep"),
                        "skip_when": st.lists(
                            st.fixed_dictionaries({"name": st.just("g"), "when": SNIPPET}),
                            max_size=1,
                        ),
                    }
                )
            }
        ),
    },
    optional={name: VALUE for name in SECTIONS[1:] if name not in ("templates", "triggers")},
)
FAST = settings(max_examples=40, deadline=2000, suppress_health_check=[HealthCheck.too_slow])


@pytest.mark.slow  # about 4 s
@FAST
@given(pack=PACK, template=SNIPPET)
def test_random_packs_are_checked_never_crash(pack: dict[str, object], template: str) -> None:
    with tempfile.TemporaryDirectory() as folder:
        root = Path(folder)
        (root / "t.j2").write_text(template, encoding="utf-8")
        pack_file = root / "pack.yaml"
        pack_file.write_text(yaml.safe_dump(pack, allow_unicode=True), encoding="utf-8")
        result = check_pack_file(pack_file)
    assert result.findings is not None
