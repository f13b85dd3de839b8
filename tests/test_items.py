"""Items across `rules run` invocations: without a nonce each run is an item of its own,
`--item KEY` (CLI) and ``item=`` (API) name one that runs and calls share."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

import engine
from conftest import REPO, run_cli, run_script, script
from engine.core.errors import EngineError
from engine.pack.inputs import OutputInput
from engine.session.recording import Session

pytestmark = pytest.mark.usefixtures("session_backend")  # SQLite; PostgreSQL when slow

PY = sys.executable
PROMPT = str(REPO / "tests" / "fixtures" / "models" / "prompt.txt")
ENGINEER = (
    "--pack",
    "gap-review",
    "--block",
    "engineer",
    "--var",
    "known_gaps=GAP-FLOW-001",
    "--var",
    "round=2",
)
GOOD = (
    "## Gap Resolution: GAP-FLOW-001\n\n**Confidence:** HIGH\n\n### Proposed Solution\n"
    + "A concrete plan. " * 20
    + "\n\n### Trade-offs\nSome.\n"
)
# A model: an unusable answer to an empty first prompt, a valid one to a retry prompt;
# with the argument `good`, a valid one always.
MODEL = f"""\
import sys

prompt = sys.stdin.read()
if prompt.strip() or sys.argv[1:] == ["good"]:
    print({GOOD!r})
else:
    print("I think the flow could be better.")
"""
RETRIED = [
    "rules run: attempt 1: fail WRONG_FORMAT (Missing required header: '## Gap Resolution:') "
    "-> RETRY",
    "rules run: attempt 2: pass -> PROCEED",
]


def quoted(nonce: str) -> str:
    """A VERDICT block for AC1 with a quoted ANSWER: a format error to repair."""
    return (
        f'<<<VERDICT:V1:AC1:NONCE={nonce}>>>\nANSWER="YES"\nREASON="All criteria are met"\n'
        f"<<<END_VERDICT:AC1:NONCE={nonce}>>>\n"
    )


def rules_run(folder: Path, *args: str, model: Path, mode: str = "") -> tuple[int, list[str]]:
    first = folder / "first-prompt.txt"
    first.write_text("")  # the model answers an empty prompt with an unusable output
    done = run_script(
        script("rules"),
        "run",
        *args,
        "--prompt",
        str(first),
        "--",
        PY,
        str(model),
        *([mode] if mode else []),
        cwd=folder,
    )
    return done.returncode, done.stderr.decode().splitlines()


@pytest.fixture
def model(tmp_path: Path) -> Path:
    path = tmp_path / "model.py"
    path.write_text(MODEL)
    return path


def logged(folder: Path) -> list[tuple[str, int, str]]:
    log = run_script(script("rules"), "log", "--format", "json", cwd=folder)
    assert log.returncode == 0, log.stderr
    return [(r["item"], r["attempt"], r["action"]) for r in json.loads(log.stdout)]


@pytest.mark.heavy
def test_runs_without_a_nonce_are_items_of_their_own(tmp_path: Path, model: Path) -> None:
    # the measured case: after three good runs the fourth run's bad output was attempt 4
    # of one shared item and went straight to the after-failure action
    for _ in range(3):
        assert rules_run(tmp_path, *ENGINEER, model=model, mode="good") == (
            0,
            ["rules run: attempt 1: pass -> PROCEED"],
        )
    for _ in range(2):
        assert rules_run(tmp_path, *ENGINEER, model=model) == (0, RETRIED)
    rows = logged(tmp_path)
    items = list(dict.fromkeys(item for item, _, _ in rows))
    assert len(items) == 5
    assert [(a, act) for _, a, act in rows[3:]] == [
        (1, "RETRY"),
        (2, "PROCEED"),
        (1, "RETRY"),
        (2, "PROCEED"),
    ]
    assert {json.loads(item)["round"] for item in items} == {2}  # the pack's parts stay


@pytest.mark.heavy
def test_runs_with_the_same_item_share_its_count(tmp_path: Path, model: Path) -> None:
    assert rules_run(tmp_path, *ENGINEER, "--item", "job-7", model=model) == (0, RETRIED)
    # the first run ended (PROCEED): the next run of the item starts again at attempt 1
    assert rules_run(tmp_path, *ENGINEER, "--item", "job-7", model=model) == (0, RETRIED)
    # --continue goes on counting the ended run: its cap is spent
    code, lines = rules_run(tmp_path, *ENGINEER, "--item", "job-7", "--continue", model=model)
    assert code == 1
    assert lines[0].startswith("rules run: attempt 3: fail WRONG_FORMAT")
    assert lines[0].endswith("-> ESCALATE")  # the pack's after-failure action, as one item
    assert rules_run(tmp_path, *ENGINEER, "--item", "job-8", model=model) == (0, RETRIED)
    rows = logged(tmp_path)
    assert [item for item, _, _ in rows] == [json.dumps({"item": "job-7"})] * 5 + [
        json.dumps({"item": "job-8"})
    ] * 2
    assert [number for _, number, _ in rows] == [1, 2, 1, 2, 3, 1, 2]


@pytest.mark.heavy
def test_an_item_names_one_across_nonces(tmp_path: Path) -> None:
    """Sentinel packs count per nonce; `--item` joins two nonces' runs into one item."""
    fake = str(REPO / "examples" / "fake_model.py")

    def run(nonce: str, *item: str) -> tuple[int, list[str]]:
        done = run_script(
            script("rules"),
            "run",
            *("--pack", "sentinel", "--block", "VERDICT", "--var", "criterion=AC1"),
            *("--nonce", nonce, *item, "--prompt", PROMPT, "--", PY, fake),
            cwd=tmp_path,
        )
        return done.returncode, [
            line.rsplit(" -> ", 1)[-1] for line in done.stderr.decode().splitlines()
        ]

    assert run("4F2C9A") == (0, ["REPAIR", "PROCEED"])
    assert run("5B3D1E") == (0, ["REPAIR", "PROCEED"])  # another nonce: another item
    assert run("4F2C9A", "--item", "cycle-1") == (0, ["REPAIR", "PROCEED"])
    assert run("5B3D1E", "--item", "cycle-1") == (0, ["REPAIR", "PROCEED"])  # a new run
    code, actions = run("5B3D1E", "--item", "cycle-1", "--continue")
    assert (code, actions[0]) == (1, "NEEDS_HUMAN")
    assert actions[1].startswith("rules run: review 1 is open")  # a person resolves it


@pytest.mark.parametrize("command", ["run", "eval", "render"])
@pytest.mark.parametrize("value", ["", "   ", "x" * 1001])
def test_an_unusable_item_is_a_usage_error(tmp_path: Path, command: str, value: str) -> None:
    session = ("--session", str(tmp_path / "s"))
    tail = ("--", PY, "-c", "print()") if command == "run" else ()
    result = run_cli(command, *ENGINEER, *session, "--item", value, *tail, input="x")
    assert result.exit_code == 2
    assert "'--item'" in result.output
    assert "item name" in result.output
    assert not (tmp_path / "s").exists()


def test_eval_item_needs_a_session() -> None:
    result = run_cli("eval", *ENGINEER, "--item", "job-7", input="x")
    assert result.exit_code == 2
    assert "--item needs --session" in result.output


def test_eval_and_render_count_the_named_item(tmp_path: Path) -> None:
    session = ("--session", str(tmp_path / "s"))
    sentinel = ("--pack", "sentinel", "--block", "VERDICT", "--var", "criterion=AC1")

    def call(command: str, nonce: str, *item: str) -> int:
        bad = quoted(nonce)
        return run_cli(command, *sentinel, "--nonce", nonce, *session, *item, input=bad).exit_code

    assert call("eval", "4F2C9A", "--item", "k") == 3  # REPAIR
    assert call("eval", "5B3D1E", "--item", "k") == 1  # the item's second attempt: NEEDS_HUMAN
    assert call("eval", "5B3D1E") == 3  # without --item that nonce is an item of its own
    # render after eval of the same output of the same item is that attempt again
    assert call("render", "5B3D1E", "--item", "k") == call("render", "5B3D1E", "--item", "k")
    rows = json.loads(run_cli("log", *session, "--format", "json").stdout)
    assert [(r["item"], r["attempt"], r["action"]) for r in rows] == [
        ('{"item": "k"}', 1, "REPAIR"),
        ('{"item": "k"}', 2, "NEEDS_HUMAN"),
        (json.dumps({"nonce": "5B3D1E", "params": {"criterion": "AC1"}}), 1, "REPAIR"),
    ]


def test_the_api_names_items(tmp_path: Path) -> None:
    pack = engine.load_pack("sentinel")
    with Session(pack, tmp_path / "s") as session:
        decisions = [
            session.evaluate(
                OutputInput(
                    "VERDICT", quoted(nonce), nonce=nonce, vars={"criterion": "AC1"}, item="k"
                )
            ).decision
            for nonce in ("4F2C9A", "5B3D1E")
        ]
        assert [(d.attempt, d.action) for d in decisions] == [(1, "REPAIR"), (2, "NEEDS_HUMAN")]
        with pytest.raises(EngineError, match="item name must not be empty"):
            session.evaluate(OutputInput("VERDICT", quoted("4F2C9A"), nonce="4F2C9A", item=" "))
