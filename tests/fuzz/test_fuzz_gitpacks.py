"""The fuzzing harness on git packs and lock files (issue 35, item 7): a pack extending a
git pack of a local repository (no network), with a generated ``extends`` reference and a
generated ``rules.lock`` (commits, names, URLs with odd characters, traversal, entries of
the wrong type, files that are no lock), then `rules check` and `rules lock` on it. Each
run must end without an internal error, with a documented exit status, and write nothing
outside its pack folder and its cache folder (the repository is left as it was)."""

from __future__ import annotations

import hashlib
import json
import os
import shutil
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fuzzkit import _bounded, _problem
from hypothesis import given, settings
from hypothesis import strategies as st
from test_fuzz import FUZZ, SMOKE

from conftest import run_cli

GIT = ["git", "-c", "user.email=t@example.com", "-c", "user.name=t"]


def _git(*args: str, cwd: Path) -> str:
    done = subprocess.run([*GIT, *args], cwd=cwd, check=True, capture_output=True, text=True)
    return done.stdout.strip()


@pytest.fixture(scope="module")
def origin(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, dict[str, str]]]:
    """A git repository holding a pack: (its folder, its reference, the lock entry `rules
    lock` writes for it)."""
    root = tmp_path_factory.mktemp("origin")
    repo = root / "repo"
    repo.mkdir()
    _git("init", "-q", "-b", "main", cwd=repo)
    assert run_cli("init", "shared", "--dir", str(repo / "packs")).exit_code == 0
    (repo / "packs" / "link").symlink_to("/etc")  # leaves the repository
    _git("add", "-A", cwd=repo)
    _git("commit", "-qm", "one", cwd=repo)
    _git("tag", "v1", cwd=repo)
    ref = f"git+{repo.as_uri()}@main#packs/shared"
    pack = root / "mine"
    _pack(pack, ref)
    previous = os.environ.get("RULES_CACHE_DIR")
    os.environ["RULES_CACHE_DIR"] = str(root / "cache")
    try:
        locked = run_cli("lock", str(pack))
    finally:
        _restore(previous)
    assert locked.exit_code == 0, locked.output
    entry = json.loads((pack / "rules.lock").read_text())["packs"][ref]
    yield repo, ref, entry


def _restore(previous: str | None) -> None:
    if previous is None:
        os.environ.pop("RULES_CACHE_DIR", None)
    else:
        os.environ["RULES_CACHE_DIR"] = previous


def _pack(folder: Path, ref: str) -> None:
    folder.mkdir(parents=True, exist_ok=True)
    (folder / "pack.yaml").write_text(
        'rulepack: mine\nversion: 1.0.0\nrequires: ">=0.1"\ndescription: x\n'
        f"extends: [{json.dumps(ref)}]\n",
        encoding="utf-8",
        errors="surrogatepass",
    )


ODD = ["", " ", "\x00", "\n", "é", "\ud800", "%00", "%2e%2e", "$(touch x)", "`id`", ";", "|"]
URLS = [
    "{repo}", "{repo}/", "{repo}/../repo", "{repo}.git", "file:///nowhere", "/nowhere",
    "--upload-pack=touch made", "-oProxyCommand=touch made", "ext::sh -c touch% made",
    "ext::sh", "fd::3", "https://127.0.0.1:9/x.git", "ssh://-oProxyCommand=x/y",
    "file://{repo}%00", "file://localhost{repo}", "{repo}?x=1", "{repo}#frag",
]  # fmt: skip
REVS = ["main", "v1", "HEAD", "{commit}", "{commit}^", "main~9", "-c", "--x", "@", "..", "x" * 300]
PATHS = [
    "packs/shared", "packs/shared/", "./packs/shared", "packs/../packs/shared", "../..",
    "/etc", "packs/none", "packs/shared/pack.yaml", ".git", "packs/link", "\\..\\..",
]  # fmt: skip
COMMITS = [
    "{commit}", "../../../../x/made/here", "/abs/olute", "-c core.x=y", "A" * 40, "0" * 39,
    "0" * 41, "0" * 40, "{commit}\n", " {commit}", "{commit}/..", "f" * 40,
]  # fmt: skip
HASHES = ["{hash}", "sha256:" + "0" * 64, "sha256:", "md5:x", "sha256:" + "G" * 64, "{hash} "]


def _text(choices: list[str]) -> st.SearchStrategy[str]:
    odd = st.tuples(st.sampled_from(choices), st.sampled_from(ODD)).map(lambda t: t[0] + t[1])
    return st.one_of(st.sampled_from(choices), odd)


@st.composite
def references(draw: st.DrawFn) -> str:
    url, rev, path = draw(_text(URLS)), draw(_text(REVS)), draw(_text(PATHS))
    prefix = draw(st.sampled_from(["git+", "git+", "git+", "git:", "GIT+", ""]))
    return f"{prefix}{url}@{rev}#{path}"


JSONISH = st.one_of(
    st.none(), st.booleans(), st.integers(-(2**70), 2**70), st.text(max_size=5), st.just([])
)


@st.composite
def locks(draw: st.DrawFn) -> str | None:
    """A rules.lock: None (none), text that is no lock, or entries generated and real."""
    kind = draw(st.sampled_from(["entries"] * 6 + ["none", "text", "shape"]))
    if kind == "none":
        return None
    if kind == "text":
        return draw(st.sampled_from(["", "{", "[]", "null", '{"packs": []}', "{}" * 9000]))
    if kind == "shape":
        packs = draw(st.one_of(JSONISH, st.dictionaries(st.text(max_size=5), JSONISH)))
        return json.dumps({"version": draw(JSONISH), "packs": packs})
    entries: dict[str, Any] = {}
    for _ in range(draw(st.integers(1, 3))):
        key = draw(st.one_of(st.just("{ref}"), references()))
        entry: Any = {
            "commit": draw(st.one_of(_text(COMMITS), JSONISH)),
            "hash": draw(st.one_of(_text(HASHES), JSONISH)),
        }
        entries[key] = draw(st.one_of(st.just(entry), JSONISH)) if draw(st.booleans()) else entry
    version = draw(st.sampled_from([1, 1, 2, "1", None]))
    return json.dumps({"version": version, "packs": entries}, ensure_ascii=draw(st.booleans()))


COMMANDS = [
    ("check", "{pack}"), ("check", "--locked", "{pack}"), ("check", "--format", "json", "{pack}"),
    ("lock", "{pack}"), ("lock", "--upgrade", "{pack}"), ("--locked", "check", "{pack}"),
]  # fmt: skip


def git_cases() -> st.SearchStrategy[tuple[str, str | None, tuple[str, ...]]]:
    """(the pack's extends reference, its rules.lock or None, the command)."""
    return st.tuples(st.one_of(st.just("{ref}"), references()), locks(), st.sampled_from(COMMANDS))


def _tree(folder: Path) -> dict[str, str]:
    """Every path under ``folder`` with a digest of what it is (content, link, folder)."""
    seen: dict[str, str] = {}
    for path in sorted(folder.rglob("*")):
        if path.is_symlink():
            seen[str(path)] = "-> " + os.readlink(path)
        elif path.is_file():
            seen[str(path)] = hashlib.sha256(path.read_bytes()).hexdigest()
        else:
            seen[str(path)] = "dir"
    return seen


def run_git_case(
    origin: tuple[Path, str, dict[str, str]], case: tuple[str, str | None, tuple[str, ...]]
) -> str | None:
    """The command on the case, in a sandbox: what is wrong, or None."""
    from click.testing import CliRunner

    from engine.cli.main import cli

    repo, ref, entry = origin
    commit = entry["commit"]

    def fill(text: str) -> str:
        return (
            text.replace("{ref}", ref)
            .replace("{repo}", str(repo))
            .replace("{commit}", commit)
            .replace("{hash}", entry["hash"])
        )

    extends, lock, command = case
    before = _tree(repo)
    with tempfile.TemporaryDirectory() as temp:
        # deep, so that a path climbing out of the pack or the cache lands in the sandbox
        home = Path(temp) / "a" / "b" / "c" / "d" / "e" / "f"
        pack, cache = home / "pack", home / "cache"
        _pack(pack, fill(extends))
        if lock is not None:
            (pack / "rules.lock").write_text(fill(lock), encoding="utf-8", errors="surrogatepass")
        args = [part.replace("{pack}", str(pack)) for part in command]
        cwd = os.getcwd()
        previous = os.environ.get("RULES_CACHE_DIR")
        os.environ["RULES_CACHE_DIR"] = str(cache)
        os.chdir(home)
        try:
            with _bounded():
                result = CliRunner().invoke(cli, args, catch_exceptions=True)
        finally:
            os.chdir(cwd)
            _restore(previous)
        problem = _problem(result)
        if problem is not None:
            return problem
        outside = [
            str(path.relative_to(temp))
            for path in Path(temp).rglob("*")
            if not (path in (pack, cache) or pack in path.parents or cache in path.parents)
            and path != home
            and path not in home.parents
        ]
        if outside:
            return f"wrote outside the pack and its cache: {outside[:5]}"
        shutil.rmtree(cache, ignore_errors=True)  # read-only checkouts
    if _tree(repo) != before:
        return "changed the origin repository"
    return None


def _check(origin: tuple[Path, str, dict[str, str]], case: Any) -> None:
    problem = run_git_case(origin, case)
    extends, lock, command = case
    assert problem is None, f"{problem}\nextends: {extends!r}\nrules.lock: {lock!r:.600}\n{command}"


def test_fuzz_gitpacks_smoke(origin: tuple[Path, str, dict[str, str]]) -> None:
    @settings(SMOKE, max_examples=4)
    @given(case=git_cases())
    def run(case: Any) -> None:
        _check(origin, case)

    run()


@pytest.mark.slow
def test_fuzz_gitpacks(origin: tuple[Path, str, dict[str, str]]) -> None:
    @FUZZ
    @given(case=git_cases())
    def run(case: Any) -> None:
        _check(origin, case)

    run()
