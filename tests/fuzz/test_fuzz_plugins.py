"""The fuzzing harness on plugins (issue 35, item 7): a generated plugin module installed
behind an entry point (a .dist-info folder on the path, as tests/contracts installs one)
that raises at import (odd exceptions, odd messages), calls sys.exit with odd codes, names
an odd object, or a kind whose methods raise or exit; then a real `rules` command. A
command that uses the plugin (a pack using its kind or section, `schema`, `check
--list-rules`, `eval`) exits non-zero naming the entry point; one that does not (a shipped
pack) is not affected; none shows a traceback or an internal error."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest
from fuzzkit import SECONDS, _judge
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fuzz import EXPLORE, FUZZ, SMOKE

from conftest import REPO

CONTRACTS = REPO / "tests" / "contracts"
ENTRY = "toy_plugin:KIND"
PACK = """\
rulepack: toy-lines
version: 1.0.0
extends: [builtin:core]
contracts:
  haiku:
    kind: lines
    count: 3
"""
SECTION_PACK = "rulepack: p\nversion: 1.0.0\nextends: [builtin:core]\nlines: {}\n"

MESSAGES = ["x", "", "\x00", "\ud800", "é" * 3, "x" * 100_000, "{0}", "%s", "\x1b[31mred"]
EXCEPTIONS = [
    "RuntimeError", "ImportError", "ModuleNotFoundError", "SyntaxError", "RecursionError",
    "MemoryError", "KeyboardInterrupt", "GeneratorExit", "StopIteration", "UnicodeError",
    "Hostile", "Meta",
]  # fmt: skip
EXIT_CODES = ["0", "1", "2", "3", "255", "256", "-1", "None", "'text'", "2**70", "3.5", "object()"]
VALUES = [
    "None", "42", "'lines'", "object()", "LinesKind", "type", "Hostile()", "Lying()",
    "[LinesKind()]", "lambda: LinesKind()",
]  # fmt: skip
METHODS = ["check", "evaluate", "parse", "model", "name", "__getattr__"]

PRELUDE = textwrap.dedent(
    """\
    import sys
    from lines_kind import LinesKind

    class Meta(type):
        def __getattribute__(cls, name):
            if name in ("__name__", "__qualname__", "__module__"):
                raise RuntimeError("no name")
            return type.__getattribute__(cls, name)

    class Hostile(Exception, metaclass=Meta):
        def __str__(self):
            raise RuntimeError("no str")

    class Lying:
        def __getattr__(self, name):
            raise RuntimeError(name)
        def __repr__(self):
            raise RuntimeError("no repr")
    """
)


@st.composite
def plugins(draw: st.DrawFn) -> str:
    """The text of a plugin module that is broken one way or another."""
    how = draw(st.sampled_from(["raises", "exits", "value", "method"]))
    if how == "raises":
        kind = draw(st.sampled_from(EXCEPTIONS))
        message = draw(st.sampled_from(MESSAGES))
        return PRELUDE + f"raise {kind}({message!r})\n"
    if how == "exits":
        code = draw(st.sampled_from(EXIT_CODES))
        call = draw(st.sampled_from(["sys.exit({})", "raise SystemExit({})", "exit({})"]))
        return PRELUDE + call.format(code) + "\n"
    if how == "value":
        return PRELUDE + f"KIND = {draw(st.sampled_from(VALUES))}\n"
    method = draw(st.sampled_from(METHODS))
    body = draw(
        st.sampled_from(
            ["sys.exit(0)", "raise SystemExit(3)", "raise Hostile()", "raise KeyboardInterrupt"]
        )
    )
    return PRELUDE + textwrap.dedent(
        f"""\
        class Broken(LinesKind):
            def {method}(self, *args, **kwargs):
                {body}

        KIND = Broken()
        """
    )


COMMANDS = [
    ("check", "{pack}"), ("check", "--format", "json", "{pack}"), ("schema",),
    ("check", "--list-rules"), ("eval", "--pack", "{pack}", "--block", "haiku"),
    ("parse", "--pack", "{pack}", "--block", "haiku"), ("check", "sentinel"),
]  # fmt: skip
GROUPS = ["rules_engine.kinds", "rules_engine.kinds", "rules_engine.sections"]


def plugin_cases() -> st.SearchStrategy[tuple[str, str, tuple[str, ...]]]:
    """(the plugin module's text, its entry point group, the command)."""
    return st.tuples(plugins(), st.sampled_from(GROUPS), st.sampled_from(COMMANDS))


def run_plugin_case(module: str, group: str, command: tuple[str, ...]) -> str | None:
    """The command as a real `rules` process seeing the plugin: what is wrong, or None."""
    with tempfile.TemporaryDirectory() as temp:
        site = Path(temp) / "site"
        info = site / "toy_plugin-0.1.dist-info"
        info.mkdir(parents=True)
        (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-plugin\nVersion: 0.1\n")
        (info / "entry_points.txt").write_text(f"[{group}]\nlines = {ENTRY}\n")
        (site / "toy_plugin.py").write_text(module, encoding="utf-8", errors="surrogatepass")
        pack = Path(temp) / "pack"
        pack.mkdir()
        section = group.endswith("sections")
        (pack / "pack.yaml").write_text(SECTION_PACK if section else PACK)
        path = os.pathsep.join([str(site), str(CONTRACTS), str(REPO)])
        env = {**os.environ, "PYTHONPATH": path, "RULES_PLUGIN_TIMEOUT": "1"}
        env["RULES_CACHE_DIR"] = str(Path(temp) / "cache")
        args = [part.replace("{pack}", str(pack)) for part in command]
        try:
            done = subprocess.run(
                [sys.executable, "-m", "engine", *args],
                env=env,
                cwd=temp,
                input=b"a\nb\nc\n",
                capture_output=True,
                timeout=SECONDS * 3,
            )
        except subprocess.TimeoutExpired:
            return f"over {SECONDS * 3:g} s"
    output = done.stdout.decode(errors="replace") + done.stderr.decode(errors="replace")
    problem = _judge(done.returncode, output)
    if problem is not None:
        return problem
    uses = "sentinel" not in command and not (section and command[0] in ("eval", "parse"))
    if "class Broken" in module:  # it loads: only a command calling the broken method fails
        uses = "def check(" in module and command[0] == "check" and "{pack}" in command
    if uses and (done.returncode == 0 or ENTRY not in output):
        return f"exit {done.returncode} without naming {ENTRY}: {output[-400:]}"
    return None


def _check(case: Any) -> None:
    module, group, command = case
    problem = run_plugin_case(module, group, command)
    shown = module[len(PRELUDE) :] if module.startswith(PRELUDE) else module
    assert problem is None, f"{problem}\n[{group}] {command}\n--- toy_plugin.py:\n{shown}"


@pytest.mark.heavy
def test_fuzz_plugins_smoke() -> None:
    @settings(SMOKE, max_examples=3)
    @given(case=plugin_cases())
    def run(case: Any) -> None:
        _check(case)

    run()


@pytest.mark.slow
def test_fuzz_plugins() -> None:
    @settings(FUZZ, max_examples=FUZZ.max_examples if EXPLORE else 60)
    @given(case=plugin_cases())
    def run(case: Any) -> None:
        _check(case)

    run()


@pytest.mark.parametrize("value", ["None", "Lying()", "42"])
def test_a_section_entry_point_naming_no_section_is_a_broken_plugin(value: str) -> None:
    """Found by test_fuzz_plugins: a `rules_engine.sections` entry point naming None made
    `rules check` of a pack using its key an internal AttributeError."""
    module = PRELUDE + f"KIND = {value}\n"
    assert run_plugin_case(module, "rules_engine.sections", ("check", "{pack}")) is None


@pytest.mark.parametrize("raised", ["Hostile()", "RuntimeError('x')"])
def test_a_kind_raising_in_its_check_is_named_not_an_internal_error(raised: str) -> None:
    """Found by test_fuzz_plugins: a kind whose `check` raised was an internal error, and
    one raising an exception whose type has no readable name was a traceback."""
    module = PRELUDE + textwrap.dedent(
        f"""\
        class Broken(LinesKind):
            def check(self, *args, **kwargs):
                raise {raised}

        KIND = Broken()
        """
    )
    assert run_plugin_case(module, "rules_engine.kinds", ("check", "{pack}")) is None


def test_a_kind_entry_point_naming_a_class_is_a_broken_plugin() -> None:
    """Found by test_fuzz_plugins: an entry point naming the kind's class (not an instance)
    was registered, and `rules check` of a pack using it an internal TypeError."""
    module = PRELUDE + "KIND = LinesKind\n"
    assert run_plugin_case(module, "rules_engine.kinds", ("check", "{pack}")) is None
