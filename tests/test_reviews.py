"""The review queue: a NEEDS_HUMAN decision opens a review in the session's ledger; people
list, show, claim and resolve it with `rules review` (real processes, real ledgers); an
edit must pass the block's contract and becomes the item's final decision with who and
when, and an example of the reviewed tier; a run can wait for it; a review past its due
time takes the pack's fallback once, whichever worker sees it first; two workers claiming
at once: exactly one gets it (SQLite and PostgreSQL)."""

from __future__ import annotations

import hashlib
import hmac
import http.server
import json
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any, ClassVar

import pytest

import engine
from conftest import REPO, run_script, script
from engine.session import review as reviews
from engine.session.session_ref import SessionRef

NONCE = "4F2C9A"
BAD = (
    f"<<<ANSWER:V1:Q1:NONCE={NONCE}>>>\nDECISION=MAYBE\n"
    f'REASON="it depends <script>alert(1)</script>"\n<<<END_ANSWER:Q1:NONCE={NONCE}>>>\n'
)
EDITED = BAD.replace("MAYBE", "YES")
RUN = ("--pack", "./my-pack", "--block", "ANSWER", "--var", "question=Q1")


def make_pack(folder: Path, reviews_yaml: str = "") -> Path:
    """`rules init`'s pack, its repair examples led by the reviewed tier, and a
    ``reviews:`` section when given."""
    done = run_script(script("rules"), "init", "my-pack", cwd=folder)
    assert done.returncode == 0, done.stderr
    pack = folder / "my-pack" / "pack.yaml"
    text = pack.read_text(encoding="utf-8").replace(
        "    default:\n      - {tier: canonical",
        "    default:\n      - {tier: reviewed, source: an answer a person corrected}\n"
        "      - {tier: canonical",
    )
    pack.write_text(text + reviews_yaml, encoding="utf-8")
    (folder / "bad.txt").write_text(BAD, encoding="utf-8")
    (folder / "edited.txt").write_text(EDITED, encoding="utf-8")
    return folder / "my-pack"


def rules(folder: Path, *args: str) -> subprocess.CompletedProcess[str]:
    done = run_script(script("rules"), *args, cwd=folder)
    return subprocess.CompletedProcess(
        done.args, done.returncode, done.stdout.decode(), done.stderr.decode()
    )


def needs_human(folder: Path, *where: str, nonce: str = NONCE) -> subprocess.CompletedProcess[str]:
    """A run whose model keeps answering MAYBE: repaired once, then NEEDS_HUMAN."""
    done = rules(folder, "run", *RUN, "--nonce", nonce, *where, "--", "cat", "bad.txt")
    assert done.returncode == 1, done.stderr
    return done


def review_json(folder: Path, *args: str) -> Any:
    done = rules(folder, "review", *args, "--format", "json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def logged(folder: Path, *where: str) -> list[dict[str, Any]]:
    done = rules(folder, "log", "--format", "json", *where)
    assert done.returncode == 0, done.stderr
    rows: list[dict[str, Any]] = json.loads(done.stdout)
    return rows


@pytest.mark.heavy
def test_needs_human_opens_a_review_holding_the_attempts_outputs_and_prompts(
    tmp_path: Path,
) -> None:
    make_pack(tmp_path)
    run = needs_human(tmp_path)
    assert "review 1 is open: resolve it with `rules review show 1`" in run.stderr
    [listed] = review_json(tmp_path, "list")["reviews"]
    assert (listed["id"], listed["state"], listed["action"], listed["block"]) == (
        1,
        "open",
        "NEEDS_HUMAN",
        "ANSWER",
    )
    assert listed["item_label"] == f"nonce {NONCE}, question=Q1"
    shown = review_json(tmp_path, "show", "1")
    assert [a["attempt"] for a in shown["attempts"]] == [1, 2]
    assert [a["action"] for a in shown["attempts"]] == ["REPAIR", "NEEDS_HUMAN"]
    assert all(a["output"] == BAD for a in shown["attempts"])
    assert all(a["failures"][0]["type"] == "PARSE_ERROR" for a in shown["attempts"])
    assert "broke its contract" in shown["attempts"][1]["prompt"]  # the repair prompt sent
    assert (shown["nonce"], shown["vars"]) == (NONCE, {"question": "Q1"})
    text = rules(tmp_path, "review", "show", "1").stdout
    assert "attempt 2: fail -> NEEDS_HUMAN (PARSE_ERROR: DECISION must be YES or NO)" in text


@pytest.mark.heavy
def test_an_edit_must_pass_the_contract_and_becomes_the_final_decision(tmp_path: Path) -> None:
    make_pack(tmp_path)
    needs_human(tmp_path)
    refused = rules(
        tmp_path, "review", "edit", "1", "--by", "alice", "--pack", "./my-pack",
        "--output", "bad.txt",
    )  # fmt: skip
    assert refused.returncode == 1
    assert "does not pass the contract of block ANSWER" in refused.stderr
    assert review_json(tmp_path, "show", "1")["state"] == "open"  # nothing changed
    claimed = rules(tmp_path, "review", "claim", "1", "--by", "bob")
    assert claimed.returncode == 0 and "claimed by bob until" in claimed.stdout
    taken = rules(
        tmp_path, "review", "edit", "1", "--by", "alice", "--pack", "./my-pack",
        "--output", "edited.txt",
    )  # fmt: skip
    assert taken.returncode == 1 and "claimed by bob" in taken.stderr
    done = review_json(
        tmp_path, "edit", "1", "--by", "bob", "--pack", "./my-pack", "--output", "edited.txt"
    )
    assert (done["state"], done["resolution"], done["resolved_by"]) == ("resolved", "edited", "bob")
    assert done["output"] == EDITED
    rows = logged(tmp_path)
    final = rows[-1]
    assert (final["action"], final["rule"], final["status"], final["final"]) == (
        "PROCEED",
        "review:edited",
        "pass",
        True,
    )
    assert final["reason"].startswith(f"edited by bob at {done['resolved_at']} (review 1)")
    assert (final["attempt"], final["run"]) == (3, 1)  # the item's run ends with it
    again = rules(tmp_path, "review", "approve", "1", "--by", "carol")
    assert again.returncode == 1 and "resolved already (edited by bob" in again.stderr
    assert len(logged(tmp_path)) == len(rows)
    page = rules(tmp_path, "report")  # the session report counts the queue
    assert page.returncode == 0, page.stderr
    assert 'data-figure="reviews:my-pack / ANSWER:edited">1<' in page.stdout
    assert 'data-figure="reviews:my-pack / ANSWER:open">0<' in page.stdout
    assert 'data-figure="reviews:my-pack / ANSWER:share of edits">100%<' in page.stdout
    exported = rules(tmp_path, "export", "--session", ".rules-session")  # the output is kept
    assert exported.returncode == 0, exported.stderr
    assert EDITED in [json.loads(line)["text"] for line in exported.stdout.splitlines()]


@pytest.mark.heavy
def test_reject_needs_a_reason_and_ends_the_item_with_on_reject(tmp_path: Path) -> None:
    make_pack(tmp_path, "\nreviews:\n  on_reject: ESCALATE\n")
    needs_human(tmp_path)
    assert rules(tmp_path, "review", "reject", "1", "--by", "dana").returncode == 2
    done = review_json(tmp_path, "reject", "1", "--by", "dana", "--reason", "ambiguous question")
    assert (done["resolution"], done["reason"]) == ("rejected", "ambiguous question")
    final = logged(tmp_path)[-1]
    assert (final["action"], final["rule"]) == ("ESCALATE", "review:rejected")
    assert "rejected by dana" in final["reason"] and "(ambiguous question)" in final["reason"]
    missing = rules(tmp_path, "review", "show", "7")
    assert missing.returncode == 2 and "no review 7 in" in missing.stderr


@pytest.mark.heavy
def test_the_markdown_log_views_name_who_resolved_a_review_and_when(tmp_path: Path) -> None:
    """`rules log`'s markdown views say who resolved an item's review and when, as its
    JSON rows do: the validation log's final decisions, and gap-review's round errors."""
    make_pack(tmp_path)
    needs_human(tmp_path)
    needs_human(tmp_path, "--item", "t-2")
    needs_human(tmp_path, "--item", "t-3")
    edited = review_json(
        tmp_path, "edit", "1", "--by", "bob", "--pack", "./my-pack", "--output", "edited.txt"
    )
    approved = review_json(tmp_path, "approve", "2", "--by", "cy")
    rejected = review_json(tmp_path, "reject", "3", "--by", "dana", "--reason", "off | topic")
    md = rules(tmp_path, "log").stdout
    summary = md.split("### Validation Summary")[1].split("###")[0]
    assert summary.count("| ANSWER | SUCCESS | 3 | N/A (edited in review) |") == 1
    assert summary.count("| ANSWER | SUCCESS | 3 | N/A (approved in review) |") == 1
    decisions = md.split("### Final Decisions\n")[1].split("\n\n")[0].splitlines()
    assert decisions == [
        f"- **ANSWER:** PROCEED: edited by bob at {edited['resolved_at']} (review 1)",
        f"- **ANSWER:** PROCEED: approved by cy at {approved['resolved_at']} (review 2)",
        f"- **ANSWER:** CYCLE_FAIL: rejected by dana at {rejected['resolved_at']} (review 3) "
        "(off | topic)",
    ]

    # a pack whose ESCALATE opens a review: its round errors table names the person
    (tmp_path / "gaps").mkdir()
    (tmp_path / "gaps" / "pack.yaml").write_text(
        'rulepack: gaps\nversion: 1.0.0\nrequires: ">=0.1"\nextends: [builtin:gap-review]\n'
        "reviews:\n  actions: [ESCALATE]\n",
        encoding="utf-8",
    )
    (tmp_path / "ctx.yaml").write_text(
        "known_gaps: [GAP-FLOW-001]\nround: 2\noriginal_prompt: Write round 2.\n",
        encoding="utf-8",
    )
    (tmp_path / "gap.md").write_text("# nothing useful here\n", encoding="utf-8")
    (tmp_path / "fixed.md").write_text(GAP_RESOLUTION, encoding="utf-8")
    where = ("--session", "g", "--pack", "./gaps")
    ask = ("eval", *where, "--block", "engineer", "--context", "ctx.yaml", "--format", "json")
    actions = [json.loads(rules(tmp_path, *ask, "gap.md").stdout)["decision"] for _ in range(3)]
    assert [a["action"] for a in actions] == ["RETRY", "RETRY", "ESCALATE"]
    fixed = review_json(
        tmp_path, "edit", "1", "--by", "olga", "--session", "g", "--pack", "./gaps",
        "--output", "fixed.md",
    )  # fmt: skip
    table = rules(tmp_path, "log", *where, "--view", "rounds").stdout
    said = f"PROCEED: edited by olga at {fixed['resolved_at']} (review 1)"
    assert f" | Engineer | Review edited | {said} |\n" in table, table
    assert "Retry success" not in table  # a person's edit is not a model's retry


GAP_RESOLUTION = (
    "## Gap Resolution: GAP-FLOW-001\n\n**Confidence:** HIGH\n\n### Proposed Solution\n"
    + "Validate in two tiers, structure first and content second, with examples. " * 4
    + "\n\n### Examples\nOne.\n\n### Trade-offs\nSome.\n\n### New Gaps Introduced\nNone\n"
)


@pytest.mark.heavy
def test_the_next_repair_prompt_of_the_block_carries_the_reviewed_example(
    tmp_path: Path,
) -> None:
    make_pack(tmp_path)
    needs_human(tmp_path)
    review_json(
        tmp_path, "edit", "1", "--by", "erin", "--pack", "./my-pack", "--output", "edited.txt"
    )
    second = rules(
        tmp_path, "render", *RUN, "--nonce", "5B3D1E", "--session", ".rules-session", "bad.txt"
    )
    assert second.returncode == 0, second.stderr  # rendered: a repair is due
    assert "A corrected output a person accepted (review 1, by erin):" in second.stdout
    assert "DECISION=YES" in second.stdout
    run = rules(tmp_path, "run", *RUN, "--nonce", NONCE, "--item", "t-2", "--", "cat", "bad.txt")
    assert run.returncode == 1, run.stderr
    repaired = [r for r in logged(tmp_path) if "t-2" in r["item"] and r["action"] == "REPAIR"]
    assert [(r["example_tier"], r["example_source"]) for r in repaired] == [
        ("reviewed", "an answer a person corrected")
    ]


@pytest.mark.heavy
def test_engine_run_waits_for_the_review_and_ends_with_the_edit(tmp_path: Path) -> None:
    pack_folder = make_pack(tmp_path)
    pack = engine.load_pack(pack_folder)
    session = tmp_path / "s"
    ref = SessionRef(session)

    def person() -> None:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            if ref.exists() and (found := reviews.list_reviews(ref)):
                reviews.resolve_review(
                    pack, ref, found[0]["id"], reviews.Resolution("edited", "fay", EDITED)
                )
                return
            time.sleep(0.1)

    helper = threading.Thread(target=person)
    helper.start()
    result = engine.run(
        pack, "ANSWER", lambda prompt: BAD, session=session, nonce=NONCE,
        vars={"question": "Q1"}, review_wait=60,
    )  # fmt: skip
    helper.join()
    assert result.review is not None
    assert (result.review.state, result.review.resolution, result.review.resolved_by) == (
        "resolved",
        "edited",
        "fay",
    )
    assert (result.decision.action, result.decision.exit_code) == ("PROCEED", 0)
    assert result.data == {
        "question": "Q1",
        "decision": "YES",
        "reason": "it depends <script>alert(1)</script>",
    }
    at_once = engine.run(
        pack, "ANSWER", lambda prompt: BAD, session=session, nonce=NONCE, vars={"question": "Q1"}
    )
    assert at_once.review is not None and at_once.review.state == "open"
    assert (at_once.decision.action, at_once.data) == ("NEEDS_HUMAN", None)


@pytest.mark.heavy
def test_rules_check_names_where_review_settings_are_wrong(tmp_path: Path) -> None:
    make_pack(tmp_path, "\nreviews:\n  actions: [REPAIR]\n  fallback: NOPE\n  resolve_within: 0\n")
    done = rules(tmp_path, "check", "my-pack")
    assert done.returncode == 1
    lines = (done.stdout + done.stderr).splitlines()
    text = (tmp_path / "my-pack" / "pack.yaml").read_text(encoding="utf-8").splitlines()
    row = next(n for n, line in enumerate(text, 1) if line.startswith("  actions:"))
    assert any(
        line.startswith(f"my-pack/pack.yaml:{row}:") and "(review-action-not-final)" in line
        for line in lines
    )
    assert any(
        f"pack.yaml:{row + 1}:" in line and "unknown action 'NOPE'" in line for line in lines
    )
    assert any(f"pack.yaml:{row + 2}:" in line and "resolve_within" in line for line in lines)


# ------------------------------------------------------------------- many workers at once

WORKER = """
import json, sys, time
from engine.session import review
from engine.session.session_ref import SessionRef
folder, ledger, what, name, start = sys.argv[1:6]
ref = SessionRef(folder, ledger or None)
while time.time() < float(start):
    time.sleep(0.001)
if what == "claim":
    try:
        review.claim_review(ref, 1, name)
        print(json.dumps({"claimed": name}))
    except review.ReviewRefused as exc:
        print(json.dumps({"refused": exc.kind}))
else:
    print(json.dumps({"expired": review.expire(ref)}))
"""


def workers(folder: Path, ledger: str, what: str, count: int) -> list[dict[str, Any]]:
    """``count`` processes doing ``what`` to review 1 at the same instant."""
    start = time.time() + 4  # every process started and its imports done by then
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WORKER, "s1", ledger, what, f"w{n}", str(start)],
            cwd=folder,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(count)
    ]
    found = []
    for proc in procs:
        out, err = proc.communicate(timeout=120)
        assert proc.returncode == 0, err
        found.append(json.loads(out))
    return found


@pytest.mark.slow
def test_of_workers_claiming_one_review_at_once_exactly_one_gets_it(
    tmp_path: Path, ledger_url: str
) -> None:
    make_pack(tmp_path)
    where = ("--ledger", ledger_url, "--session", "s1")
    needs_human(tmp_path, *where)
    found = workers(tmp_path, ledger_url, "claim", 6)
    claimed = [f["claimed"] for f in found if "claimed" in f]
    assert len(claimed) == 1, found
    assert sorted(f["refused"] for f in found if "refused" in f) == ["taken"] * 5
    shown = review_json(tmp_path, "show", "1", *where)
    assert (shown["state"], shown["claimed_by"]) == ("claimed", claimed[0])


@pytest.mark.slow
def test_a_review_past_its_time_takes_the_fallback_once(tmp_path: Path, ledger_url: str) -> None:
    make_pack(tmp_path, "\nreviews:\n  resolve_within: 1\n  fallback: STOP\n")
    where = ("--ledger", ledger_url, "--session", "s1")
    needs_human(tmp_path, *where)
    time.sleep(2.5)  # due is whole seconds: past it for sure
    found = workers(tmp_path, ledger_url, "expire", 6)
    assert sorted(id for f in found for id in f["expired"]) == [1], found
    rows = logged(tmp_path, *where)
    fallbacks = [r for r in rows if r["rule"] == "review:expired"]
    assert len(fallbacks) == 1
    assert (fallbacks[0]["action"], fallbacks[0]["final"]) == ("STOP", True)
    shown = review_json(tmp_path, "show", "1", *where)
    assert (shown["state"], shown["resolution"]) == ("resolved", "expired")
    late = rules(tmp_path, "review", "approve", "1", "--by", "gus", *where)
    assert late.returncode == 1 and "resolved already (expired" in late.stderr
    assert len(logged(tmp_path, *where)) == len(rows)


def test_the_docs_page_is_in_the_nav() -> None:
    assert "review.md" in (REPO / "mkdocs.yml").read_text(encoding="utf-8")


# ------------------------------------------------------------------------------ webhook


class Hook(http.server.BaseHTTPRequestHandler):
    """``/hook`` fails its first call and takes the next; ``/moved`` redirects to
    ``/stolen``. Every call is kept in ``Hook.calls`` as (path, headers, body)."""

    calls: ClassVar[list[tuple[str, dict[str, str], bytes]]] = []

    def do_POST(self) -> None:
        body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
        Hook.calls.append((self.path, dict(self.headers), body))
        if self.path == "/moved":
            self.send_response(302)
            self.send_header("Location", "/stolen")
        elif self.path == "/hook" and sum(c[0] == "/hook" for c in Hook.calls) == 1:
            self.send_response(500)
        else:
            self.send_response(200)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def log_message(self, *args: object) -> None:
        return


@pytest.mark.heavy
def test_the_webhook_is_told_signed_retried_and_never_redirected(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Hook)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    base = f"http://127.0.0.1:{server.server_address[1]}"
    Hook.calls = []
    hook = (
        "\nreviews:\n"
        "  webhook: {url: URL, secret_env: REVIEW_HOOK_SECRET, timeout: 2, attempts: 2}\n"
    )
    make_pack(tmp_path, hook.replace("URL", f"{base}/hook"))
    try:
        needs_human(tmp_path)
        monkeypatch.setenv("REVIEW_HOOK_SECRET", "hook-secret-8Qz")
        done = rules(tmp_path, "review", "approve", "1", "--by", "hal", "--pack", "./my-pack")
        assert done.returncode == 0 and "warning" not in done.stderr, done.stderr
        assert [c[0] for c in Hook.calls] == ["/hook", "/hook"]  # a failed try, then told
        _, headers, body = Hook.calls[-1]
        signed = hmac.new(b"hook-secret-8Qz", body, hashlib.sha256).hexdigest()
        assert headers["X-Rules-Signature"] == f"sha256={signed}"
        told = json.loads(body)
        assert told["event"] == "review.resolved"
        assert (told["review"]["resolution"], told["review"]["resolved_by"]) == ("approved", "hal")
        assert "material" not in told["review"] and "attempts" not in told["review"]

        pack = tmp_path / "my-pack" / "pack.yaml"
        pack.write_text(pack.read_text().replace("/hook", "/moved"), encoding="utf-8")
        needs_human(tmp_path)
        Hook.calls = []
        moved = rules(tmp_path, "review", "reject", "2", "--by", "hal", "--reason", "no",
                      "--pack", "./my-pack")  # fmt: skip
        assert moved.returncode == 0  # resolved all the same
        assert "a redirect, not followed" in moved.stderr and "stays resolved" in moved.stderr
        assert [c[0] for c in Hook.calls] == ["/moved", "/moved"]  # never /stolen

        monkeypatch.delenv("REVIEW_HOOK_SECRET")
        needs_human(tmp_path)
        Hook.calls = []
        unsigned = rules(tmp_path, "review", "approve", "3", "--by", "hal", "--pack", "./my-pack")
        assert "REVIEW_HOOK_SECRET holding its signing secret is not set" in unsigned.stderr
        assert Hook.calls == []
    finally:
        server.shutdown()
        server.server_close()
