"""`rules log` views are log templates of packs, filled from the ledger's rows."""

from __future__ import annotations

from pathlib import Path

import engine
from conftest import REPO, run_cli
from engine.pack.inputs import OutputInput
from engine.session.recording import Session


def _session(tmp_path: Path) -> Path:
    pack = engine.load_pack("sentinel")
    folder = tmp_path / "s"
    with Session(pack, folder) as session:
        session.evaluate(
            OutputInput("VERDICT", "nothing here", nonce="4F2C9A", vars={"criterion": "AC1"})
        )
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


def test_json_and_jsonl_stream_every_attempt_with_its_warnings(tmp_path: Path) -> None:
    """`--format json` is json.dumps(rows, indent=2) to the byte, written row by row;
    each attempt carries its own warnings (read alongside, in attempt order)."""
    import json
    import sqlite3

    from engine.session.views import json_text

    rows = [{"a": [], "b": {"c": "x\ny", "d": [1, {"e": None}]}, "é": "\u2028"}, {}, {"z": 1}]
    for count in range(len(rows) + 1):
        assert (
            "".join(json_text(rows[:count]))
            == json.dumps(rows[:count], indent=2, ensure_ascii=False) + "\n"
        )
        assert "".join(json_text(rows[:count], lines=True)) == "".join(
            json.dumps(row, ensure_ascii=False) + "\n" for row in rows[:count]
        )
    folder = _session(tmp_path)
    pack = engine.load_pack("sentinel")
    with Session(pack, folder) as session:
        for n in (2, 3):
            session.evaluate(
                OutputInput("VERDICT", "none", nonce=f"4F2C9{n}", vars={"criterion": "AC1"})
            )
    db = sqlite3.connect(folder / "ledger.sqlite3")
    with db:  # warnings of attempts 3 and 1, written out of attempt order
        for attempt_id, message in [(3, "w3a"), (1, "w1"), (3, "w3b")]:
            db.execute(
                "INSERT INTO warnings (attempt_id, ts, message) VALUES (?, '', ?)",
                (attempt_id, message),
            )
    db.close()
    listed = json.loads(run_cli("log", "--session", str(folder), "--format", "json").stdout)
    assert [(r["id"], r["warnings"]) for r in listed] == [(1, ["w1"]), (2, []), (3, ["w3a", "w3b"])]
    lines = run_cli("log", "--session", str(folder), "--format", "jsonl").stdout.splitlines()
    assert [json.loads(line) for line in lines] == listed
