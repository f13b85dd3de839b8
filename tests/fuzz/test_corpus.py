"""The cases the fuzzing harness found (corpus/*.yaml), replayed in the default suite: each
must run without an internal error within 10 s and 1 GiB. A case of a part of the engine
not fixed yet carries `known_failure: <reason>` and is a strict xfail, so its fix is seen."""

from __future__ import annotations

import pytest
from fuzzkit import corpus_cases, run_in_process


def _params() -> list[object]:
    params: list[object] = []
    for name, case, known in corpus_cases():
        marks = [pytest.mark.xfail(strict=True, reason=known)] if known else []
        params.append(pytest.param(case, id=name, marks=marks))
    return params


@pytest.mark.parametrize("case", _params())
def test_corpus_case(case: object) -> None:
    problem = run_in_process(case)  # type: ignore[arg-type]
    assert problem is None, problem
