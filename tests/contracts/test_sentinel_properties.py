"""Properties: no text makes the parser raise; generated valid blocks parse back to their data;
the grammar is data (a changed limit in a copy of the pack changes behaviour)."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from sentinel_cases import NONCE, delimiters

import engine
from conftest import REPO, shipped_pack

PACK = shipped_pack("sentinel")
BLOCKS = list(PACK.blocks)
FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def quote(text: str) -> str:
    escaped = text.replace("\\", "\\\\").replace('"', '\\"').replace("\t", "\\t")
    return f'"{escaped}"'


@FAST
@given(block=st.sampled_from(BLOCKS), data=st.binary(max_size=2000))
def test_arbitrary_bytes_never_raise(block: str, data: bytes) -> None:
    result = PACK.parse(block, data, nonce=NONCE, vars={"criterion": "AC1"})
    assert result.ok or (result.failure is not None and result.failure.message)


@FAST
@given(
    block=st.sampled_from(BLOCKS),
    body=st.text(max_size=500),
    nonce=st.text(max_size=8),
    criterion=st.one_of(st.none(), st.text(max_size=6)),
)
def test_arbitrary_text_inside_delimiters_never_raises(
    block: str, body: str, nonce: str, criterion: str | None
) -> None:
    opener, closer = delimiters(block)
    variables = {} if criterion is None else {"criterion": criterion}
    result = PACK.parse(block, f"{opener}\n{body}\n{closer}", nonce=nonce, vars=variables)
    assert result.ok or result.failure is not None


single_line = st.text(
    alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"),
    min_size=1,
    max_size=120,
)


@FAST
@given(
    answer=st.sampled_from(["YES", "NO"]),
    reason=single_line,
    criterion=st.from_regex(r"[A-Za-z0-9_:-]{1,12}", fullmatch=True),
)
def test_generated_verdict_parses_back(answer: str, reason: str, criterion: str) -> None:
    opener, closer = delimiters("VERDICT", criterion)
    text = "\n".join([opener, f"REASON={quote(reason)}", f"ANSWER={answer}", closer])
    result = PACK.parse("VERDICT", text, nonce=NONCE, vars={"criterion": criterion})
    assert result.ok, result.error
    assert result.data == {"criterion_id": criterion, "answer": answer, "reason": reason}


bare = st.from_regex(r"[A-Za-z0-9_-]{1,64}", fullmatch=True)
words = st.text(alphabet="abcdefghijklmnopqrstuvwxyz ", min_size=1, max_size=60).map(
    lambda s: "x" + s.strip()
)


@FAST
@given(
    track_id=bare,
    phase=bare,
    name=words,
    goal=words,
    requirements=st.lists(bare, min_size=1, max_size=30),
    tasks=st.integers(min_value=1, max_value=10**40),
    blocked=st.one_of(st.none(), st.booleans()),
)
@pytest.mark.heavy
def test_generated_track_parses_back(
    track_id: str,
    phase: str,
    name: str,
    goal: str,
    requirements: list[str],
    tasks: int,
    blocked: bool | None,
) -> None:
    lines = [
        f"TRACK_ID={track_id}",
        f"NAME={quote(name)}",
        f"PHASE={phase}",
        f"GOAL={quote(goal)}",
        "REQUIREMENTS=" + ", ".join(requirements),
        f"ESTIMATED_TASKS={tasks}",
    ]
    if blocked is not None:
        lines += [f"PHASE_BLOCKED={'true' if blocked else 'false'}", 'REASONS="waiting"']
    opener, closer = delimiters("TRACK")
    result = PACK.parse("TRACK", "\n".join([opener, *lines, closer]), nonce=NONCE)
    assert result.ok, result.error
    assert result.data == {
        "track_id": track_id,
        "name": name,
        "phase": phase,
        "goal": goal,
        "requirements": requirements,
        "estimated_tasks": tasks,
        "phase_complete": None,
        "phase_blocked": blocked,
        "reasons": None if blocked is None else "waiting",
    }


path = st.from_regex(r"[a-z0-9_-]{1,10}(/[a-z0-9_-]{1,10}){0,3}\.py", fullmatch=True)


@FAST
@given(
    task=bare,
    title=words,
    summary=st.lists(words, min_size=1, max_size=5),
    files=st.lists(
        st.tuples(path, st.sampled_from(["add", "modify", "delete"]), words),
        min_size=1,
        max_size=10,
    ),
    acceptance=st.lists(words, min_size=1, max_size=10),
    diff=st.integers(1, 10**9),
)
@pytest.mark.heavy
def test_generated_plan_parses_back(
    task: str,
    title: str,
    summary: list[str],
    files: list[tuple[str, str, str]],
    acceptance: list[str],
    diff: int,
) -> None:
    lines = [f"TASK_ID={task}", f"TITLE={quote(title)}", "SUMMARY="]
    lines += [f"  {line}" for line in summary]
    lines.append("FILES:")
    lines += [f"- path={p} action={a} rationale={quote(r)}" for p, a, r in files]
    lines.append("ACCEPTANCE:")
    lines += [f"- id=AC{i} text={quote(t)}" for i, t in enumerate(acceptance, 1)]
    lines.append(f"ESTIMATED_DIFF={diff}")
    opener, closer = delimiters("PLAN")
    result = PACK.parse("PLAN", "\n".join([opener, *lines, closer]), nonce=NONCE)
    assert result.ok, result.error
    assert result.data is not None
    assert result.data["summary"] == "\n".join(summary)
    assert result.data["files"] == [{"path": p, "action": a, "rationale": r} for p, a, r in files]
    assert [a["text"] for a in result.data["acceptance"]] == acceptance
    assert result.data["estimated_diff"] == diff


def test_a_changed_limit_in_a_copy_changes_behaviour(tmp_path: Path) -> None:
    copy = tmp_path / "sentinel"
    shutil.copytree(REPO / "rules" / "sentinel", copy)
    pack_file = copy / "pack.yaml"
    original = "{check: max_len, field: REASON, max: 500, message: REASON exceeds 500 chars}"
    text = pack_file.read_text(encoding="utf-8")
    assert original in text
    pack_file.write_text(text.replace(original, original.replace("500", "300")), encoding="utf-8")
    opener, closer = delimiters("VERDICT")
    block = "\n".join([opener, "ANSWER=NO", f'REASON="{"r" * 301}"', closer])
    shipped = PACK.parse("VERDICT", block, nonce=NONCE, vars={"criterion": "AC1"})
    changed = engine.load_pack(copy).parse("VERDICT", block, nonce=NONCE, vars={"criterion": "AC1"})
    assert shipped.ok
    assert changed.error == "REASON exceeds 300 chars"


def test_lone_surrogates_get_a_verdict_not_an_exception() -> None:
    opener, closer = delimiters("VERDICT")
    text = "\n".join([opener, "ANSWER=YES", 'REASON="a\ud800"', closer])
    result = PACK.parse("VERDICT", text, nonce=NONCE, vars={"criterion": "AC1\ud800"})
    assert result.error == "invalid --criterion format"
    ok = PACK.parse("VERDICT", text, nonce=NONCE, vars={"criterion": "AC1"})
    assert ok.data == {"criterion_id": "AC1", "answer": "YES", "reason": "a\ufffd"}
    bad_nonce = PACK.parse("VERDICT", "", nonce="4F2C9\ud800", vars={"criterion": "AC1"})
    assert bad_nonce.error == "invalid nonce format: '4F2C9\ufffd' (must match ^[0-9A-F]{6}$)"


def test_counts_over_4300_digits_still_give_a_message() -> None:
    opener, closer = delimiters("QA_REVIEW")
    lines = [
        "VERDICT=PASS",
        "RISK=LOW",
        *[f"C{i}=PASS" for i in range(6)],
        "FINDINGS_COUNT=" + "1" * 4301,
        "FINDINGS:",
        "REMEDIATION_COUNT=0",
        "REMEDIATION:",
        'NOTES=""',
    ]
    result = PACK.parse("QA_REVIEW", "\n".join([opener, *lines, closer]), nonce=NONCE)
    assert result.error == "FINDINGS_COUNT=" + "1" * 4301 + " but 0 findings provided"
