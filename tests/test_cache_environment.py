"""The compiled-pack cache on a hostile or broken machine: whatever happens to the cache
folder, its key or its entries (moved, edited, truncated, huge, written by many processes at
once, by another user), a command says what it says without a cache, and never a traceback.
Real processes of the `rules` script, real files."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

from conftest import REPO, SCRIPTS
from engine.pack.cache import FORMAT

RULE = "{check: max_len, field: REASON, max: 500, message: REASON exceeds 500 chars}"
VERDICT = (
    '<<<VERDICT:V1:AC1:NONCE=4F2C9A>>>\nANSWER=YES\nREASON="' + "r" * 400 + '"\n'
    "<<<END_VERDICT:AC1:NONCE=4F2C9A>>>\n"
)
NOBODY = 65534

# Each test starts `rules` processes on a cold cache of a pack of its own (about 1 s each
# on 2 cores): together a fifth of the default run. They run with the heavy tests
# (`pytest -m heavy`, in CI); the cache's everyday behaviour is tested in the default run
# by test_pack_cache.py.
pytestmark = pytest.mark.heavy
PARSE = ["--block", "VERDICT", "--nonce", "4F2C9A", "--var", "criterion=AC1"]


def _rules(
    cache: Path, *args: str, stdin: str | None = None, env: dict[str, str] | None = None
) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(SCRIPTS / "rules"), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "RULES_CACHE_DIR": str(cache), **(env or {})},
    )


def _parse(pack: Path, cache: Path) -> tuple[int, str, str]:
    done = _rules(cache, "parse", "--pack", str(pack), *PARSE, stdin=VERDICT)
    return done.returncode, done.stdout, done.stderr


def _sentinel(folder: Path, max_reason: int = 500) -> Path:
    """A copy of the sentinel pack in ``folder`` whose REASON may be ``max_reason`` long."""
    pack = folder
    shutil.copytree(REPO / "rules" / "sentinel", pack)
    text = (pack / "pack.yaml").read_text(encoding="utf-8")
    assert RULE in text
    shorter = RULE.replace("500", str(max_reason))
    (pack / "pack.yaml").write_text(text.replace(RULE, shorter), encoding="utf-8")
    return pack


def _only_entry(cache: Path, purpose: str) -> Path:
    [entry] = cache.glob(f"{purpose}-*.json")
    return entry


def test_an_entry_moved_to_the_name_of_another_packs_entry_is_not_used(tmp_path: Path) -> None:
    """Anyone who can write into the cache folder can copy files there: an entry of one pack
    under the name of another's must not give the other pack the first one's rules."""
    lenient, strict = _sentinel(tmp_path / "lenient"), _sentinel(tmp_path / "strict", 300)
    cache = tmp_path / "cache"
    assert _parse(lenient, cache)[0] == 0
    lenient_entry = _only_entry(cache, "parse").read_bytes()
    expected = _parse(strict, cache)
    assert expected[0] == 1 and "REASON exceeds 300 chars" in expected[2]
    strict_entry = next(p for p in cache.glob("parse-*.json") if p.read_bytes() != lenient_entry)
    strict_entry.write_bytes(lenient_entry)
    assert _parse(strict, cache) == expected


def test_an_entry_whose_list_of_files_was_emptied_is_not_used(tmp_path: Path) -> None:
    """The files an entry holds for are part of what it signs: emptied, a stale entry would
    never be found stale again."""
    pack, cache = _sentinel(tmp_path / "pack"), tmp_path / "cache"
    assert _parse(pack, cache)[0] == 0
    entry_path = _only_entry(cache, "parse")
    entry = json.loads(entry_path.read_text(encoding="utf-8"))
    _sentinel(tmp_path / "stricter", 300)
    shutil.copy(tmp_path / "stricter" / "pack.yaml", pack / "pack.yaml")
    entry.update(folders=[], files={})
    entry_path.write_text(json.dumps(entry), encoding="utf-8")
    again = _parse(pack, cache)
    assert again[0] == 1 and again[2] == "error: REASON exceeds 300 chars\n"


@pytest.fixture
def reachable(tmp_path: Path) -> Iterator[Path]:
    """A folder of this test that the unprivileged user of ``_as_another_user`` can reach
    (pytest's own folders are its owner's only)."""
    folder = Path(tempfile.mkdtemp(prefix="rules-cache-env-"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _as_another_user() -> list[str]:
    """A command prefix that runs as an unprivileged user when this test runs as root
    (root reads and writes whatever the modes say), else nothing."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: no way to lose root's rights here")
    prefix = [setpriv, f"--reuid={NOBODY}", f"--regid={NOBODY}", "--clear-groups"]
    probe = subprocess.run([*prefix, str(SCRIPTS / "rules"), "--version"], capture_output=True)
    if probe.returncode != 0:  # e.g. this checkout sits in a folder only root may enter
        pytest.skip("an unprivileged user cannot run this checkout's rules script")
    return prefix


def _outcome(prefix: list[str], cache: Path, *args: str, **env: str) -> tuple[int, str, str]:
    done = subprocess.run(
        [*prefix, str(SCRIPTS / "rules"), *args],
        input=VERDICT if args[0] == "parse" else None,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "RULES_CACHE_DIR": str(cache), **env},
    )
    return done.returncode, done.stdout, done.stderr


def _owned_by_the_runner(path: Path, prefix: list[str]) -> None:
    if prefix:
        for item in [path, *path.rglob("*")]:
            os.chown(item, NOBODY, NOBODY, follow_symlinks=False)


def _readable_pack_and_own_cache(reachable: Path, prefix: list[str]) -> tuple[Path, Path]:
    """A copy of the sentinel pack everyone may read, and an empty cache folder of the user
    the commands run as."""
    pack = _sentinel(reachable / "pack")
    for item in [pack, *pack.rglob("*")]:
        item.chmod(0o755 if item.is_dir() else 0o644)
    cache = reachable / "cache"
    cache.mkdir()
    _owned_by_the_runner(cache, prefix)
    return pack, cache


def test_a_stray_file_nobody_may_read_in_the_pack_folder_is_no_error(reachable: Path) -> None:
    """An editor's swap file of another user (or of none) sits in the pack's folder: the
    pack loads without reading it, and the cache, which cannot fingerprint the folder,
    steps aside instead of failing the command."""
    prefix = _as_another_user()
    pack = _sentinel(reachable / "pack")
    stray = pack / ".pack.yaml.swp"
    stray.write_text("someone else's\n", encoding="utf-8")
    stray.chmod(0o600 if prefix else 0o000)
    for item in [pack, *pack.rglob("*")]:
        if item != stray:
            item.chmod(0o755 if item.is_dir() else 0o644)
    cache = reachable / "cache"
    cache.mkdir()
    _owned_by_the_runner(cache, prefix)
    bad = str(REPO / "examples" / "sentinel" / "verdict_bad.txt")
    for args in (
        ["parse", "--pack", str(pack), *PARSE],
        ["eval", "--pack", str(pack), *PARSE, "--format", "json", bad],
        ["check", str(pack)],
    ):
        off = _outcome(prefix, cache, *args, RULES_NO_CACHE="1")
        assert "internal error" not in off[2] and "Permission denied" not in off[2], off
        assert _outcome(prefix, cache, *args) == off, args


def _forged(entry_path: Path, text: str, key: bytes) -> None:
    """``entry_path`` made to hold ``text`` as its data, signed with ``key``: what anyone
    who could read the key can write."""
    from engine.pack.cache import _signed, signature

    entry = json.loads(entry_path.read_text(encoding="utf-8"))
    signed = _signed(entry_path, entry["engine"], entry["folders"], entry["files"], text)
    entry.update(data=text, digest=signature(signed, key))
    entry_path.write_text(json.dumps(entry), encoding="utf-8")


KNOWN = b"0123456789abcdef" * 4


def _plant_key(cache: Path, how: str) -> Path:
    """A key whose content ``KNOWN`` others know: readable by all, a symlink to a file
    readable by all, or a file of another user."""
    cache.mkdir()
    if how == "symlink":
        target = cache.parent / "elsewhere"
        target.write_bytes(KNOWN)
        target.chmod(0o644)
        (cache / "key").symlink_to(target)
        return target
    (cache / "key").write_bytes(KNOWN)
    (cache / "key").chmod(0o644 if how == "readable-by-all" else 0o600)
    if how.startswith("another-users"):
        if os.geteuid() != 0:
            pytest.skip("only root can give a file to another user")
        os.chown(cache / "key", NOBODY, NOBODY)
        if how == "another-users-in-their-folder":
            os.chown(cache, NOBODY, NOBODY)
    return cache / "key"


@pytest.mark.parametrize(
    "how", ["readable-by-all", "symlink", "another-users", "another-users-in-their-folder"]
)
def test_a_key_others_may_know_signs_nothing_that_is_used(tmp_path: Path, how: str) -> None:
    """A key others can read (mode 0644), a symlink to a file anyone can read, or a key of
    another user (who can rewrite it): whoever knows it could sign any entry. Such a key is
    not trusted. In this user's folder it is replaced by a new one (a symlink replaced, not
    what it points to: after a `sudo rules ...` the user's folder works again); another
    user's key in that user's folder is left alone and the cache not used."""
    lenient, strict = _sentinel(tmp_path / "lenient"), _sentinel(tmp_path / "strict", 300)
    donor, cache = tmp_path / "donor", tmp_path / "cache"
    planted = _plant_key(cache, how)
    assert _parse(lenient, donor)[0] == 0
    lenient_entry = _only_entry(donor, "parse")
    expected = _parse(strict, donor)
    assert expected[0] == 1
    [strict_entry] = set(donor.glob("parse-*.json")) - {lenient_entry}
    forged = cache / strict_entry.name
    shutil.copy(strict_entry, forged)
    _forged(forged, json.loads(lenient_entry.read_text(encoding="utf-8"))["data"], KNOWN)
    assert _parse(strict, cache) == expected
    key = cache / "key"
    if how == "another-users-in-their-folder":
        assert key.stat().st_uid == NOBODY and key.read_bytes() == KNOWN  # left alone
    else:
        assert planted.read_bytes() == KNOWN or planted == key  # not written through a link
        assert not key.is_symlink() and key.read_bytes() != KNOWN
        assert key.stat().st_mode & 0o777 == 0o600


@pytest.mark.parametrize("content", [b"", b"short", b"k" * 5000])
def test_a_key_that_is_no_key_is_replaced_and_the_cache_works_again(
    tmp_path: Path, content: bytes
) -> None:
    pack, cache = _sentinel(tmp_path / "pack"), tmp_path / "cache"
    cache.mkdir()
    (cache / "key").write_bytes(content)
    (cache / "key").chmod(0o600)
    off = _parse(pack, tmp_path / "unused-cache")
    assert _parse(pack, cache) == off
    assert len(list(cache.glob("parse-*.json"))) == 1
    assert len((cache / "key").read_bytes()) == 64
    assert _parse(pack, cache) == off


def test_a_folder_in_place_of_the_key_is_left_alone(tmp_path: Path) -> None:
    pack, cache = _sentinel(tmp_path / "pack"), tmp_path / "cache"
    (cache / "key").mkdir(parents=True)
    off = _parse(pack, tmp_path / "unused-cache")
    assert _parse(pack, cache) == _parse(pack, cache) == off
    assert (cache / "key").is_dir()
    assert [p.name for p in cache.iterdir()] == ["key"]


def test_an_entry_that_cannot_be_put_in_place_leaves_nothing_behind(tmp_path: Path) -> None:
    """An entry is written whole under a name of its own, then put in place; when that
    fails (here a folder holds its name; a full disk fails the same way earlier) the
    half-made file is removed, not left to fill the folder run after run."""
    pack, donor, cache = _sentinel(tmp_path / "pack"), tmp_path / "donor", tmp_path / "cache"
    off = _parse(pack, donor)
    (cache / _only_entry(donor, "parse").name).mkdir(parents=True)
    assert _parse(pack, cache) == _parse(pack, cache) == off
    assert sorted(p.name for p in cache.iterdir() if not p.is_dir()) == ["key"]


# Runs `rules ARGS...` in this process after an audit hook that, the moment Jinja2 first
# compiles an expression or template of the pack (its YAML files have been read by then),
# writes EDIT over the YAML file: an editor saving the pack while a command loads it, at a
# moment a test can repeat.
SAVED_DURING_THE_LOAD = """
import sys
from engine.cli.main import main
pack_file, edit, *args = sys.argv[1:]
saved = []
def editor(event, event_args):
    if event == "compile" and not saved and event_args[1] == "<template>":
        saved.append(True)
        with open(pack_file, "w", encoding="utf-8") as out:
            out.write(edit)
sys.addaudithook(editor)
sys.argv = ["rules", *args]
main()
"""


@pytest.mark.parametrize("command", ["check", "parse", "eval"])
def test_a_pack_saved_while_a_command_loads_it_is_seen_by_the_next_command(
    tmp_path: Path, command: str
) -> None:
    """What a command remembers of a pack is what it loaded, under the fingerprint the files
    had before it loaded them: an edit saved during the load makes the next command load
    the pack again, never take the remembered result for the edited pack."""
    pack, cache = _sentinel(tmp_path / "pack"), tmp_path / "cache"
    output = tmp_path / "output.txt"
    output.write_text(VERDICT, encoding="utf-8")
    args = {
        "check": ["check", str(pack)],
        "parse": ["parse", "--pack", str(pack), *PARSE],
        "eval": ["eval", "--pack", str(pack), *PARSE, "--format", "json", str(output)],
    }[command]
    text = (pack / "pack.yaml").read_text(encoding="utf-8")
    # a clean pack turned broken for `check`, a REASON of 400 characters turned too long
    edit = RULE + " [" if command == "check" else RULE.replace("500", "300")
    edited = text.replace(RULE, edit)
    editing = [sys.executable, "-c", SAVED_DURING_THE_LOAD, str(pack / "pack.yaml"), edited]
    stdin = VERDICT if command == "parse" else None
    during = subprocess.run(
        [*editing, *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        env={**os.environ, "RULES_CACHE_DIR": str(cache)},
    )
    assert during.returncode == 0, during.stderr  # it loaded the pack as it was
    assert (pack / "pack.yaml").read_text(encoding="utf-8") == edited
    after = _rules(cache, *args, stdin=stdin)
    off = _rules(cache, *args, stdin=stdin, env={"RULES_NO_CACHE": "1"})
    assert off.returncode != 0
    assert (after.returncode, after.stdout, after.stderr) == (
        off.returncode,
        off.stdout,
        off.stderr,
    )


def _damaged(entry: Path, how: str) -> None:
    if how == "truncated":  # a write cut short (a crash, a full disk) that still took its name
        content = entry.read_bytes()
        entry.write_bytes(content[: len(content) // 2])
    elif how == "100-MB":  # read up to the bound only (sparse: no disk is filled)
        with open(entry, "r+b") as out:
            out.truncate(100 * 1024 * 1024)
    elif how == "deeply-nested":
        entry.write_text("[" * 100_000 + "]" * 100_000, encoding="utf-8")
    elif how == "another-engine":  # an entry of this name written by other engine code
        data = json.loads(entry.read_text(encoding="utf-8"))
        data["engine"] = [["pack/cache.py", 1, 1]]
        entry.write_text(json.dumps(data), encoding="utf-8")
    elif how == "a-digest-not-ascii":
        data = json.loads(entry.read_text(encoding="utf-8"))
        data["digest"] = "\u00e9" * 64
        entry.write_text(json.dumps(data), encoding="utf-8")
    elif how == "a-folder":
        entry.unlink()
        entry.mkdir()


@pytest.mark.parametrize(
    "how",
    ["truncated", "100-MB", "deeply-nested", "another-engine", "a-digest-not-ascii", "a-folder"],
)
def test_a_damaged_or_foreign_entry_is_passed_over(tmp_path: Path, how: str) -> None:
    pack, cache = _sentinel(tmp_path / "pack"), tmp_path / "cache"
    cold = _parse(pack, cache)
    entry = _only_entry(cache, "parse")
    _damaged(entry, how)
    assert _parse(pack, cache) == cold
    if how != "a-folder":  # written again, whole and small
        assert entry.stat().st_size < 1024 * 1024
        assert json.loads(entry.read_text(encoding="utf-8"))["format"] == FORMAT


def test_a_cache_folder_that_cannot_be_a_folder_is_ignored(tmp_path: Path) -> None:
    pack = _sentinel(tmp_path / "pack")
    off = _parse(pack, tmp_path / "unused")
    (tmp_path / "a-file").write_text("not a folder\\n", encoding="utf-8")
    (tmp_path / "dangling").symlink_to(tmp_path / "nowhere" / "at-all")
    (tmp_path / "loop").symlink_to(tmp_path / "loop")
    for cache in (tmp_path / "a-file", tmp_path / "dangling", tmp_path / "loop"):
        assert _parse(pack, cache) == off, cache
    assert not (tmp_path / "nowhere").exists()


@pytest.mark.slow
@pytest.mark.parametrize("mode", [0o000, 0o500, 0o300, 0o100])
def test_a_cache_folder_the_user_may_not_read_or_write_is_ignored(
    reachable: Path, mode: int
) -> None:
    """The user's cache folder, with its key and an entry, made unreadable, unwritable or
    both; commands say what they say without a cache."""
    prefix = _as_another_user()
    pack, cache = _readable_pack_and_own_cache(reachable, prefix)
    _outcome(prefix, cache, "parse", "--pack", str(pack), *PARSE)  # a key and an entry
    assert len(list(cache.iterdir())) == 2
    output = reachable / "output.txt"
    output.write_text(VERDICT, encoding="utf-8")
    output.chmod(0o644)
    cache.chmod(mode)
    try:
        for args in (
            ["parse", "--pack", str(pack), *PARSE],
            ["eval", "--pack", str(pack), *PARSE, "--format", "json", str(output)],
        ):
            off = _outcome(prefix, cache, *args, RULES_NO_CACHE="1")
            assert off[0] == 0, off
            assert _outcome(prefix, cache, *args) == _outcome(prefix, cache, *args) == off
    finally:
        cache.chmod(0o755)


@pytest.mark.slow
def test_many_processes_on_a_cold_cache_say_what_one_says_without_it(tmp_path: Path) -> None:
    """Eight `rules eval` and eight `rules parse` at once on an empty cache folder, again and
    again: all make the key at once and write the same entries at once. None fails, none
    reads a half-written entry, all say what a command without a cache says; one key."""
    pack = _sentinel(tmp_path / "pack")
    output = tmp_path / "output.txt"
    output.write_text(VERDICT.replace("r" * 400, "r" * 40), encoding="utf-8")
    commands = {
        "eval": ["eval", "--pack", str(pack), *PARSE, "--format", "json", str(output)],
        "parse": ["parse", "--pack", str(pack), *PARSE],
    }
    off = {
        name: _outcome([], tmp_path / "unused", *args, RULES_NO_CACHE="1")
        for name, args in commands.items()
    }
    for round_ in range(3):
        cache = tmp_path / f"cache-{round_}"
        for _warmth in ("cold", "warm"):
            running = [
                (
                    name,
                    subprocess.Popen(
                        [str(SCRIPTS / "rules"), *commands[name]],
                        stdin=subprocess.PIPE,
                        stdout=subprocess.PIPE,
                        stderr=subprocess.PIPE,
                        text=True,
                        env={**os.environ, "RULES_CACHE_DIR": str(cache)},
                    ),
                )
                for name in ("eval", "parse") * 8
            ]
            for name, process in running:
                stdout, stderr = process.communicate(VERDICT, timeout=120)
                assert (process.returncode, stdout, stderr) == off[name], name
        assert sorted(p.name.split("-")[0] for p in cache.iterdir()) == ["key", "pack", "parse"]
        assert (cache / "key").stat().st_mode & 0o777 == 0o600


def test_an_edit_in_a_hidden_folder_the_pack_uses_is_seen(tmp_path: Path) -> None:
    """A pack may keep its templates in a hidden folder (`.templates/`): its files count
    in the fingerprint like any other (only version control's and Python's folders do
    not)."""
    pack, cache = _sentinel(tmp_path / "pack"), tmp_path / "cache"
    (pack / "templates").rename(pack / ".templates")
    text = (pack / "pack.yaml").read_text(encoding="utf-8")
    named = "file: templates/format_repair.md.j2"
    assert named in text
    text = text.replace("file: templates/", "file: .templates/")
    (pack / "pack.yaml").write_text(text, encoding="utf-8")
    assert _rules(cache, "check", str(pack)).returncode == 0
    (pack / ".templates" / "format_repair.md.j2").write_text("{{ parser_eror }}\n")
    broken = _rules(cache, "check", str(pack))
    assert broken.returncode == 1
    assert "unknown-template-variable" in broken.stdout


def test_an_entry_that_is_a_symlink_or_a_pipe_is_not_read(tmp_path: Path) -> None:
    """The engine writes its entries as regular files: one that is a symlink to the
    command's own standard input must not eat the output the command is to parse, and a
    named pipe that someone holds open must not make it wait."""
    pack, cache = _sentinel(tmp_path / "pack"), tmp_path / "cache"
    cold = _parse(pack, cache)
    entry = _only_entry(cache, "parse")
    entry.unlink()
    entry.symlink_to("/dev/stdin")
    assert _parse(pack, cache) == cold
    entry.unlink()
    os.mkfifo(entry)
    writer = os.open(entry, os.O_RDWR | os.O_NONBLOCK)  # a writer that never writes
    try:
        done = subprocess.run(
            [str(SCRIPTS / "rules"), "parse", "--pack", str(pack), *PARSE],
            input=VERDICT,
            capture_output=True,
            text=True,
            timeout=20,
            env={**os.environ, "RULES_CACHE_DIR": str(cache)},
        )
    finally:
        os.close(writer)
    assert (done.returncode, done.stdout, done.stderr) == cold


def test_a_key_root_left_in_the_users_folder_is_replaced_by_the_user(reachable: Path) -> None:
    """`sudo rules ...` with the user's cache folder leaves a key of root there, which the
    user cannot read: the user's next command makes the folder's key the user's again."""
    prefix = _as_another_user()
    if not prefix:
        pytest.skip("only root can leave a key of another user")
    pack, cache = _readable_pack_and_own_cache(reachable, prefix)
    args = ["parse", "--pack", str(pack), *PARSE]
    as_root = _outcome([], cache, *args)
    assert (cache / "key").stat().st_uid == 0
    assert _outcome(prefix, cache, *args) == as_root
    assert (cache / "key").stat().st_uid == NOBODY
    # the user's own entry (root's may be of another Python, then under a name of its own)
    assert any(entry.stat().st_uid == NOBODY for entry in cache.glob("parse-*.json"))
