"""Shared test helpers. Tests write only inside their temp dirs."""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
from click.testing import CliRunner, Result

import engine
from engine.cli.main import cli

if TYPE_CHECKING:
    from installed import Installed

# The engine runs here as an installed engine runs: from its bytecode cache. A shell that
# sets PYTHONDONTWRITEBYTECODE (some CI images and sandboxes do) would make every `rules`
# process the tests start compile the engine's modules from source, and pytest rewrite
# every test module's asserts on every run. Dropped here, before any test starts a
# process or imports a test module.
os.environ.pop("PYTHONDONTWRITEBYTECODE", None)
sys.dont_write_bytecode = False

REPO = Path(__file__).resolve().parent.parent
FIXTURES = Path(__file__).resolve().parent / "fixtures"
SCRIPTS = Path(sys.executable).parent


NESTED = "RULES_ENGINE_NESTED_TEST_RUN"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """The README test runs the suite again inside itself; there the slow and heavy tests
    (run by the outer suite) are skipped."""
    if os.environ.get(NESTED) != "1":
        return
    skip = pytest.mark.skip(reason="slow or heavy test, run by the outer suite")
    for item in items:
        if "slow" in item.keywords or "heavy" in item.keywords:
            item.add_marker(skip)


@pytest.fixture(scope="session", autouse=True)
def _private_pack_cache(tmp_path_factory: pytest.TempPathFactory) -> Iterator[None]:
    """The compiled-pack cache of `rules parse` goes to a folder of this test run (also for
    CLI subprocesses, which inherit the environment), never to the user's cache."""
    folder = tmp_path_factory.mktemp("pack-cache")
    previous = os.environ.get("RULES_CACHE_DIR")
    os.environ["RULES_CACHE_DIR"] = str(folder)
    yield
    if previous is None:
        os.environ.pop("RULES_CACHE_DIR", None)
    else:
        os.environ["RULES_CACHE_DIR"] = previous


@pytest.fixture(autouse=True)
def _isolated_cwd(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every test runs in its own empty working directory."""
    work = tmp_path / "cwd"
    work.mkdir()
    monkeypatch.chdir(work)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.delenv("RULES_LEDGER", raising=False)  # sessions in their folders
    yield


def run_cli(
    *args: str, input: str | bytes | None = None, env: dict[str, str] | None = None
) -> Result:
    runner = CliRunner()
    return runner.invoke(cli, list(args), input=input, env=env, catch_exceptions=False)


@functools.cache
def shipped_pack(name: str) -> engine.Pack:
    """A shipped pack, loaded once in this test process for the modules that only read it:
    each load validates the pack again (0.2 s), and every worker collects every module."""
    return engine.load_pack(name)


PackMaker = Callable[..., Path]


@pytest.fixture(scope="session")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    """The engine built and installed as a user installs it, once per run (slow tests)."""
    from installed import build_and_install

    return build_and_install(tmp_path_factory.mktemp("installed"))


@pytest.fixture
def make_pack(tmp_path: Path) -> PackMaker:
    """Write a pack folder from YAML text and extra files; return its folder."""

    def make(yaml_text: str, name: str = "pack", files: dict[str, str] | None = None) -> Path:
        folder = tmp_path / name
        folder.mkdir(parents=True, exist_ok=True)
        (folder / "pack.yaml").write_text(textwrap.dedent(yaml_text).lstrip(), encoding="utf-8")
        for rel, text in (files or {}).items():
            target = folder / rel
            target.parent.mkdir(parents=True, exist_ok=True)
            target.write_text(textwrap.dedent(text), encoding="utf-8")
        return folder

    return make


def copy_fixture(name: str, dest: Path) -> Path:
    target = dest / name
    shutil.copytree(FIXTURES / "packs" / name, target)
    return target


def script(name: str) -> str:
    """The installed console script next to this interpreter."""
    path = SCRIPTS / name
    return str(path) if path.exists() else shutil.which(name) or name


def run_script(
    *args: str, cwd: Path | None = None, input: bytes | None = None, timeout: float = 120
) -> subprocess.CompletedProcess[bytes]:
    env = {k: v for k, v in os.environ.items() if k != "GITHUB_ACTIONS"}
    return subprocess.run(
        list(args), cwd=cwd, input=input, capture_output=True, timeout=timeout, env=env, check=False
    )


def heavy_imports(args: list[str], cache: Path, stdin: str | None = None) -> list[str]:
    """Which of the heavy libraries a fresh process running `rules ARGS` (with the
    compiled-pack cache in ``cache``) imports: the start-up promises of the cache."""
    probe = (
        "import sys\nfrom engine.cli.main import main\n"
        f"sys.argv = ['rules', *{args!r}]\n"
        "try:\n    main()\nexcept SystemExit:\n    pass\n"
        "heavy = ('yaml', 'pydantic', 'jinja2', 'jsonschema', 'packaging')\n"
        "print(sorted(m for m in heavy if m in sys.modules), file=sys.stderr)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", probe],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "RULES_CACHE_DIR": str(cache)},
    )
    last = done.stderr.splitlines()[-1] if done.stderr else ""
    assert last.startswith("["), done.stderr
    return [name.strip("' ") for name in last.strip("[]").split(",") if name.strip()]


def child_pids(pid: int, at_least: int = 1, timeout: float = 30) -> list[str]:
    """The child processes of ``pid`` (Linux's /proc), once there are ``at_least`` of them
    or ``timeout`` seconds have passed."""
    import time

    children = Path(f"/proc/{pid}/task/{pid}/children")
    deadline = time.monotonic() + timeout
    while len(children.read_text().split()) < at_least and time.monotonic() < deadline:
        time.sleep(0.05)
    return children.read_text().split()


def still_running(pids: list[str], timeout: float) -> list[str]:
    """Those of ``pids`` still running after waiting up to ``timeout`` seconds for them to
    end. A zombie has ended: who reaps it is not the test's to say."""
    import time

    def running(pid: str) -> bool:
        try:
            stat = Path(f"/proc/{pid}/stat").read_text()
        except OSError:
            return False
        return stat.rsplit(")", 1)[1].split()[0] != "Z"

    deadline = time.monotonic() + timeout
    while any(map(running, pids)) and time.monotonic() < deadline:
        time.sleep(0.05)
    return [pid for pid in pids if running(pid)]


TEMPLATE_PACK = """\
rulepack: hostile
extends: [builtin:core]
contracts:
  doc: {kind: text, min_chars: 5}
triggers:
  doc: {on: [WRONG_FORMAT], max_attempts: 1, template: rep}
templates:
  rep: {file: rep.j2, purpose: repair}
"""


def template_pack(tmp_path: Path, template: str, guard: str | None = None) -> Path:
    """A pack whose one repair template (rep.j2) is ``template`` and whose trigger has the
    guard ``guard``, with an output (out.txt) that fails its text contract."""
    folder = tmp_path / "pack"
    folder.mkdir()
    text = TEMPLATE_PACK
    if guard is not None:
        text = text.replace(
            "max_attempts: 1, template: rep}",
            f"max_attempts: 1, template: rep,\n        skip_when: [{{name: g, when: {guard!r}}}]}}",
        )
    (folder / "pack.yaml").write_text(text, encoding="utf-8")
    (folder / "rep.j2").write_text(template, encoding="utf-8")
    (folder / "out.txt").write_text("hi\n", encoding="utf-8")
    return folder


# A real PostgreSQL server (started on first use) and the `ledger_url` fixture of the
# tests that run on both backends.
from pg_server import ledger_url, postgres_server, session_backend  # noqa: E402, F401
