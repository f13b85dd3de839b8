"""The report layer's registry: every format it lists for a result type has its writer."""

from __future__ import annotations

import importlib

import pytest

from engine.report import FORMATS, OWN_MODULES, render


@pytest.mark.parametrize(
    ("result_type", "output_format"),
    [(kind, fmt) for kind, formats in FORMATS.items() for fmt in formats],
)
def test_every_listed_format_has_a_writer(result_type: str, output_format: str) -> None:
    own = OWN_MODULES.get(result_type)
    if own is not None:
        assert callable(getattr(importlib.import_module(own), output_format))
    else:
        module = importlib.import_module(f"engine.report.{output_format}")
        assert callable(getattr(module, result_type))


def test_a_format_the_registry_does_not_list_is_refused() -> None:
    with pytest.raises(ValueError, match="no 'sarif' format for 'packs' results"):
        render("packs", "sarif", [])


def test_rules_parse_imports_no_other_format() -> None:
    """`rules parse` starts fastest: writing its result imports only its own format module."""
    import subprocess
    import sys

    code = (
        "import sys; from engine.core.results import ParseResult; from engine.report import render;"
        "render('parse', 'text', ParseResult(ok=True, data={'a': 1}));"
        "render('parse', 'json', ParseResult(ok=True, data={'a': 1}));"
        "print(sorted(m for m in sys.modules if m.startswith('engine.report.')))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert done.stdout.strip() == "['engine.report.parse']", done.stderr
