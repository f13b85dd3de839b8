"""`rules log` views are log templates of packs, filled from the ledger's rows."""

from __future__ import annotations

from pathlib import Path

import engine
from conftest import REPO, run_cli
from engine.state.session import Session


def _session(tmp_path: Path) -> Path:
    pack = engine.load_pack("sentinel")
    folder = tmp_path / "s"
    with Session(pack, folder) as session:
        session.evaluate("VERDICT", "no block here", nonce="4F2C9A", vars={"criterion": "AC1"})
    return folder


def test_a_pack_renders_its_own_log_template(tmp_path: Path) -> None:
    folder = _session(tmp_path)
    pack = tmp_path / "mine"
    (pack / "templates").mkdir(parents=True)
    (pack / "templates" / "summary.md.j2").write_text(
        "{% for row in entries %}{{ row.block }} {{ row.attempt }} {{ row.action }}\n"
        "{% endfor %}{{ rounds | length }} round(s)\n"
    )
    (pack / "pack.yaml").write_text(
        "rulepack: mine\nextends: [builtin:session-logs]\n"
        "templates:\n  summary: {file: templates/summary.md.j2, purpose: log}\n"
    )
    result = run_cli("log", "--session", str(folder), "--pack", str(pack), "--view", "summary")
    assert result.exit_code == 0, result.output
    assert result.stdout == "VERDICT 1 NEEDS_HUMAN\n1 round(s)\n"
    # `all` renders every md log template of the pack: the inherited ones, then its own
    everything = run_cli("log", "--session", str(folder), "--pack", str(pack))
    assert everything.stdout.startswith("## Session Validation Log\n")
    assert everything.stdout.endswith("VERDICT 1 NEEDS_HUMAN\n1 round(s)\n")


def test_unknown_view_and_wrong_format_are_usage_errors(tmp_path: Path) -> None:
    folder = _session(tmp_path)
    unknown = run_cli("log", "--session", str(folder), "--view", "nope")
    assert unknown.exit_code == 2
    assert "no log view 'nope'" in unknown.stderr and "failures" in unknown.stderr
    wrong = run_cli("log", "--session", str(folder), "--view", "failures")
    assert wrong.exit_code == 2
    assert "writes jsonl; use --format jsonl" in wrong.stderr


def test_the_shipped_log_templates_live_in_a_pack() -> None:
    views = engine.load_pack("session-logs")
    logs = {n: s.format for n, s in views.model.templates.items() if s.purpose == "log"}
    assert logs == {"validation": "md", "examples": "md", "failures": "jsonl"}
    # packs without log templates of their own use these; gap-review extends them with
    # its round errors view
    for name in ("core", "sentinel"):
        templates = engine.load_pack(name).model.templates.values()
        assert not any(spec.purpose == "log" for spec in templates)
    gap_review = engine.load_pack("gap-review").model.templates
    assert {n for n, s in gap_review.items() if s.purpose == "log"} == {*logs, "rounds"}
    assert (REPO / "rules" / "session-logs" / "templates").is_dir()
