"""What a template, a pack expression or a model output can make fail at run time is a
clean error naming the place (exit 2), never "internal error" or a traceback: template
runtime errors (issue: `{{ 1/0 }}` was `internal error: ZeroDivisionError`), conditions
that raise, and text built with ``~`` or ``+`` past the render's size bound."""

from __future__ import annotations

from pathlib import Path

import pytest

from conftest import run_cli, template_pack


def render(folder: Path) -> tuple[int, str, str]:
    result = run_cli("render", "--pack", str(folder), "--block", "doc", str(folder / "out.txt"))
    return result.exit_code, result.stdout, result.stderr


@pytest.mark.parametrize(
    ("template", "message"),
    [
        ("{{ 1/0 }}", ":1: division by zero"),
        ("line 1\n{{ [1, 'a']|sort }}", ":2: '<' not supported between instances"),
        ("{{ [1, 'a']|max }}", ":1: '>' not supported between instances"),
        ("{{ {1: 'a', 'b': 2}|dictsort }}", ":1: '<' not supported between instances"),
        ("{{ parser_error|slice(0)|list }}", ":1: integer division or modulo by zero"),
        ("{{ 'abcdefghijklmnop'|truncate(-5) }}", ":1: expected length >= 3, got -5"),
        ("{{ (1e308 * 10)|int }}", ":1: cannot convert float infinity to integer"),
        ("a\nb\n{{ parser_error.nosuch.deeper }}", ":3: 'str object' has no attribute"),
    ],
)
def test_template_runtime_errors_name_the_template_and_line(
    tmp_path: Path, template: str, message: str
) -> None:
    folder = template_pack(tmp_path, template)
    assert run_cli("check", str(folder)).exit_code == 0  # only a render can see these
    code, stdout, stderr = render(folder)
    assert code == 2, stdout + stderr
    assert f"error: template 'rep' (rep.j2){message}" in stderr
    assert "internal error" not in stderr and stdout == ""


def test_a_lone_surrogate_renders_as_a_replacement_character(tmp_path: Path) -> None:
    folder = template_pack(tmp_path, "before {{ '\\ud800' }} after\n")
    code, stdout, stderr = render(folder)
    assert code == 0, stderr
    assert "before \ufffd after" in stdout


# ---------------------------------------------------------------- conditions


@pytest.mark.parametrize(
    ("expression", "message"),
    [
        ("1/0", "division by zero"),
        ("output < 50", "'<' not supported between instances of 'str' and 'int'"),
        ("error is search(5)", "object of type 'int' has no len()"),
        ("('a' * 3000000000)", "a repetition of 3000000000 items"),
        ("'%2000000000s'|format", "a format width or precision of a million or more"),
    ],
)
def test_a_guard_that_fails_names_the_expression_and_its_place(
    tmp_path: Path, expression: str, message: str
) -> None:
    import shutil

    from conftest import REPO

    folder = tmp_path / "sentinel"
    shutil.copytree(REPO / "rules" / "sentinel", folder)
    pack = folder / "pack.yaml"
    text = pack.read_text(encoding="utf-8")
    guard = 'when: "output | length < 50"'
    line = text[: text.index(guard)].count("\n") + 1
    column = text.splitlines()[line - 1].index(guard) + len("when: ") + 1
    pack.write_text(text.replace(guard, f"when: {expression!r}", 1), encoding="utf-8")
    junk = REPO / "rules" / "sentinel" / "tests" / "outputs" / "PLAN.junk.txt"
    result = run_cli(
        "eval", "--pack", str(folder), "--block", "PLAN", "--nonce", "4F2C9A", str(junk)
    )
    assert result.exit_code == 2, result.output
    assert f"pack.yaml:{line}:{column}: condition {expression!r} failed: {message}" in (
        result.stderr
    )
    assert "internal error" not in result.stderr


def test_a_condition_that_fails_is_a_condition_error() -> None:
    from engine.core.errors import ConditionError, EvaluationError, Position
    from engine.sandbox.environment import compile_condition

    where = Position("pack.yaml", 3, 7)
    with pytest.raises(ConditionError, match=r"^pack.yaml:3:7: condition 'x < 1' failed: '<'"):
        compile_condition("x < 1", where)(x="a")  # native closure, then Jinja: both raise
    with pytest.raises(EvaluationError, match=r"^condition 'x\|sort' failed: '<'"):
        compile_condition("x|sort")(x=[1, "a"])  # Jinja only
    assert compile_condition("x < 1", where)(x=0) is True


# ---------------------------------------------------------------- concatenation

DOUBLING = (
    "line 1\n{{% set ns = namespace(s={start}) %}}{{% for i in range(23) %}}"
    "{{% set ns.s = ns.s {op} ns.s %}}{{% endfor %}}{{{{ ns.s|length }}}}"
)


@pytest.mark.parametrize(
    ("start", "op"), [("'ab'", "~"), ("'ab'", "+"), ("['a', 'b']", "+"), ("'ab'", "~ '' ~")]
)
def test_concatenation_is_bounded_like_repetition(tmp_path: Path, start: str, op: str) -> None:
    """Doubling a text with `~` or `+` 31 times reached 6 GB before the time budget saw it;
    a result over the render's size bound is refused at the step that would build it."""
    folder = template_pack(tmp_path, DOUBLING.format(start=start, op=op))
    code, stdout, stderr = render(folder)
    assert code == 2, stdout
    assert "error: template 'rep' (rep.j2):2: a concatenation of 8388608 " in stderr
    assert "(at most 4194304)" in stderr


def test_ordinary_concatenation_is_unchanged() -> None:
    from engine.sandbox.environment import ENVIRONMENT

    template = "{{ 'a' ~ 1 ~ none ~ [2] }} {{ 'x' + 'y' }} {{ [1] + [2] }} {{ 1 + 2.5 }}"
    assert ENVIRONMENT.from_string(template).render() == "a1None[2] xy [1, 2] 3.5"
    bound = "{{ ('x' * 4194303) ~ 'y' }}"
    assert len(ENVIRONMENT.from_string(bound).render()) == 4194304


@pytest.mark.parametrize(
    ("template", "message"),
    [
        (  # a macro doubling its argument into a block set, 23 levels deep
            "{% macro d(s, n) %}{% set t %}{{ s }}{{ s }}{% endset %}"
            "{% if n > 0 %}{{ d(t, n - 1) }}{% else %}{{ s|length }}{% endif %}{% endmacro %}\n"
            "{{ d('ab', 23) }}",
            "a captured text of 8388608 characters (at most 4194304)",
        ),
        (
            "{{ ('a' * 4000000)|replace('a', 'aaaa')|length }}",
            "a replace giving 16000000 characters (at most 4194304)",
        ),
        (  # joined items are counted as text before the join
            "{{ (['aaaa'] * 4000000)|join|length }}",
            "a value of more than 4194304 characters as text",
        ),
        (  # lists of references to one long text, written by str(), a filter, % or format
            "{{ (['a' * 4000000] * 4000000)|string|length }}",
            "a value of more than 4194304 characters as text",
        ),
        ("{{ [['a' * 4000000]] * 100 }}", "a value of more than 4194304 characters as text"),
        ("{{ '%s' % (['a' * 4000000] * 10) }}", "a value of more than 4194304 characters as text"),
        (
            "{{ '{}'.format(['a' * 4000000] * 10) }}",
            "a value of more than 4194304 characters as text",
        ),
        ("{{ (['a' * 4000000] * 10)|upper }}", "a value of more than 4194304 characters as text"),
        (
            "{{ ([['a' * 4000000]] * 10)|join }}",
            "a value of more than 4194304 characters as text",
        ),
    ],
)
def test_captured_text_replace_and_join_are_bounded(
    tmp_path: Path, template: str, message: str
) -> None:
    folder = template_pack(tmp_path, template)
    code, stdout, stderr = render(folder)
    assert code == 2, stdout
    assert "error: template 'rep' (rep.j2):" in stderr and message in stderr


def test_ordinary_replace_join_and_captures_are_unchanged() -> None:
    from engine.sandbox.environment import ENVIRONMENT

    template = (
        "{% macro m(x) %}<{{ x }}>{% endmacro %}{% set t %}{{ m(1) }}{{ m(2) }}{% endset %}"
        "{{ t }} {{ 'aXbX'|replace('X', '-') }} {{ 'aaa'|replace('a', 'b', 2) }} "
        "{{ 'ab'|replace('', '.') }} {{ [1, 'b']|join(', ') }} "
        "{{ [{'n': 'x'}]|join(attribute='n') }}"
    )
    assert ENVIRONMENT.from_string(template).render() == "<1><2> a-b- bba .a.b. 1, b x"
