"""Issue 35, plugins: an installed plugin that raises, calls sys.exit or never finishes
loading is an error naming its entry point, with a non-zero exit, from every command that
uses it; a pack that does not use it is not affected. Each case is an installed
distribution (a .dist-info folder on the path) and the real `rules` command.

``KeyboardInterrupt`` raised by the plugin's own import is the plugin's error too (it
loads in a thread of its own, which no signal reaches); a Ctrl-C of the user still stops
the command."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from conftest import REPO, PackMaker

HERE = Path(__file__).parent
GOOD = (REPO / "examples" / "sentinel" / "verdict.txt").read_bytes()
SENTINEL = ["--pack", "sentinel", "--block", "VERDICT", "--nonce", "4F2C9A"]
SENTINEL += ["--var", "criterion=AC1"]

LINES_PACK = """\
rulepack: toy-lines
version: 1.0.0
extends: [builtin:core]
contracts:
  haiku:
    kind: lines
    count: 3
"""

# what the plugin's module does when imported
IMPORTS = {
    "raises": 'raise RuntimeError("broken at import")',
    "exits 0": "import sys\nsys.exit(0)",
    "exits 3": "raise SystemExit(3)",
    "interrupts": "raise KeyboardInterrupt",
    "hangs": "import time\ntime.sleep(600)",
}
SAYS = {
    "raises": "RuntimeError: broken at import",
    "exits 0": "it called sys.exit(0)",
    "exits 3": "it called sys.exit(3)",
    "interrupts": "it raised KeyboardInterrupt",
    "hangs": "it did not load within 1 s",
}
NAMED = "the contract kind 'lines' (toy_plugin:KIND)"


def _installed(tmp_path: Path, module: str, group: str = "rules_engine.kinds") -> dict[str, str]:
    """A distribution whose entry point ``lines`` names ``toy_plugin:KIND``, the module's
    text ``module``; the environment of a process that sees it."""
    site = tmp_path / "site"
    info = site / "toy_plugin-0.1.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text("Metadata-Version: 2.1\nName: toy-plugin\nVersion: 0.1\n")
    (info / "entry_points.txt").write_text(f"[{group}]\nlines = toy_plugin:KIND\n")
    (site / "toy_plugin.py").write_text(module + "\n")
    path = os.pathsep.join([str(site), str(HERE), str(REPO)])
    return {**os.environ, "PYTHONPATH": path, "RULES_PLUGIN_TIMEOUT": "1"}


def _rules(env: dict[str, str], *args: str, stdin: bytes = b"") -> tuple[int, str, str]:
    done = subprocess.run(
        [sys.executable, "-m", "engine", *args],
        env=env,
        input=stdin,
        capture_output=True,
        timeout=120,
    )
    return done.returncode, done.stdout.decode(), done.stderr.decode()


@pytest.mark.heavy
@pytest.mark.parametrize("behaviour", list(IMPORTS))
def test_a_pack_using_a_broken_plugin_fails_naming_it(
    behaviour: str, tmp_path: Path, make_pack: PackMaker
) -> None:
    env = _installed(tmp_path, IMPORTS[behaviour])
    pack = str(make_pack(LINES_PACK))
    status, out, err = _rules(env, "check", pack, "--format", "json")
    assert status == 1, out + err
    (finding,) = json.loads(out)["packs"][0]["findings"]
    assert finding["rule"] == "plugin-broken"
    assert finding["message"] == f"{NAMED} cannot be loaded: {SAYS[behaviour]}" + (
        " (set RULES_PLUGIN_TIMEOUT to wait longer)" if behaviour == "hangs" else ""
    )
    status, out, err = _rules(env, "eval", "--pack", pack, "--block", "haiku", stdin=b"a\nb\nc\n")
    assert status == 2 and NAMED in err and SAYS[behaviour] in err, out + err
    assert "Traceback" not in err and "internal error" not in err


@pytest.mark.heavy
@pytest.mark.parametrize("behaviour", list(IMPORTS))
def test_commands_that_show_every_plugin_refuse_a_broken_one(
    behaviour: str, tmp_path: Path
) -> None:
    env = _installed(tmp_path, IMPORTS[behaviour])
    for args in (["schema"], ["check", "--list-rules"]):
        status, out, err = _rules(env, *args)
        assert status == 2, (args, out, err)
        assert out == "" and err.startswith(f"error: {NAMED} cannot be loaded: "), (args, err)
        assert "internal error" not in err


@pytest.mark.heavy
@pytest.mark.parametrize("behaviour", ["raises", "exits 0", "hangs"])
def test_a_pack_that_does_not_use_the_plugin_is_not_affected(
    behaviour: str, tmp_path: Path
) -> None:
    env = _installed(tmp_path, IMPORTS[behaviour])
    status, out, err = _rules(env, "check", "sentinel")
    assert (status, err) == (0, ""), out + err
    status, out, err = _rules(env, "eval", *SENTINEL, stdin=GOOD)
    assert (status, err) == (0, ""), out + err
    assert "PROCEED" in out


CHECK_EXITS = textwrap.dedent(
    """\
    import sys
    from lines_kind import LinesKind

    class Exiting(LinesKind):
        def check(self, name, contract, checker):
            sys.exit(0)

    KIND = Exiting()
    """
)


def test_a_plugin_exiting_while_a_pack_is_checked_is_an_error(
    tmp_path: Path, make_pack: PackMaker
) -> None:
    """The row: `rules check` of a pack using the kind exited 0 with no output."""
    env = _installed(tmp_path, CHECK_EXITS)
    status, out, err = _rules(env, "check", str(make_pack(LINES_PACK)))
    assert status == 2, out + err
    assert err.startswith(f"error: {NAMED}: toy_plugin (")
    assert "called sys.exit(0) while the command ran" in err


def test_a_broken_section_plugin_is_named_where_a_pack_uses_its_key(
    tmp_path: Path, make_pack: PackMaker
) -> None:
    env = _installed(tmp_path, IMPORTS["raises"], group="rules_engine.sections")
    pack = make_pack(
        "rulepack: p\nversion: 1.0.0\nextends: [builtin:core]\nlines: {}\n", name="uses"
    )
    status, out, err = _rules(env, "check", str(pack))
    assert status == 1 and "(plugin-broken)" in out, out + err
    assert "the rulepack section 'lines' (toy_plugin:KIND) cannot be loaded" in out
    assert "unknown key" not in out
