"""`rules test`: run packs' own test cases (engine.pack.selftests)."""

from __future__ import annotations

import json
import sys
from dataclasses import replace
from typing import TYPE_CHECKING

import click

from engine.cli.common import EXIT_FINDINGS, EXIT_OK, UsageFailure
from engine.core.errors import EngineError, Position
from engine.format.findings import Finding
from engine.pack.result import CheckResult
from engine.pack.selftests import PACK_TEST_FAILED, PACK_TEST_UNREADABLE

if TYPE_CHECKING:
    from engine.pack.selftests import CaseResult

TEST_FORMATS = ("text", "json", "github", "junit", "sarif")


@click.command("test")
@click.argument("paths", nargs=-1)
@click.option("--update", is_flag=True, help="Rewrite golden prompt files instead of comparing.")
@click.option(
    "--min-pass-rate",
    type=click.FloatRange(0, 1),
    default=1.0,
    show_default=True,
    help="Exit 0 when at least this share of the cases pass (over all packs).",
)
@click.option("--format", "output_format", type=click.Choice(TEST_FORMATS), default="text")
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
        runs, versions = _run_packs(list(paths) or ["rules"], update)
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None
    results = [r for _, rs in runs for r in rs]
    passed = sum(r.passed for r in results)
    rate = passed / len(results) if results else 1.0
    if output_format == "json":
        body = {
            "packs": [
                {"pack": name, "version": versions[name], "cases": [r.to_json() for r in rs]}
                for name, rs in runs
            ],
            "total": len(results),
            "passed": passed,
            "failed": len(results) - passed,
            "pass_rate": rate,
        }
        click.echo(json.dumps(body, ensure_ascii=False, indent=2))
    elif output_format in ("junit", "sarif"):
        from engine.cli.ci_formats import CiCase, format_junit, format_sarif

        cases = [
            CiCase(f"rules test {name}", r.name, case_findings(r)) for name, rs in runs for r in rs
        ]
        click.echo((format_junit if output_format == "junit" else format_sarif)(cases), nl=False)
    elif output_format == "github":
        for result in results:
            if not result.passed:
                where = result.position
                message = "; ".join(result.problems).replace("\n", "%0A")
                click.echo(
                    f"::error file={where.file},line={where.line},col={where.column},"
                    f"title=rules test::{result.name}: {message}"
                )
    else:
        for name, rs in runs:
            for result in rs:
                mark = "ok  " if result.passed else "FAIL"
                note = " (golden prompt written)" if result.updated else ""
                click.echo(f"{mark} {name}: {result.name}{note}")
                if not result.passed:
                    click.echo(f"     {result.position}")
                    for problem in result.problems:
                        click.echo(f"     {problem}")
                    if result.diff:
                        click.echo("     " + result.diff.replace("\n", "\n     ").rstrip())
        click.echo(
            f"{len(runs)} pack{'s' if len(runs) != 1 else ''}, {len(results)} case"
            f"{'s' if len(results) != 1 else ''}: {passed} passed, "
            f"{len(results) - passed} failed"
        )
    sys.exit(EXIT_OK if rate >= min_pass_rate else EXIT_FINDINGS)


def _run_packs(
    targets: list[str], update: bool = False
) -> tuple[list[tuple[str, list[CaseResult]]], dict[str, str]]:
    """Every case of every pack ``targets`` name, by pack; and each pack's version."""
    from engine.format.locate import find_pack_files
    from engine.pack.loaded import load_pack
    from engine.pack.selftests import run_pack_tests

    runs = []
    versions: dict[str, str] = {}
    for pack_file in [f for target in targets for f in find_pack_files(target)]:
        pack = load_pack(pack_file)
        runs.append((pack.name, run_pack_tests(pack, update=update)))
        versions[pack.name] = pack.model.version
    return runs, versions


def case_findings(result: CaseResult) -> list[Finding]:
    """A failing case as one finding at the case (rule `pack-test-failed`)."""
    if result.passed:
        return []
    message = f"test {result.name!r} failed: " + "; ".join(result.problems)
    return [PACK_TEST_FAILED.at(message, result.position, "run `rules test` for the diff")]


def test_findings(results: list[CheckResult], targets: list[str]) -> list[CheckResult]:
    """``results`` with each pack's failing test cases added as findings (`--tests`); a
    case that cannot be read is a `pack-test-unreadable` finding of its pack."""
    from engine.format.locate import find_pack_files
    from engine.pack.loaded import load_pack
    from engine.pack.selftests import run_pack_tests

    out = []
    for result in results:
        findings = list(result.findings)
        try:
            for pack_file in find_pack_files(result.target):
                for case in run_pack_tests(load_pack(pack_file)):
                    findings.extend(case_findings(case))
        except EngineError as exc:
            findings.append(PACK_TEST_UNREADABLE.at(str(exc), Position(result.target)))
        out.append(replace(result, findings=findings))
    return out
