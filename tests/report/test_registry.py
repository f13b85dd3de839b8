"""The report layer's registry: every format it lists for a result type has its writer."""

from __future__ import annotations

import importlib

import pytest

from engine.report import FORMATS, render


@pytest.mark.parametrize(
    ("result_type", "output_format"),
    [(kind, fmt) for kind, formats in FORMATS.items() for fmt in formats],
)
def test_every_listed_format_has_a_writer(result_type: str, output_format: str) -> None:
    module = importlib.import_module(f"engine.report.{output_format}")
    assert callable(getattr(module, result_type))


def test_a_format_the_registry_does_not_list_is_refused() -> None:
    with pytest.raises(ValueError, match="no 'sarif' format for 'packs' results"):
        render("packs", "sarif", [])
