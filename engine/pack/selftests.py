"""A pack's own tests (`rules test`): each case is an output and what it must give.

Cases come from three places, all of the pack being tested:

- the pack's ``tests:`` list (inherited from the pack it extends unless it has its own);
- case files ``tests/*.yaml`` in the pack's folder, each a YAML list of cases of the same
  form;
- fixture folders: a file ``tests/<block>/<name>.<ext>`` is the output, the file
  ``tests/<block>/<name>.<ext>.yaml`` beside it says what it must give (a case mapping
  without ``name``, ``block`` and the input). Other folders under ``tests/`` (golden
  prompts, outputs the cases name) are not fixture folders unless they hold such files.

The cases of the packs a pack extends can also be run against it (``compare_with_bases``,
`rules test --with-base`): each base case is run under its base and under the pack, and the
cases whose outcome (passed or failed) or action differs are reported.

A case may name a golden prompt file (``expect.prompt``, relative to the case's folder): the
rendered prompt must equal it; ``update=True`` rewrites golden files instead of comparing.
"""

from __future__ import annotations

import difflib
import json
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from pydantic import ValidationError

from engine.contracts.json_documents import output_documents
from engine.core.errors import EngineError, Position
from engine.core.files import path_problem, read_file_capped, read_file_text
from engine.core.textio import decode_output
from engine.format.findings import Finding, FindingRule
from engine.format.locate import display_path
from engine.format.yamldoc import read_yaml
from engine.pack.cases import PackTest
from engine.pack.compiled import Pack
from engine.pack.inputs import OutputInput
from engine.pack.loaded import check_pack_file, load_pack
from engine.pack.result import CheckResult

PACK_TEST_FAILED = FindingRule(
    "pack-test-failed",
    "A case of the pack's own tests failed (`rules check --tests`).",
    "Run `rules test` for the differences; fix the pack or the case.",
)

PACK_TEST_UNREADABLE = FindingRule(
    "pack-test-unreadable",
    "A case of the pack's own tests cannot be read.",
    "Fix the case file at the position shown.",
)

PACK_TEST_CANNOT_RUN = FindingRule(
    "pack-test-cannot-run",
    "A case of the pack's own tests gives inputs the pack refuses (an unknown or missing "
    "context key, a param that fails its pattern), so `rules test` cannot run it.",
    "Give the case the inputs the command line would need: `vars` as `--var` (block "
    "params and context keys), `context` as `--context`.",
)

PACK_NO_CASES = FindingRule(
    "pack-no-cases",
    "A pack has no test cases (`rules test`: a warning, a failure with --strict).",
    "Add cases: a `tests:` list, case files tests/*.yaml or fixture folders tests/BLOCK/ "
    "(`rules init` writes examples of each).",
    level="warning",
)

BASE_CASE_CHANGED = FindingRule(
    "base-case-changed",
    "A case of a pack this pack extends gives another outcome or action under this pack "
    "(`rules test --with-base`).",
    "Review the change: if it is intended, say so in the pack's own cases.",
    level="warning",
)

CASE_FILE_GLOB = "*.yaml"
SIDE_CAR = ".yaml"
MAX_CASE_INPUT_BYTES = 8 * 1024 * 1024


@dataclass(frozen=True)
class Case:
    """One test case, where it is written, and the folder its files are relative to."""

    spec: PackTest
    position: Position
    folder: Path


@dataclass
class CaseResult:
    """The outcome of one case: passed, or the differences (and a prompt diff)."""

    name: str
    block: str
    position: Position
    problems: list[str] = field(default_factory=list)
    diff: str = ""
    updated: bool = False
    action: str | None = None
    """The action decided (None when the case decides none or could not run)."""

    @property
    def passed(self) -> bool:
        return not self.problems

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "block": self.block,
            "file": self.position.file,
            "line": self.position.line,
            "column": self.position.column,
            "passed": self.passed,
            "problems": self.problems,
            "diff": self.diff,
            "updated": self.updated,
        }


class CaseError(EngineError):
    """A case that cannot be read or run (a usage or pack error, not a failing case)."""


def _validated(data: Any, where: Position, defaults: Mapping[str, Any]) -> PackTest:
    if not isinstance(data, dict):
        raise CaseError(f"{where}: a test case is a mapping (name, block, input, expect)")
    try:
        return PackTest.model_validate({**defaults, **data})
    except ValidationError as exc:
        first = exc.errors()[0]
        at = ".".join(str(part) for part in first["loc"]) or "case"
        raise CaseError(f"{where}: {at}: {first['msg']}") from None


def _case_file(path: Path) -> Iterator[Case]:
    document = read_yaml(path)
    if document.findings:
        first = document.findings[0]
        raise CaseError(f"{first.position}: {first.message}")
    entries = document.data if document.data is not None else []
    if not isinstance(entries, list):
        raise CaseError(f"{path}:1:1: a case file is a YAML list of cases")
    for index, entry in enumerate(entries):
        where = document.source.locate((index,))
        yield Case(_validated(entry, where, {}), where, path.parent)


def _fixture(path: Path, block: str) -> Case:
    sidecar = path.with_name(path.name + SIDE_CAR)
    where = Position(str(sidecar))
    if not sidecar.is_file():
        raise CaseError(
            f"{path}: a fixture needs its expectation in {sidecar.name} beside it "
            "(e.g. `expect: {status: pass, action: PROCEED}`)"
        )
    document = read_yaml(sidecar)
    if document.findings:
        first = document.findings[0]
        raise CaseError(f"{first.position}: {first.message}")
    data = document.data or {}
    if not isinstance(data, dict):
        raise CaseError(f"{where}: an expectation file is a mapping (expect, nonce, vars, ...)")
    defaults = {"name": f"{block}/{path.name}", "block": block, "input_file": path.name}
    return Case(_validated(data, where, defaults), where, path.parent)


def collect_cases(pack: Pack) -> list[Case]:
    """Every case of ``pack``: its ``tests:`` list, case files and fixture folders."""
    cases = [
        Case(spec, pack.source.locate(("tests", index)), pack.folder_of(("tests", index)))
        for index, spec in enumerate(pack.model.tests)
    ]
    folder = pack.root / "tests"
    if folder.is_dir():
        for path in sorted(folder.glob(CASE_FILE_GLOB)):
            cases.extend(_case_file(path))
        for block_dir in sorted(p for p in folder.iterdir() if p.is_dir()):
            if block_dir.name not in pack.model.contracts:
                if not any(p.name.count(".") >= 2 for p in block_dir.glob("*" + SIDE_CAR)):
                    continue  # e.g. golden prompts or outputs the cases name
                raise CaseError(
                    f"{block_dir}: not a block of pack {pack.name!r} "
                    f"(blocks: {', '.join(pack.model.contracts)})"
                )
            for path in sorted(block_dir.iterdir()):
                if path.is_file() and not path.name.endswith((SIDE_CAR, ".prompt")):
                    cases.append(_fixture(path, block_dir.name))
    return cases


def _inside(folder: Path, relative: str, what: str, where: Position) -> Path:
    unusable = path_problem(relative)
    if unusable is not None:
        raise CaseError(f"{where}: {what} {relative[:200]!r} is no usable file name: {unusable}")
    target = (folder / relative).resolve()
    if not target.is_relative_to(folder.resolve()):
        raise CaseError(f"{where}: {what} {relative!r} is outside the case's folder")
    return target


def _input(case: Case) -> bytes | None:
    spec = case.spec
    if spec.input is not None:
        return spec.input.encode("utf-8")
    assert spec.input_file is not None
    path = _inside(case.folder, spec.input_file, "input_file", case.position)
    if not path.exists():
        return None  # the output file is missing: the contract decides (FILE_MISSING)
    try:
        data, more = read_file_capped(path, MAX_CASE_INPUT_BYTES)
    except OSError as exc:  # a FIFO (which would block), a folder, no permission
        raise CaseError(
            f"{case.position}: input_file {spec.input_file}: {exc.strerror or exc}"
        ) from None
    if more:
        raise CaseError(f"{case.position}: {spec.input_file} is over {MAX_CASE_INPUT_BYTES} bytes")
    return data


def _differs(what: str, expected: Any, got: Any) -> str:
    shown = json.dumps(got, ensure_ascii=False, sort_keys=True, default=str)
    wanted = json.dumps(expected, ensure_ascii=False, sort_keys=True, default=str)
    return f"{what}: expected {wanted}, got {shown}"


def _golden_text(golden: Path) -> str:
    """A golden prompt file (regular, checked on the open file; at most the input bound)."""
    try:
        return read_file_text(golden, MAX_CASE_INPUT_BYTES)
    except (OSError, UnicodeDecodeError) as exc:
        raise CaseError(f"{golden}: {getattr(exc, 'strerror', None) or exc}") from None


def _golden(case: Case, prompt: str, result: CaseResult, update: bool) -> None:
    """Compare ``prompt`` with the case's golden file, or write it with ``update``."""
    name = case.spec.expect.prompt
    assert name is not None
    golden = _inside(case.folder, name, "prompt", case.position)
    if golden.exists() and not golden.is_file():  # a FIFO would block the read or write
        result.problems.append(f"prompt: golden file {name} is not a regular file")
    elif update:
        if not golden.is_file() or _golden_text(golden) != prompt:
            golden.parent.mkdir(parents=True, exist_ok=True)
            golden.write_text(prompt, encoding="utf-8")
            result.updated = True
    elif not golden.is_file():
        result.problems.append(f"prompt: golden file {name} does not exist (run with --update)")
    else:
        wanted = _golden_text(golden)
        if wanted != prompt:
            result.problems.append(f"prompt: differs from {name}")
            result.diff = "".join(
                difflib.unified_diff(
                    wanted.splitlines(keepends=True),
                    prompt.splitlines(keepends=True),
                    fromfile=f"{name} (golden)",
                    tofile="rendered",
                )
            )


def _compare(result: CaseResult, checks: list[tuple[str, Any, Any]]) -> None:
    for what, expected, got in checks:
        if expected is not None and expected != got:
            result.problems.append(_differs(what, expected, got))


def run_gate_case(pack: Pack, case: Case, update: bool = False) -> CaseResult:
    """Run the case's quality gate on the JSON documents of its input; compare."""
    spec, expect = case.spec, case.spec.expect
    assert spec.gate is not None
    result = CaseResult(spec.name, spec.gate, case.position)
    output = _input(case)
    name = spec.input_file or "output"
    documents, error = output_documents(name, decode_output(output or b""))
    outcome = pack.gate(
        spec.gate,
        documents,
        retry=spec.retry,
        context=spec.context,
        now=spec.now,
        input_errors=[error] if error else [],
    )
    gate = outcome.result
    _compare(
        result,
        [
            ("valid", expect.valid, gate.valid),
            ("errors", expect.errors, list(gate.errors)),
            ("action", expect.action, gate.action),
        ],
    )
    result.action = gate.action
    if expect.prompt is not None:
        _golden(case, outcome.reprompt or "", result, update)
    return result


def case_inputs(pack: Pack, spec: PackTest) -> tuple[dict[str, str], dict[str, Any]]:
    """The case's block params and checked context: its ``vars`` split as the command
    line splits ``--var`` (block params, the rest context keys), its ``context`` typed."""
    assert spec.block is not None
    return pack.split_inputs(spec.block, spec.context, spec.vars)


def run_case(pack: Pack, case: Case, update: bool = False) -> CaseResult:
    """Evaluate, decide and (when a prompt is due) render the case's output; compare."""
    spec, expect = case.spec, case.spec.expect
    if spec.gate is not None:
        return run_gate_case(pack, case, update)
    assert spec.block is not None
    result = CaseResult(spec.name, spec.block, case.position)
    params, context = case_inputs(pack, spec)
    given = OutputInput(
        spec.block,
        _input(case),
        spec.nonce,
        params,
        context,
        path=spec.input_file,
        error=spec.error,
    )
    verdict = given.verdict(pack, context)
    decision = given.decide(pack, verdict, context, attempt=spec.attempt)
    text = decode_output(given.output) if given.output is not None else ""
    _compare(
        result,
        [
            ("ok", expect.ok, verdict.status != "fail"),
            ("status", expect.status, verdict.status),
            ("failure", expect.failure, verdict.failure_type),
            ("message", expect.message, verdict.error),
            ("warnings", expect.warnings, verdict.warnings),
            ("action", expect.action, decision.action),
            ("rule", expect.rule, decision.rule),
        ],
    )
    result.action = decision.action
    if "data" in expect.model_fields_set and expect.data != verdict.data:
        result.problems.append(_differs("data", expect.data, verdict.data))
    data = verdict.data if isinstance(verdict.data, dict) else {}
    for key, wanted in (expect.data_includes or {}).items():
        got = data.get(key)
        if (wanted is None and key in data) or (wanted is not None and got != wanted):
            result.problems.append(_differs(f"data.{key}", wanted, got))
    if expect.prompt is not None:
        prompt = ""
        if decision.template is not None:
            prompt = pack.render(
                verdict,
                decision,
                output=text,
                nonce=spec.nonce,
                vars=params,
                context=context,
            )
        _golden(case, prompt, result, update)
    return result


def unrunnable_cases(pack: Pack) -> list[Finding]:
    """A finding for each case whose inputs the pack refuses, and for case files that
    cannot be read: what `rules test` would stop at, found without running a case."""
    try:
        cases = collect_cases(pack)
    except EngineError as exc:
        return [PACK_TEST_UNREADABLE.at(str(exc), Position(display_path(pack.root / "tests")))]
    findings = []
    for case in cases:
        if case.spec.block is None:
            continue  # a gate case: its documents are checked when it runs
        try:
            case_inputs(pack, case.spec)
        except EngineError as exc:
            findings.append(
                PACK_TEST_CANNOT_RUN.at(f"case {case.spec.name!r} cannot run: {exc}", case.position)
            )
    return findings


def check_pack_with_cases(pack_file: Path, locked: bool | None = None) -> CheckResult:
    """``engine.pack.loaded.check_pack_file``, with a finding for each of a clean pack's
    test cases that cannot run."""
    result = check_pack_file(pack_file, locked)
    if not result.ok or result.model is None or result.tree is None:
        return result
    pack = Pack(
        result.model, pack_file.resolve().parent, result.tree.source, files=tuple(result.tree.files)
    )
    findings = unrunnable_cases(pack)
    return replace(result, findings=[*result.findings, *findings]) if findings else result


def run_pack_tests(pack: Pack, update: bool = False) -> list[CaseResult]:
    """Every case of ``pack``, in order; CaseError when a case cannot be read."""
    results = []
    for case in collect_cases(pack):
        try:
            results.append(run_case(pack, case, update))
        except CaseError:
            raise
        except EngineError as exc:
            raise CaseError(f"{case.position}: case {case.spec.name!r}: {exc}") from None
    return results


@dataclass(frozen=True)
class BaseCaseChange:
    """A case of a base pack whose outcome or action differs under the extending pack."""

    case: Case
    base: CaseResult
    pack: CaseResult

    @property
    def expects_action(self) -> bool:
        return self.case.spec.expect.action is not None

    def to_json(self) -> dict[str, Any]:
        return {
            "name": self.base.name,
            "block": self.base.block,
            "file": self.base.position.file,
            "line": self.base.position.line,
            "column": self.base.position.column,
            "base": {"passed": self.base.passed, "action": self.base.action},
            "pack": {
                "passed": self.pack.passed,
                "action": self.pack.action,
                "problems": self.pack.problems,
            },
        }


@dataclass(frozen=True)
class BaseRun:
    """The cases of one base pack run under the extending pack: how many, what changed."""

    name: str
    version: str
    cases: int
    changes: list[BaseCaseChange]
    skipped: str = ""
    """Why the base's cases were not run (a YAML file that is not a whole pack)."""

    def to_json(self) -> dict[str, Any]:
        return {
            "pack": self.name,
            "version": self.version,
            "cases": self.cases,
            "changed": [change.to_json() for change in self.changes],
            **({"skipped": self.skipped} if self.skipped else {}),
        }


def _changed(case: Case, base: CaseResult, pack: CaseResult) -> bool:
    """The pack changes the case: passed under one and failed under the other, or (for a
    case that expects an action) another action decided."""
    if base.passed != pack.passed:
        return True
    return case.spec.expect.action is not None and base.action != pack.action


def _run_under(pack: Pack, case: Case) -> CaseResult:
    """A base case run under ``pack``: a case the pack cannot run (a block it removed, a
    parameter it renamed) is a failed case saying why."""
    try:
        return run_case(pack, case)
    except EngineError as exc:
        block = case.spec.gate or case.spec.block or ""
        return CaseResult(case.spec.name, block, case.position, [f"cannot run: {exc}"])


def compare_with_bases(pack: Pack, locked: bool | None = None) -> list[BaseRun]:
    """Run the cases of every pack ``pack`` extends (its whole `extends` chain, builtin
    packs included, each once) under its base and under ``pack``; keep the changed ones.
    A base that cannot be loaded alone (a YAML file holding part of a pack) has no cases
    of its own to run: it is listed as skipped, with the reason."""
    runs = []
    for base_file in pack.files[1:]:
        try:
            base = load_pack(base_file, locked=locked)
        except EngineError as exc:
            reason = f"not a pack that loads alone: {exc}"
            runs.append(BaseRun(display_path(base_file), "", 0, [], reason))
            continue
        cases = collect_cases(base)
        changes = []
        for case in cases:
            try:
                under_base = run_case(base, case)
            except CaseError:
                raise
            except EngineError as exc:
                raise CaseError(f"{case.position}: case {case.spec.name!r}: {exc}") from None
            under_pack = _run_under(pack, case)
            if _changed(case, under_base, under_pack):
                changes.append(BaseCaseChange(case, under_base, under_pack))
        runs.append(BaseRun(base.name, base.model.version, len(cases), changes))
    return runs
