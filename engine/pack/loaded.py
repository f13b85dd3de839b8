"""The public entry points: find, check and load rulepacks."""

from __future__ import annotations

from pathlib import Path

from engine.contracts.registry import resolve_contracts
from engine.core.errors import PackError, Position
from engine.format.findings import Finding, FindingRule
from engine.format.loader import load_pack_tree
from engine.format.locate import display_path, find_one_pack_file, find_pack_files
from engine.format.packfolder import folder_findings
from engine.format.semantics import PackChecker
from engine.format.validate import validate_tree
from engine.pack.compiled import Pack
from engine.pack.plugin_use import plugin_findings
from engine.pack.result import CheckResult
from engine.pack.sections import rulepack_model, sections, template_variables

PACK_INVALID = FindingRule(
    "pack-invalid",
    "The pack could not be loaded.",
    "Run `rules check` on it and fix the errors it lists.",
)


def check_pack_file(pack_file: Path, locked: bool | None = None) -> CheckResult:
    """Load, validate and check one pack; every problem is a finding, nothing raises.
    ``locked``: every git reference needs a rules.lock entry (default: when CI=true)."""
    tree = load_pack_tree(pack_file, locked)
    findings = list(tree.findings)
    findings.extend(folder_findings(tree.files, display_path))  # links out, size: no reads
    model = None
    if tree.data:
        model, invalid = validate_tree(tree.data, tree.source, rulepack_model())
        findings.extend(invalid)
        if model is not None:
            model = resolve_contracts(model)
            every = sections()
            written = tree.data.get("contracts") if isinstance(tree.data, dict) else None
            checker = PackChecker(
                model,
                tree.source,
                template_variables(every),
                written if isinstance(written, dict) else (),
            )
            checker.run()
            for section in every:
                section.check(model, checker)
            findings.extend(checker.findings)
        findings = plugin_findings(tree.data, tree.source, findings)  # after the entry points
    unique = sorted(set(findings), key=Finding.sort_key)
    return CheckResult(
        display_path(pack_file),
        unique,
        model.rulepack if model else None,
        model,
        tree,
        model.version if model else None,
    )


def check_packs(targets: list[str], locked: bool | None = None) -> list[CheckResult]:
    results = []
    for target in targets:
        for pack_file in find_pack_files(target):
            results.append(check_pack_file(pack_file, locked))
    return results


def load_pack(ref: str | Path, locked: bool | None = None) -> Pack:
    """Load the pack ``ref`` names (path, folder or ``builtin:NAME`` / bare builtin name).
    With ``locked`` (default: when CI=true) every git pack it extends needs a rules.lock
    entry.

    Raises ``PackError`` carrying every finding if the pack has errors.
    """
    pack_file = find_one_pack_file(str(ref))
    result = check_pack_file(pack_file, locked)
    if not result.ok or result.model is None or result.tree is None:
        errors = [f for f in result.findings if f.level == "error"]
        first = errors[0] if errors else PACK_INVALID.at("pack is invalid", Position(result.target))
        more = f" (and {len(errors) - 1} more; run `rules check {ref}`)" if len(errors) > 1 else ""
        raise PackError(f"{first.position}: {first.message}{more}", tuple(result.findings))
    return Pack(
        result.model, pack_file.resolve().parent, result.tree.source, files=tuple(result.tree.files)
    )
