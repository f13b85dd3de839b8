"""`rules check` (and the `rules-check` script): check packs, or list the rule catalogue."""

from __future__ import annotations

import os
import sys

import click

from engine.cli.common import (
    EXIT_FINDINGS,
    EXIT_OK,
    UsageFailure,
    locked_setting,
    refuse_broken_plugins,
    remember_locked,
)
from engine.core.errors import EngineError
from engine.format.project import no_default_packs
from engine.pack.cache import check_packs_remembered as check_packs
from engine.report import formats, render


def _default_format() -> str:
    return "github" if os.environ.get("GITHUB_ACTIONS") == "true" else "text"


@click.command("check")
@click.argument("paths", nargs=-1)
@click.option(
    "--format",
    "output_format",
    type=click.Choice(formats("check")),
    default=None,
    help="Output format [default: text; github when GITHUB_ACTIONS=true].",
)
@click.option("--tests", "with_tests", is_flag=True, help="Also run the packs' own tests.")
@click.option(
    "--locked/--no-locked",
    default=None,
    help="Git pack references need rules.lock entries [default: when CI=true].",
)
@click.option(
    "--list-rules", is_flag=True, help="Print every finding id with what it means and the fix."
)
@click.option(
    "--prove",
    is_flag=True,
    help="Also prove what each policy can spend: every failure type ends in a final "
    "action, no loop without a bound, no block wanting more calls than its budgets allow "
    "(`rules explain` shows the worst-case figures).",
)
def check_command(
    paths: tuple[str, ...],
    output_format: str | None,
    with_tests: bool,
    locked: bool | None,
    list_rules: bool,
    prove: bool,
) -> None:
    """Check rulepacks: format, references, files, templates, patterns, expressions.

    PATHS are pack folders, pack files, folders of packs or builtin:NAME
    (default: ./rules/). Findings print as file:line:col: [level] message (rule).

    \b
    Examples:
      rules check                       # every pack under ./rules/
      rules check rules/my-pack         # one pack folder
      rules check builtin:core --format json
      rules check --tests --format junit rules/ > rules-check.xml
      rules check --format sarif rules/ > rules.sarif   # code scanning
      rules-check --format github rules/   # annotations in GitHub Actions
      rules check --prove rules/        # and what each policy can spend
      rules check --list-rules          # the rule catalogue

    \b
    Exit status: 0 no errors, 1 errors found (or a failing test with --tests),
    2 usage or pack error.
    """
    if list_rules:
        _list_rules(output_format or "text")
        return
    remember_locked(locked)
    if not paths and not os.path.exists("rules"):
        raise UsageFailure(no_default_packs("check"))
    try:
        results = check_packs(list(paths) or ["rules"], locked=locked_setting())
        if prove:
            # Deferred: only `check --prove` loads and compiles each pack; 0.3 s of imports
            # a remembered `rules check` does not pay (python -X importtime).
            from engine.pack.prove import with_proofs

            results = with_proofs(results, list(paths) or ["rules"])
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None
    if with_tests and all(r.ok for r in results):
        # Deferred: only `check --tests` runs the packs' own tests; they cost a remembered
        # `rules check` 0.5 s of imports (python -X importtime).
        from engine.cli.packtest import test_findings

        results = test_findings(results, list(paths) or ["rules"])
    click.echo(render("check", output_format or _default_format(), results), nl=False)
    sys.exit(EXIT_OK if all(r.ok for r in results) else EXIT_FINDINGS)


def _list_rules(output_format: str) -> None:
    # Deferred: the catalogue imports every kind's and section's checks, 0.2 s that a
    # remembered `rules check` does not pay (python -X importtime).
    from engine.pack.catalogue import rule_catalogue

    try:  # a plugin that cannot be loaded (or redefines a rule) is named, not a traceback
        RULES = rule_catalogue()
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None
    refuse_broken_plugins()

    shown = (
        output_format if output_format in formats("rules") else "text"
    )  # as before: CI formats list as text
    click.echo(render("rules", shown, RULES), nl=False)
