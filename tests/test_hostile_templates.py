"""Hostile templates and expressions (issue 13's rows): `rules check` refuses what the
sandbox would refuse or cannot bound, and a render that reaches a bound is a clear error
(exit 2, the template and line), never a hang, never "internal error". Each run is a real
`rules` process with a timeout; peak memory is read from the children's rusage."""

from __future__ import annotations

import resource
import time
from pathlib import Path

import pytest
from sentinel_cases import VERDICT_ARGS

from conftest import run_script, script, template_pack

GIB = 1024 * 1024  # ru_maxrss is in KiB on Linux


def bounded(*args: str, cwd: Path) -> tuple[int, str, float]:
    start = time.monotonic()
    done = run_script(script("rules"), *args, cwd=cwd, timeout=30)
    elapsed = time.monotonic() - start
    assert resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss < GIB  # under 1 GiB
    stderr = done.stderr.decode()
    assert "internal error" not in stderr and "Traceback" not in stderr
    return done.returncode, done.stdout.decode() + stderr, elapsed


@pytest.mark.parametrize(
    ("template", "problem"),
    [
        ("{{ ''.__class__ }}", "attribute '__class__' is refused by the sandbox"),
        ("{{ cycler.__init__.__globals__ }}", "attribute '__globals__' is refused"),
        ("{% include 'other.j2' %}", "templates cannot include, import or extend other files"),
        (
            "{% for i in range(100000) %}{% for j in range(100000) %}x{% endfor %}{% endfor %}",
            "nested loops of 10000000000 iterations",
        ),
        ("{{ range(200000) | length }}", "range of 200000 numbers (at most 100000)"),
    ],
)
@pytest.mark.heavy
def test_check_refuses_unsafe_templates(tmp_path: Path, template: str, problem: str) -> None:
    folder = template_pack(tmp_path, template)
    code, output, elapsed = bounded("check", ".", cwd=folder)
    assert code == 1 and "(unsafe-template)" in output and problem in output
    assert "rep.j2:1:1:" in output
    assert elapsed < 10


@pytest.mark.heavy
def test_constant_folding_does_not_hang_check(tmp_path: Path) -> None:
    folder = template_pack(tmp_path, "{{ 'x' * 10**10 }}")
    code, output, elapsed = bounded("check", ".", cwd=folder)
    assert code == 0, output  # nothing to see without rendering: the render refuses it
    assert elapsed < 10
    code, output, elapsed = bounded(
        "render", "--pack", ".", "--block", "doc", "out.txt", cwd=folder
    )
    assert code == 2
    assert "error: template 'rep' (rep.j2):1: a repetition of 10000000000 items" in output
    assert elapsed < 10


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{{ 'x' * 10**10 }}", "a repetition of 10000000000 items"),
        ("{{ 7 ** 100000 }}", "a power over 4096 bits"),
        ("{{ range(10**9) | length }}", "range of 1000000000 numbers"),
        ("line 1\n{{ ''.__class__ }}", ":2: access to attribute '__class__'"),
    ],
)
def test_render_bounds_are_errors(tmp_path: Path, template: str, message: str) -> None:
    from engine.core.errors import RenderError
    from engine.sandbox.environment import ENVIRONMENT

    compiled = ENVIRONMENT.from_string(template)
    with pytest.raises(RenderError, match="template"):
        compiled.render()
    try:
        compiled.render()
    except RenderError as exc:
        assert message in str(exc)


@pytest.mark.slow
def test_a_loop_without_output_stops_at_the_time_budget(tmp_path: Path) -> None:
    # `n` is not a constant, so `rules check` cannot see the size; the render's budget stops it.
    folder = template_pack(
        tmp_path,
        "{% set n = 100000 %}{% for i in range(n) %}"
        "{% for j in range(n) %}{% endfor %}{% endfor %}",
    )
    code, output, elapsed = bounded(
        "render", "--pack", ".", "--block", "doc", "out.txt", cwd=folder
    )
    assert code == 2 and "render ran over 5 s" in output
    assert elapsed < 15


def test_output_cap(tmp_path: Path) -> None:
    from engine.core.errors import RenderError
    from engine.sandbox.environment import ENVIRONMENT

    compiled = ENVIRONMENT.from_string("{% for i in range(100000) %}{{ 'y' * 100 }}{% endfor %}")
    with pytest.raises(RenderError, match="output over 4194304 characters"):
        compiled.render()


@pytest.mark.heavy
def test_unsafe_expressions_are_findings(tmp_path: Path) -> None:
    folder = template_pack(tmp_path, "{{ parser_error }}", guard="output.__class__")
    code, output, _ = bounded("check", ".", cwd=folder)
    assert code == 1 and "(unsafe-expression)" in output
    assert "attribute '__class__' is refused by the sandbox" in output


# ---------------------------------------------------------------- packs stay in their workspace


@pytest.mark.heavy
def test_extends_outside_the_workspace_is_refused_before_reading(tmp_path: Path) -> None:
    folder = tmp_path / "work" / "a"
    folder.mkdir(parents=True)
    (folder / "pack.yaml").write_text(
        "rulepack: a\nextends: [../../../../../../../../etc/passwd]\n", encoding="utf-8"
    )
    code, output, elapsed = bounded("check", ".", cwd=folder)
    assert code == 1 and "(extends-outside-workspace)" in output and elapsed < 10
    assert "is not a pack" in output and "root:" not in output  # /etc/passwd never parsed
    secret = tmp_path / "secret.yaml"
    secret.write_text("rulepack: secret\n", encoding="utf-8")
    (folder / "pack.yaml").write_text(
        "rulepack: a\nextends: [../../secret.yaml]\n", encoding="utf-8"
    )
    code, output, _ = bounded("check", ".", cwd=folder)
    assert code == 1 and "is outside the workspace" in output


def test_siblings_and_git_workspaces_may_be_extended(tmp_path: Path) -> None:
    repo = tmp_path / "repo"
    (repo / ".git").mkdir(parents=True)
    (repo / "shared" / "base").mkdir(parents=True)
    (repo / "shared" / "base" / "pack.yaml").write_text(
        "rulepack: base\nextends: [builtin:core]\n", encoding="utf-8"
    )
    child = repo / "teams" / "x" / "child"
    child.mkdir(parents=True)
    (child / "pack.yaml").write_text(
        "rulepack: child\nextends: [../../../shared/base]\n", encoding="utf-8"
    )
    code, output, _ = bounded("check", ".", cwd=child)
    assert code == 0, output


@pytest.mark.heavy
def test_a_derived_pack_finds_the_base_packs_files(tmp_path: Path) -> None:
    from conftest import REPO

    folder = tmp_path / "derived"
    folder.mkdir()
    (folder / "pack.yaml").write_text(
        "rulepack: der\nextends: [builtin:sentinel]\n"
        "templates:\n  format_repair: {file: mine.j2, purpose: repair}\n",
        encoding="utf-8",
    )
    (folder / "mine.j2").write_text(
        "MINE {{ parser_error }}\n{{ format_contract }}", encoding="utf-8"
    )
    bad = REPO / "examples" / "sentinel" / "verdict_bad.txt"
    code, output, _ = bounded(
        "render",
        "--pack",
        ".",
        "--block",
        "VERDICT",
        "--nonce",
        "4F2C9A",
        "--var",
        "criterion=AC1",
        str(bad),
        cwd=folder,
    )
    assert code == 0, output
    assert output.startswith("MINE line 2: ANSWER must be unquoted\nVERDICT block")


# ---------------------------------------------------------------- pack bytes and expressions


def test_a_nul_byte_in_a_pack_is_a_finding(tmp_path: Path) -> None:
    (tmp_path / "pack.yaml").write_bytes(b"rulepack: x\nextends: [builtin:core]\x00\n")
    code, output, _ = bounded("check", ".", cwd=tmp_path)
    assert code == 1
    assert "pack.yaml:2:24: [error] invalid YAML: control character '\\x00'" in output


@pytest.mark.parametrize(
    "expression",
    [
        "(" * 300 + "attempt" + ")" * 300,
        " or ".join(["attempt > 1"] * 1000),
    ],
)
@pytest.mark.heavy
def test_huge_or_deep_expressions_are_findings(tmp_path: Path, expression: str) -> None:
    folder = template_pack(tmp_path, "{{ parser_error }}", guard=expression)
    code, output, elapsed = bounded("check", ".", cwd=folder)
    assert code == 1 and "(expression-too-large)" in output
    assert elapsed < 10


# ---------------------------------------------------------------- outputs past the cap


@pytest.mark.heavy
def test_an_endless_output_is_not_read_past_the_cap(tmp_path: Path) -> None:
    args = [
        *VERDICT_ARGS,
        "/dev/zero",
    ]
    code, output, elapsed = bounded("parse", *args, cwd=tmp_path)
    assert code == 1 and elapsed < 10
    assert "error: output is larger than 67108864 bytes" in output
    code, output, elapsed = bounded("eval", *args, cwd=tmp_path)
    assert code == 1 and elapsed < 10
    assert "failure  OUTPUT_TOO_LARGE (HIGH): output is larger than 67108864 bytes" in output


@pytest.mark.heavy
def test_the_cap_is_an_option(tmp_path: Path) -> None:
    from conftest import REPO

    verdict = str(REPO / "examples" / "sentinel" / "verdict.txt")
    code, output, _ = bounded(
        "parse",
        *VERDICT_ARGS,
        "--max-output-bytes",
        "10",
        "--format",
        "json",
        verdict,
        cwd=tmp_path,
    )
    assert code == 1 and '"type": "OUTPUT_TOO_LARGE"' in output


# ---------------------------------------------------------------- caller mistakes


@pytest.mark.parametrize(
    ("extra", "needs"),
    [
        ([], "--nonce and --var criterion=..."),
        (["--nonce", "4F2C9A"], "--var criterion=..."),
    ],
)
def test_missing_caller_inputs_are_usage_errors(extra: list[str], needs: str) -> None:
    from conftest import REPO, run_cli

    verdict = str(REPO / "examples" / "sentinel" / "verdict.txt")
    for command in ("eval", "render"):
        result = run_cli(command, "--pack", "sentinel", "--block", "VERDICT", *extra, verdict)
        assert result.exit_code == 2, result.output
        assert f"block 'VERDICT' needs {needs}" in result.stderr


def test_parse_and_eval_refuse_unknown_vars_alike() -> None:
    from conftest import REPO, run_cli

    verdict = str(REPO / "examples" / "sentinel" / "verdict.txt")
    args = [
        *VERDICT_ARGS,
        "--var",
        "bogus=1",
        verdict,
    ]
    parsed = run_cli("parse", *args)
    evaluated = run_cli("eval", *args)
    assert (parsed.exit_code, evaluated.exit_code) == (2, 2)
    assert "bogus" in parsed.stderr and "bogus" in evaluated.stderr


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{{ 'x'|center(1000000000) }}", "a width of 1000000000"),
        ("{{ 'a b'|indent(100000000) }}", "a width of 100000000"),
        ("{{ ('x' * 4000000)|wordwrap(1) }}", "wordwrap of more than"),
        ("{{ '%1000000000s' % 'x' }}", "format width or precision"),
        ("{{ '%*s'|format(1000000000, 'x') }}", "format width or precision"),
        ("{{ '{:>1000000000}'.format('x') }}", "format width or precision"),
        ("{% macro f() %}{{ f() }}{% endmacro %}\n{{ f() }}", "recursion too deep"),
    ],
)
def test_size_taking_filters_and_recursion_are_bounded(template: str, message: str) -> None:
    from engine.core.errors import RenderError
    from engine.sandbox.environment import ENVIRONMENT

    compiled = ENVIRONMENT.from_string(template)  # compiling computes nothing
    with pytest.raises(RenderError, match=message):
        compiled.render()


@pytest.mark.heavy
def test_no_constant_folding_of_filters_at_check(tmp_path: Path) -> None:
    """`{{ 'x'|center(10**9) }}` was folded while compiling: 19 s and 3 GB at check."""
    folder = template_pack(tmp_path, "{{ 'x'|center(1000000000) }}")
    code, _, elapsed = bounded("check", str(folder), cwd=tmp_path)
    assert code == 0 and elapsed < 10
    code, text, elapsed = bounded(
        "render", "--pack", str(folder), "--block", "doc", "out.txt", cwd=folder
    )
    assert code == 2 and "rep.j2):1: a width of 1000000000" in text and elapsed < 10


def test_lipsum_cycler_joiner_are_not_provided(tmp_path: Path) -> None:
    folder = template_pack(tmp_path, "{{ lipsum(1000000) }}{{ cycler(1) }}{{ joiner() }}")
    code, text, elapsed = bounded("check", str(folder), cwd=tmp_path)
    assert code == 1 and elapsed < 10
    for name in ("lipsum", "cycler", "joiner"):
        assert f"uses {name!r}, which the engine does not provide" in text


@pytest.mark.heavy
def test_a_nul_byte_in_a_template_is_a_finding(tmp_path: Path) -> None:
    folder = template_pack(tmp_path, "line 1\nab\x00c{{ 1 }}")
    code, text, elapsed = bounded("check", str(folder), cwd=tmp_path)
    assert code == 1 and elapsed < 10
    assert "rep.j2:2:3: [error] template 'rep' holds a NUL byte (template-encoding)" in text
    code, text, _ = bounded(
        "render", "--pack", str(folder), "--block", "doc", "out.txt", cwd=folder
    )
    assert code == 2 and "holds a NUL byte" in text
