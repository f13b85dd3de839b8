"""`rules test`: run packs' own test cases (engine.pack.selftests)."""

from __future__ import annotations

import sys
from dataclasses import replace
from typing import TYPE_CHECKING

import click

from engine.cli.common import EXIT_FINDINGS, EXIT_OK, UsageFailure, locked_setting
from engine.cli.options import format_option
from engine.cli.types import FiniteFloat
from engine.core.errors import EngineError, Position
from engine.format.locate import find_pack_files
from engine.pack.loaded import load_pack
from engine.pack.result import CheckResult
from engine.pack.selftests import PACK_TEST_UNREADABLE, run_pack_tests
from engine.report import render
from engine.report.cases import PackTestRuns, case_findings

if TYPE_CHECKING:
    from engine.pack.selftests import CaseResult


@click.command("test")
@click.argument("paths", nargs=-1)
@click.option("--update", is_flag=True, help="Rewrite golden prompt files instead of comparing.")
@click.option(
    "--min-pass-rate",
    type=FiniteFloat(0, 1),
    default=1.0,
    show_default=True,
    help="Exit 0 when at least this share of the cases pass (over all packs).",
)
@format_option("test")
def test_command(
    paths: tuple[str, ...], update: bool, min_pass_rate: float, output_format: str
) -> None:
    """Run the test cases of rulepacks: each output must give its expected verdict,
    failure, message, data, warnings, action and (golden file) prompt.

    PATHS are pack folders, pack files, folders of packs or builtin:NAME (default:
    ./rules/). A pack's cases are its `tests:` list, its case files tests/*.yaml (YAML
    lists of cases) and its fixture folders: tests/BLOCK/NAME.EXT is an output and
    tests/BLOCK/NAME.EXT.yaml beside it what it must give.

    \b
    Examples:
      rules test                          # every pack under ./rules/
      rules test rules/my-pack --update   # (re)write the golden prompts
      rules test builtin:sentinel --format json
      rules test --min-pass-rate 0.95 rules/

    \b
    A case:
      - name: a malformed answer is repaired once
        block: ANSWER
        input_file: outputs/bad.txt     # or input: "..."
        nonce: 4F2C9A
        vars: {question: Q1}
        expect: {status: fail, failure: PARSE_ERROR, action: REPAIR,
                 prompt: prompts/bad.repair.md}

    \b
    Exit status: 0 all pass (or the pass rate is met), 1 failures, 2 usage or pack error.
    """
    try:
        runs = _run_packs(list(paths) or ["rules"], update)
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None
    click.echo(render("test", output_format, runs), nl=False)
    sys.exit(EXIT_OK if runs.pass_rate >= min_pass_rate else EXIT_FINDINGS)


def _run_packs(targets: list[str], update: bool = False) -> PackTestRuns:
    """Every case of every pack ``targets`` name, by pack; and each pack's version."""
    runs: list[tuple[str, list[CaseResult]]] = []
    versions: dict[str, str] = {}
    for pack_file in [f for target in targets for f in find_pack_files(target)]:
        pack = load_pack(pack_file, locked=locked_setting())
        runs.append((pack.name, run_pack_tests(pack, update=update)))
        versions[pack.name] = pack.model.version
    return PackTestRuns(runs, versions)


def test_findings(results: list[CheckResult], targets: list[str]) -> list[CheckResult]:
    """``results`` with each pack's failing test cases added as findings (`--tests`); a
    case that cannot be read is a `pack-test-unreadable` finding of its pack."""
    out = []
    for result in results:
        findings = list(result.findings)
        try:
            for pack_file in find_pack_files(result.target):
                for case in run_pack_tests(load_pack(pack_file, locked=locked_setting())):
                    findings.extend(case_findings(case))
        except EngineError as exc:
            findings.append(PACK_TEST_UNREADABLE.at(str(exc), Position(result.target)))
        out.append(replace(result, findings=findings))
    return out
