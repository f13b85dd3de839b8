"""`rules test`: run packs' own test cases (engine.pack.selftests)."""

from __future__ import annotations

import os
import sys
from dataclasses import replace

import click

from engine.cli.common import EXIT_FINDINGS, EXIT_OK, UsageFailure, locked_setting
from engine.cli.options import format_option
from engine.cli.types import FiniteFloat
from engine.core.errors import EngineError, Position
from engine.format.locate import display_path, find_pack_files
from engine.format.project import no_default_packs
from engine.pack.loaded import load_pack
from engine.pack.result import CheckResult
from engine.pack.selftests import PACK_TEST_UNREADABLE, compare_with_bases, run_pack_tests
from engine.report import render
from engine.report.cases import PackTestRuns, case_findings


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
@click.option(
    "--with-base",
    is_flag=True,
    help="Also run the cases of the packs each pack extends (its whole extends chain, "
    "builtin packs included) under the pack, and list the ones it changes.",
)
@click.option(
    "--strict",
    is_flag=True,
    help="A pack without cases, and (--with-base) a base case the pack changes, fail the "
    "run (exit 1) instead of being warnings.",
)
@format_option(
    "test", default=None, help="Output format [default: text; github when GITHUB_ACTIONS=true]."
)
def test_command(
    paths: tuple[str, ...],
    update: bool,
    min_pass_rate: float,
    with_base: bool,
    strict: bool,
    output_format: str | None,
) -> None:
    """Run the test cases of rulepacks: each output must give its expected verdict,
    failure, message, data, warnings, action and (golden file) prompt.

    PATHS are pack folders, pack files, folders of packs or builtin:NAME (default:
    ./rules/). A pack's cases are its `tests:` list, its case files tests/*.yaml (YAML
    lists of cases) and its fixture folders: tests/BLOCK/NAME.EXT is an output and
    tests/BLOCK/NAME.EXT.yaml beside it what it must give. A pack without cases is a
    warning (on stderr, and in every format); --strict makes it a failure.

    With --with-base, the cases of every pack a pack extends run twice, under their own
    pack and under the extending one; a base case is listed, apart from the pack's own
    results, when the pack changes it: passed under the base and failed under the pack
    (or the other way), or, for a case expecting an action, another action decided. A
    change is what whoever approves the pack needs to see, not an error: it does not change
    the exit status unless --strict.

    \b
    Examples:
      rules test                          # every pack under ./rules/
      rules test rules/my-pack --update   # (re)write the golden prompts
      rules test builtin:sentinel --format json
      rules test --min-pass-rate 0.95 rules/
      rules test rules/my-pack --with-base   # which base behaviours my pack changes
      rules test --strict --format junit rules/ > rules-test.xml

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
    Exit status: 0 all pass (or the pass rate is met), 1 failures (and with --strict a
    pack without cases or a changed base case), 2 usage or pack error.
    """
    try:
        if not paths and not os.path.exists("rules"):
            raise UsageFailure(no_default_packs("test"))
        runs = _run_packs(list(paths) or ["rules"], update, with_base, strict)
    except EngineError as exc:
        raise UsageFailure(str(exc)) from None
    for name in runs.without_cases:
        finding = runs.no_cases_finding(name)
        click.echo(f"{finding.level}: {finding.message} ({finding.position.file})", err=True)
    click.echo(render("test", output_format or _default_format(), runs), nl=False)
    failed = runs.pass_rate < min_pass_rate or runs.failed
    sys.exit(EXIT_FINDINGS if failed else EXIT_OK)


def _default_format() -> str:
    """Annotations in GitHub Actions, as `rules check` writes there; text elsewhere."""
    return "github" if os.environ.get("GITHUB_ACTIONS") == "true" else "text"


def _run_packs(
    targets: list[str], update: bool = False, with_base: bool = False, strict: bool = False
) -> PackTestRuns:
    """Every case of every pack ``targets`` name, by pack; each pack's version and file;
    with ``with_base`` the cases of its bases run under it."""
    runs = PackTestRuns([], {}, strict=strict)
    for pack_file in [f for target in targets for f in find_pack_files(target)]:
        pack = load_pack(pack_file, locked=locked_setting())
        runs.runs.append((pack.name, run_pack_tests(pack, update=update)))
        runs.versions[pack.name] = pack.model.version
        runs.files[pack.name] = display_path(pack_file)
        if with_base:
            runs.bases[pack.name] = compare_with_bases(pack, locked_setting())
    return runs


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
