"""What a team meets in its first afternoon (issue 37): the caller's mistakes are named as
the caller's, at every front door, and the pack's own promises hold where docs say."""

from __future__ import annotations

import json
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
from installed import wheel_cli

import engine
from conftest import SCRIPTS, run_cli

BAD = (
    '<<<ANSWER:V1:Q1:NONCE=4F2C9A>>>\nDECISION="YES"\nREASON="it holds"\n'
    "<<<END_ANSWER:Q1:NONCE=4F2C9A>>>\n"
)


@pytest.fixture(autouse=True, params=["checkout", pytest.param("wheel", marks=pytest.mark.slow)])
def front(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> Iterator[str]:
    """The table walked twice: with this checkout's engine (in-process, as the default run
    does), and in the slow run from the wheel installed outside the checkout, every
    command a process of the wheel's venv in a folder outside the checkout."""
    if request.param == "wheel":
        installed = request.getfixturevalue("installed")
        module = sys.modules[__name__]
        monkeypatch.setattr(module, "run_cli", wheel_cli(installed))
        monkeypatch.setattr(module, "SCRIPTS", installed.bin)
    yield request.param


@pytest.fixture
def my_pack(tmp_path: Path) -> Path:
    """The pack `rules init` makes: block ANSWER, param `question` matching ^Q[0-9]+$."""
    made = run_cli("init", "my-pack", "--dir", str(tmp_path))
    assert made.exit_code == 0, made.output
    return tmp_path / "my-pack"


@pytest.fixture
def out(tmp_path: Path) -> Path:
    path = tmp_path / "out.txt"
    path.write_text(BAD, encoding="utf-8")
    return path


# ------------------------------------------------------------ a param that fails its pattern


@pytest.mark.parametrize("command", ["eval", "render"])
def test_a_param_failing_its_pattern_is_a_usage_error(
    my_pack: Path, out: Path, command: str
) -> None:
    result = run_cli(
        command, "--pack", str(my_pack), "--block", "ANSWER", "--nonce", "4F2C9A",
        "--var", "question=X1", str(out),
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "PARSE_ERROR" not in result.output and "REPAIR" not in result.output
    assert "question" in result.stderr and "'X1'" in result.stderr
    assert "^Q[0-9]+$" in result.stderr


def test_a_param_failing_its_pattern_is_a_usage_error_in_python(
    my_pack: Path, tmp_path: Path
) -> None:
    with pytest.raises(engine.UsageError, match="question"):
        engine.run(
            str(my_pack),
            "ANSWER",
            lambda prompt: BAD,
            nonce="4F2C9A",
            vars={"question": "X1"},
            session=tmp_path / "s",
        )
    assert not (tmp_path / "s").exists()


def test_a_param_failing_its_pattern_is_a_problem_naming_the_field(
    my_pack: Path, tmp_path: Path
) -> None:
    pytest.importorskip("fastapi", reason="the server extra is not installed")
    from fastapi.testclient import TestClient

    from engine.server.app import create_app
    from engine.server.packs import load_pack_set
    from engine.server.settings import ServerSettings

    config = ServerSettings(packs=(str(my_pack),), sessions_dir=str(tmp_path / "sessions"))
    client = TestClient(create_app(config, load_pack_set(config.packs)))
    body = {"pack": "my-pack", "block": "ANSWER", "nonce": "4F2C9A", "output": BAD}
    response = client.post("/v1/evaluate", json={**body, "vars": {"question": "X1"}})
    assert 400 <= response.status_code < 500, response.text
    problem = json.loads(response.text)
    assert "vars.question" in json.dumps(problem)
    assert "^Q[0-9]+$" in problem["detail"]


# ------------------------------------------------------------ a misspelt param


def test_a_misspelt_param_is_named_as_the_block_parameter(my_pack: Path, out: Path) -> None:
    result = run_cli(
        "eval", "--pack", str(my_pack), "--block", "ANSWER", "--nonce", "4F2C9A",
        "--var", "qestion=Q1", str(out),
    )  # fmt: skip
    assert result.exit_code == 2, result.output
    assert "did you mean the block parameter 'question'?" in result.stderr, result.stderr
    with pytest.raises(engine.EngineError, match="did you mean the block parameter 'question'"):
        engine.load_pack(str(my_pack)).split_inputs("ANSWER", None, {"qestion": "Q1"})


# ------------------------------------------------------------ vars in a pack's test case


def _with_ticket(my_pack: Path, case_vars: str) -> None:
    """my-pack with a required context key `ticket_id` and a case giving `vars`."""
    text = (my_pack / "pack.yaml").read_text(encoding="utf-8")
    text = text.replace(
        "\ncontext:\n", "\ncontext:\n  ticket_id: {type: string, required: true}\n", 1
    )
    (my_pack / "pack.yaml").write_text(text, encoding="utf-8")
    (my_pack / "tests" / "ticket.yaml").write_text(
        "- name: the ticket is a var, as on the command line\n"
        "  block: ANSWER\n"
        "  input_file: ANSWER/good.txt\n"
        "  nonce: 4F2C9A\n"
        f"  vars: {case_vars}\n"
        "  expect: {status: pass, action: PROCEED}\n",
        encoding="utf-8",
    )


def test_vars_of_a_test_case_are_split_as_on_the_command_line(my_pack: Path) -> None:
    _with_ticket(my_pack, "{question: Q1, ticket_id: T1}")
    for case in (my_pack / "tests").rglob("*.yaml"):
        text = case.read_text(encoding="utf-8")
        case.write_text(text.replace("{question: Q1}", "{question: Q1, ticket_id: T1}"))
    assert run_cli("check", str(my_pack)).exit_code == 0
    tested = run_cli("test", str(my_pack))
    assert tested.exit_code == 0, tested.output
    evaluated = run_cli(
        "eval", "--pack", str(my_pack), "--block", "ANSWER", "--nonce", "4F2C9A",
        "--var", "question=Q1", "--var", "ticket_id=T1",
        str(my_pack / "tests" / "ANSWER" / "good.txt"),
    )  # fmt: skip
    assert evaluated.exit_code == 0, evaluated.output


def test_check_reports_a_test_case_that_cannot_run(my_pack: Path) -> None:
    _with_ticket(my_pack, "{question: Q1, ticket: T1}")
    checked = run_cli("check", str(my_pack))
    assert checked.exit_code == 1, checked.output
    assert "ticket.yaml:1:3:" in checked.stdout, checked.stdout
    assert "cannot run" in checked.stdout and "'ticket'" in checked.stdout
    assert "(pack-test-cannot-run)" in checked.stdout


# ------------------------------------------------------------ the declared after-failure reason

DECLARED = "this criterion needs a human; other criteria continue"


def test_the_declared_after_failure_reason_is_printed_everywhere(tmp_path: Path) -> None:
    bad = tmp_path / "bad.txt"
    bad.write_text(
        '<<<VERDICT:V1:AC1:NONCE=4F2C9A>>>\nANSWER="YES"\nREASON="it holds and holds"\n'
        "<<<END_VERDICT:AC1:NONCE=4F2C9A>>>\n",
        encoding="utf-8",
    )
    given = ("--pack", "sentinel", "--block", "VERDICT", "--nonce", "4F2C9A")
    given += ("--var", "criterion=AC1")
    text = run_cli("eval", *given, "--attempt", "2", str(bad))
    assert text.exit_code == 1, text.output
    assert f"reason   {DECLARED} (1 repair attempt used)" in text.stdout
    document = json.loads(
        run_cli("eval", *given, "--attempt", "2", "--format", "json", str(bad)).stdout
    )
    assert document["decision"]["reason"].startswith(DECLARED)
    session = str(tmp_path / "s")
    for _ in range(2):
        run_cli("eval", *given, "--session", session, str(bad))
    log = run_cli("log", "--session", session)
    assert f"- **VERDICT:** NEEDS_HUMAN: {DECLARED} (1 repair attempt used)" in log.stdout
    jsonl = run_cli("log", "--session", session, "--format", "jsonl").stdout.splitlines()
    assert json.loads(jsonl[-1])["reason"].startswith(DECLARED)
    explained = run_cli("explain", "--pack", "sentinel", "VERDICT")
    assert f"  VERDICT: NEEDS_HUMAN: {DECLARED}\n" in explained.stdout


# ------------------------------------------------------------ a misspelt kind


def test_a_misspelt_kind_is_one_finding_with_the_kind_it_meant(my_pack: Path) -> None:
    text = (my_pack / "pack.yaml").read_text(encoding="utf-8")
    (my_pack / "pack.yaml").write_text(text.replace("kind: sentinel", "kind: jsn"), "utf-8")
    checked = run_cli("check", str(my_pack))
    assert checked.exit_code == 1
    findings = [line for line in checked.stdout.splitlines() if "[error]" in line]
    assert len(findings) == 1, checked.stdout
    assert "unknown contract kind 'jsn' (did you mean 'json'?) (unknown-kind)" in findings[0]


# ------------------------------------------------------------ packs elsewhere; [tool.rules]


def _script(name: str, *args: str, cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPTS / name), *args], cwd=cwd, capture_output=True, text=True, check=False
    )


@pytest.mark.heavy
def test_check_without_packs_says_where_it_looked_and_how_to_name_them(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "packs").mkdir(parents=True)
    assert run_cli("init", "my-pack", "--dir", str(project / "packs")).exit_code == 0
    for name, args in (("rules", ["check"]), ("rules-check", []), ("rules", ["test"])):
        done = _script(name, *args, cwd=project)
        assert done.returncode == 2, done.stderr
        assert "rules reads ./rules/" in done.stderr, done.stderr
        assert "`args: [packs/]`" in done.stderr and "[tool.rules]" in done.stderr


@pytest.mark.heavy
def test_a_tool_rules_table_gives_every_command_its_defaults(tmp_path: Path) -> None:
    project = tmp_path / "project"
    (project / "packs").mkdir(parents=True)
    (project / "src").mkdir()
    assert run_cli("init", "my-pack", "--dir", str(project / "packs")).exit_code == 0
    (project / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.rules]\npacks = ["packs/"]\n'
        'session = "runs/main"\nformat = "json"\n',
        encoding="utf-8",
    )
    checked = _script("rules", "check", cwd=project / "src")  # from a folder below
    assert checked.returncode == 0, checked.stderr
    assert json.loads(checked.stdout)["packs"][0]["name"] == "my-pack"
    assert _script("rules-check", cwd=project / "src").stdout.lstrip().startswith("{")
    texted = _script("rules", "check", "--format", "text", cwd=project)  # the option wins
    assert texted.stdout == "1 pack checked: 0 errors, 0 warnings\n"
    assert _script("rules", "test", "--format", "text", cwd=project).returncode == 0
    good = project / "packs" / "my-pack" / "tests" / "ANSWER" / "good.txt"
    ran = _script(
        "rules", "run", "--pack", "packs/my-pack", "--block", "ANSWER", "--nonce", "4F2C9A",
        "--var", "question=Q1", "--", "cat", str(good), cwd=project,
    )  # fmt: skip
    assert ran.returncode == 0, ran.stderr
    assert (project / "runs" / "main").is_dir() and not (project / ".rules-session").exists()
    (project / "pyproject.toml").write_text('[tool.rules]\npack = ["packs/"]\n')
    wrong = _script("rules", "check", cwd=project)
    assert wrong.returncode == 2
    assert "pyproject.toml: [tool.rules]: unknown key 'pack' (did you mean 'packs'?)" in (
        wrong.stderr
    )


# ------------------------------------------------------------ the column of a Jinja error


def test_a_template_syntax_error_is_reported_at_its_column(my_pack: Path) -> None:
    template = my_pack / "templates" / "repair.md.j2"
    text = template.read_text(encoding="utf-8")
    broken = "({{ failure_type }}):"
    number, line = next((n, t) for n, t in enumerate(text.splitlines(), 1) if broken in t)
    template.write_text(text.replace(broken, "({{ failure_type }):", 1), encoding="utf-8")
    column = line.index(broken) + len("({{ failure_type ") + 1
    checked = run_cli("check", str(my_pack))
    assert checked.exit_code == 1
    assert f"repair.md.j2:{number}:{column}: [error] template 'repair': unexpected '}}'" in (
        checked.stdout
    ), checked.stdout
    lines = "x\n{% for a in b %}\n  {{ a.b( }}\n{% endfor %}\n"
    template.write_text(lines, encoding="utf-8")
    assert "repair.md.j2:3:11: [error]" in run_cli("check", str(my_pack)).stdout


# ------------------------------------------------------------ a ledger's folder outside


def test_a_ledger_folder_outside_the_working_folder_is_not_created(
    tmp_path: Path, out: Path, my_pack: Path
) -> None:
    missing = tmp_path / "nowhere" / "deeper"
    given = ("--pack", str(my_pack), "--block", "ANSWER", "--nonce", "4F2C9A")
    given += ("--var", "question=Q1", "--session", "s")
    result = run_cli("eval", *given, "--ledger", f"sqlite://{missing}/x.db", str(out))
    assert result.exit_code == 2, result.output
    assert f"the ledger's folder {missing} does not exist" in result.stderr, result.stderr
    assert not (tmp_path / "nowhere").exists()
    inside = run_cli("eval", *given, "--ledger", "ledgers/x.db", str(out))  # under the cwd
    assert inside.exit_code == 3, inside.output
    assert (Path.cwd() / "ledgers" / "x.db").is_file()


# ------------------------------------------------------------ a wrong type in a --context file


def test_a_wrong_type_in_a_context_file_names_the_file_and_line(
    my_pack: Path, out: Path, tmp_path: Path
) -> None:
    text = (my_pack / "pack.yaml").read_text(encoding="utf-8")
    text = text.replace("\ncontext:\n", "\ncontext:\n  ticket_id: {type: string}\n", 1)
    (my_pack / "pack.yaml").write_text(text, encoding="utf-8")
    context = tmp_path / "ctx.yaml"
    context.write_text("# the ticket\nticket_id: 42\n", encoding="utf-8")
    given = ("--pack", str(my_pack), "--block", "ANSWER", "--nonce", "4F2C9A")
    result = run_cli("eval", *given, "--var", "question=Q1", "--context", str(context), str(out))
    assert result.exit_code == 2
    assert "ctx.yaml:2:12: context key 'ticket_id' must be a string" in result.stderr, result.stderr


# ------------------------------------------------------------ rules serve with a broken pack


def test_serve_prints_a_broken_pack_s_findings_as_check_does(my_pack: Path) -> None:
    pytest.importorskip("fastapi", reason="the server extra is not installed")
    text = (my_pack / "pack.yaml").read_text(encoding="utf-8")
    (my_pack / "pack.yaml").write_text(
        text.replace("after_failure: NEEDS_HUMAN", "after_failure: DEGRAD"), encoding="utf-8"
    )
    checked = run_cli("check", str(my_pack)).stdout.splitlines()[:-1]  # without the summary
    assert len(checked) == 1 and "[fix: did you mean 'DEGRADE'?]" in checked[0]
    served = run_cli("serve", "--pack", str(my_pack), "--port", "0")
    assert served.exit_code == 2
    assert served.stderr.splitlines()[: len(checked)] == checked


# ------------------------------------------------------------ the pre-commit hooks' files


@pytest.mark.parametrize("hook", ["rules-check", "rules-test"])
def test_the_hooks_run_on_pack_files_only_by_default(hook: str) -> None:
    import re

    import yaml

    from conftest import REPO

    hooks = {h["id"]: h for h in yaml.safe_load((REPO / ".pre-commit-hooks.yaml").read_text())}
    files = re.compile(hooks[hook]["files"])  # pre-commit matches with re.search
    for path in (
        "rules/my-pack/pack.yaml",
        "rules/my-pack/templates/repair.md.j2",
        "rules/my-pack/contracts/answer.v1.md",
        "rules/my-pack/tests/ANSWER/good.txt",
        "rules/my-pack/schemas/a.schema.json",
        "packs/other/pack.yaml",
        "rules.lock",
        "pyproject.toml",
    ):
        assert files.search(path), path
    for path in ("README.md", "docs/guide.md", "src/data.json", "notes.txt", "app/x.yaml"):
        assert not files.search(path), path


# ------------------------------------------------------------ installing from a team's URL


def test_every_install_line_names_the_one_url_a_team_sets() -> None:
    import re

    from conftest import REPO

    files = [
        REPO / "README.md",
        *sorted((REPO / "docs").rglob("*.md")),
        REPO / "examples" / "ci" / "github-actions.yml",
        REPO / ".pre-commit-hooks.yaml",
        REPO / "mkdocs.yml",
    ]
    urls = set()
    for path in files:
        text = path.read_text(encoding="utf-8")
        assert "OWNER" not in text, path
        urls |= set(re.findall(r"rules-engine @ git\+(https?://[^\s\"'@]+)", text))
        urls |= set(re.findall(r"repo: (https?://[^\s\"'@]+)", text))
    assert urls == {"https://git.example.com/your-team/rules-engine"}, urls


# ------------------------------------------------------------ max_attempts: one meaning


def test_the_prompt_and_the_terminal_count_attempts_alike(tmp_path: Path) -> None:
    """gap-review's engineer may be retried twice (`max_attempts: 2`): three attempts in
    all. The terminal says attempt 1 of 3 and the next output is attempt 2 of 3; the retry
    prompt asks for attempt 2 of 3, not "1 of 2"."""
    bad = tmp_path / "engineer.md"
    bad.write_text("# nothing useful\n", encoding="utf-8")
    context = tmp_path / "ctx.yaml"
    context.write_text("known_gaps: [GAP-FLOW-001]\nround: 1\n", encoding="utf-8")
    given = ("--pack", "gap-review", "--block", "engineer", "--context", str(context), str(bad))
    evaluated = run_cli("eval", *given)
    assert evaluated.exit_code == 3, evaluated.output
    assert "attempt 1 of 3;" in evaluated.stdout
    assert "the next output is attempt 2 of 3" in evaluated.stdout
    rendered = run_cli("render", *given)
    assert "RETRY ATTEMPT 2 of 3" in rendered.stdout, rendered.stdout


def attempt_shown(text: str) -> tuple[int, int]:
    """The (attempt, of) of the terminal's `action REPAIR (attempt 1 of 2; ...)` line."""
    found = re.search(r"^action +\w+ \(attempt (\d+) of (\d+);", text, re.MULTILINE)
    assert found, text
    return int(found[1]), int(found[2])


def test_the_text_and_the_json_of_an_evaluation_count_attempts_alike(
    my_pack: Path, out: Path, tmp_path: Path
) -> None:
    """`rules init`'s pack allows one repair (`max_attempts: 1`): two attempts in all. The
    terminal says attempt 1 of 2, and so does the decision document of `--format json`
    (it said `"max_attempts": 1`, the repairs); gap-review's engineer, 1 of 3."""
    context = tmp_path / "ctx.yaml"
    context.write_text("known_gaps: [GAP-FLOW-001]\nround: 1\n", encoding="utf-8")
    engineer = tmp_path / "engineer.md"
    engineer.write_text("# nothing useful\n", encoding="utf-8")
    cases = [
        (("--pack", str(my_pack), "--block", "ANSWER", "--nonce", "4F2C9A"), out, 2),
        (("--pack", "gap-review", "--block", "engineer", "--context", str(context)), engineer, 3),
    ]
    for given, output, most in cases:
        extra = ("--var", "question=Q1") if "ANSWER" in given else ()
        text = run_cli("eval", *given, *extra, str(output))
        document = run_cli("eval", *given, *extra, "--format", "json", str(output))
        assert text.exit_code == document.exit_code == 3, text.output + document.output
        decision = json.loads(document.stdout)["decision"]
        shown = attempt_shown(text.stdout)
        assert (decision["attempt"], decision["max_attempts"]) == shown == (1, most)
        assert decision["attempts_left"] == most - 2  # repairs left after this one


def test_the_api_and_the_server_count_attempts_as_the_terminal(
    front: str, my_pack: Path, out: Path, tmp_path: Path
) -> None:
    """`engine.run`'s decisions, `Pack.decide` and the server's answer carry the
    terminal's `of 2` as `max_attempts` for a pack that allows one repair."""
    if front == "wheel":
        pytest.skip("in-process: the checkout's engine, as the checkout run already has it")
    bad = out.read_text(encoding="utf-8")
    pack = engine.load_pack(str(my_pack))
    verdict = pack.evaluate("ANSWER", bad, nonce="4F2C9A", vars={"question": "Q1"})
    assert pack.decide(verdict, output=bad, attempt=1, nonce="4F2C9A").max_attempts == 2
    result = engine.run(
        pack,
        "ANSWER",
        lambda prompt: bad,
        nonce="4F2C9A",
        vars={"question": "Q1"},
        session=str(tmp_path / "s"),
    )
    counted = [(a.decision.attempt, a.decision.max_attempts) for a in result.attempts]
    assert counted == [(1, 2), (2, 2)]
    assert result.decision.action == "NEEDS_HUMAN"
    pytest.importorskip("fastapi", reason="the server extra is not installed")
    from fastapi.testclient import TestClient

    from engine.server.app import create_app
    from engine.server.packs import load_pack_set
    from engine.server.settings import ServerSettings

    config = ServerSettings(packs=(str(my_pack),), sessions_dir=str(tmp_path / "sessions"))
    with TestClient(create_app(config, load_pack_set(config.packs))) as client:
        body = {"pack": "my-pack", "block": "ANSWER", "nonce": "4F2C9A", "output": bad}
        body["vars"] = {"question": "Q1"}
        answer = client.post("/v1/evaluate", json=body)
    assert answer.status_code == 200, answer.text
    decision = answer.json()["decision"]
    assert (decision["action"], decision["attempt"], decision["max_attempts"]) == ("REPAIR", 1, 2)
