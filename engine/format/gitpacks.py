"""Packs pinned to a git repository: ``extends: ["git+URL@REV#path/to/pack"]``.

`rules lock` resolves every such reference (the pack's own and those of the packs it
extends) to a commit SHA and a content hash, written to ``rules.lock`` beside the top pack.
Every command then uses the locked commit, so a branch that moves changes nothing until
`rules lock --upgrade`. Under ``--locked`` (the default when ``CI=true``) a reference with
no lock entry is an error; content that no longer matches its hash is always one.

Fetched commits live read-only in the user cache folder (``RULES_CACHE_DIR``, else
``~/.cache/rules-engine``) under ``git/``, and are used offline once there. git runs as a
child process with a time limit, no terminal prompts, and the URL and revision passed
after ``--`` where git accepts it, so neither can be read as an option.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import shutil
import stat
import subprocess
import tempfile
from dataclasses import dataclass
from pathlib import Path

from engine.core.errors import EngineError
from engine.format.findings import FindingRule
from engine.format.packfolder import (
    MAX_PACK_BYTES,
    PACK_TOO_LARGE,
    PATH_ESCAPE,
    PackTooLarge,
    bounded,
    read_bounded,
    walk_pack_folder,
)

GIT_REF_INVALID = FindingRule(
    "git-ref-invalid",
    "An `extends` git reference is not git+URL@REV#path.",
    "Write git+URL@REV#path/to/pack.",
)

GIT_PATH_OUTSIDE = FindingRule(
    "git-path-outside",
    "A git reference's pack path leaves the repository.",
    "Give a path inside the repository.",
)

GIT_FETCH_FAILED = FindingRule(
    "git-fetch-failed",
    "A git pack cannot be resolved or fetched.",
    "Check the URL, the revision and the path; git must be installed.",
)

GIT_UNLOCKED = FindingRule(
    "git-unlocked",
    "A git reference without a rules.lock entry under --locked (CI=true).",
    "Run `rules lock` beside the top pack and commit rules.lock.",
)

GIT_HASH_MISMATCH = FindingRule(
    "git-hash-mismatch",
    "A fetched git pack's content differs from its locked hash.",
    "Run `rules lock --upgrade` if the change is intended; else clear the cache.",
)

GIT_LOCK_INVALID = FindingRule(
    "git-lock-invalid",
    "rules.lock cannot be read.",
    "Run `rules lock` again.",
)

GIT_PREFIX = "git+"
LOCK_FILE = "rules.lock"
GIT_TIMEOUT_SECONDS = 120
_SHA = re.compile(r"^[0-9a-f]{40}$")
_HASH = re.compile(r"^sha256:[0-9a-f]{64}$")


class GitPackError(EngineError):
    """A git reference that cannot be resolved, fetched or trusted; ``rule`` is its id."""

    def __init__(self, rule: FindingRule, message: str) -> None:
        super().__init__(message)
        self.rule = rule


@dataclass(frozen=True)
class GitRef:
    url: str
    rev: str
    path: str

    @property
    def text(self) -> str:
        return f"{GIT_PREFIX}{self.url}@{self.rev}#{self.path}"


_FETCHING_TRANSPORTS = ("file", "git", "http", "https", "ssh")
_FETCHING_SCHEME = re.compile(r"([A-Za-z][A-Za-z0-9+.-]*)://")


def is_git_ref(ref: str) -> bool:
    return ref.startswith(GIT_PREFIX)


def parse_git_ref(ref: str) -> GitRef:
    """``git+URL@REV#path`` split, with the path checked to stay inside the repository."""
    body, hashmark, path = ref[len(GIT_PREFIX) :].rpartition("#")
    url, at, rev = body.rpartition("@")
    if not (ref.startswith(GIT_PREFIX) and hashmark and at and url and rev and path) or any(
        c.isspace() for c in ref
    ):
        raise GitPackError(
            GIT_REF_INVALID,
            f"{ref!r} is not a git pack reference: write git+URL@REV#path/to/pack",
        )
    if url.startswith("-") or rev.startswith("-"):
        raise GitPackError(GIT_REF_INVALID, f"{ref!r}: a URL or revision may not start with '-'")
    if any(ord(c) < 32 or ord(c) == 127 for c in ref):
        raise GitPackError(GIT_REF_INVALID, f"{ref!r}: a reference holds no control character")
    scheme = _FETCHING_SCHEME.match(url)
    if "::" in url or (scheme and scheme.group(1).lower() not in _FETCHING_TRANSPORTS):
        # Refused here, before any lock lookup or git call, so the answer is the same
        # with or without --locked: git's remote helpers (ext:: runs a command) never run.
        raise GitPackError(
            GIT_REF_INVALID,
            f"{ref!r}: only the file, git, http, https and ssh transports are allowed",
        )
    parts = Path(path).parts
    if Path(path).is_absolute() or ".." in parts or not parts:
        raise GitPackError(
            GIT_PATH_OUTSIDE, f"{ref!r}: the pack path must stay inside the repository"
        )
    return GitRef(url, rev, path)


def locked_mode(locked: bool | None = None) -> bool:
    """Whether every git reference must have a lock entry: ``locked`` when the caller says
    (`--locked` / `--no-locked`), else when CI=true."""
    if locked is not None:
        return locked
    return os.environ.get("CI", "").lower() == "true"


def cache_root() -> Path:
    configured = os.environ.get("RULES_CACHE_DIR")
    if configured:
        return Path(configured) / "git"
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rules-engine" / "git"


def checkout_root(path: Path) -> Path | None:
    """The fetched commit folder ``path`` lies in, or None when it is not in the cache."""
    root = cache_root().resolve()
    resolved = path.resolve()
    if not resolved.is_relative_to(root):
        return None
    relative = resolved.relative_to(root).parts
    return root / relative[0] / relative[1] if len(relative) >= 2 else None


def _git(*args: str, cwd: Path | None = None) -> str:
    env = {
        **os.environ,
        "GIT_TERMINAL_PROMPT": "0",
        "GIT_ASKPASS": "true",
        # transports that fetch data only: never ext:: (runs a command) nor fd::
        "GIT_ALLOW_PROTOCOL": "file:git:http:https:ssh",
    }
    try:
        done = subprocess.run(
            ["git", *args],
            cwd=cwd,
            capture_output=True,
            text=True,
            timeout=GIT_TIMEOUT_SECONDS,
            env=env,
            check=False,
        )
    except FileNotFoundError:
        raise GitPackError(GIT_FETCH_FAILED, "git is not installed") from None
    except subprocess.TimeoutExpired:
        raise GitPackError(
            GIT_FETCH_FAILED, f"git {args[0]} ran over {GIT_TIMEOUT_SECONDS} s"
        ) from None
    if done.returncode != 0:
        last = (done.stderr.strip().splitlines() or ["failed"])[-1]
        raise GitPackError(GIT_FETCH_FAILED, f"git {args[0]}: {last}")
    return done.stdout


def resolve_revision(ref: GitRef) -> str:
    """The commit SHA ``ref.rev`` names now in the remote (a SHA stays itself)."""
    if _SHA.match(ref.rev):
        return ref.rev
    out = _git("ls-remote", "--", ref.url, ref.rev, f"refs/tags/{ref.rev}^{{}}")
    found: dict[str, str] = {}
    for line in out.splitlines():
        sha, _, name = line.partition("\t")
        found[name] = sha
    for name in (
        f"refs/tags/{ref.rev}^{{}}",
        f"refs/heads/{ref.rev}",
        f"refs/tags/{ref.rev}",
        ref.rev,
    ):
        if name in found:
            return found[name]
    raise GitPackError(GIT_FETCH_FAILED, f"{ref.text}: no branch or tag {ref.rev!r} in {ref.url}")


def _folder_for(url: str, sha: str) -> Path:
    """The cache folder of commit ``sha`` of ``url``: a name made of hex digits only, so
    it is always a folder two levels under the cache, whatever a lock file said."""
    if not _SHA.match(sha):
        raise GitPackError(GIT_LOCK_INVALID, f"{url}: commit {sha[:80]!r} is not 40 hex digits")
    return cache_root() / hashlib.sha256(url.encode("utf-8")).hexdigest()[:16] / sha


def fetch(url: str, sha: str) -> Path:
    """The read-only checkout of commit ``sha`` of ``url`` in the cache (fetched once)."""
    target = _folder_for(url, sha)
    if target.is_dir():
        return target
    target.parent.mkdir(parents=True, exist_ok=True)
    work = Path(tempfile.mkdtemp(prefix=".fetch-", dir=target.parent))
    try:
        _git("clone", "--quiet", "--no-checkout", "--", url, str(work))
        _git("-c", "advice.detachedHead=false", "checkout", "--quiet", "--detach", sha, cwd=work)
        shutil.rmtree(work / ".git")
        _read_only(work)
        os.replace(work, target)
    finally:
        if work.exists():
            _writable(work)
            shutil.rmtree(work, ignore_errors=True)
    return target


def _read_only(folder: Path) -> None:
    """Files and folders of a checkout made read-only; a symlink is never followed (one
    to a folder outside would have that folder's mode changed)."""
    for path in sorted(folder.rglob("*"), reverse=True):
        mode = path.lstat().st_mode
        if stat.S_ISREG(mode):
            path.chmod(stat.S_IMODE(mode) & ~0o222)
    for path in [*(p for p in folder.rglob("*") if stat.S_ISDIR(p.lstat().st_mode)), folder]:
        path.chmod(stat.S_IMODE(path.lstat().st_mode) & ~0o222)


def _writable(folder: Path) -> None:
    for path in [folder, *folder.rglob("*")]:
        if not path.is_symlink():
            path.chmod(stat.S_IMODE(path.stat().st_mode) | 0o700)


def content_hash(folder: Path) -> str:
    """sha256 over the pack folder's files: sorted relative paths and their bytes. A
    symlink out of the folder is refused (``path-escape``) and nothing is read past
    ``MAX_PACK_BYTES`` (``pack-too-large``)."""
    digest = hashlib.sha256()
    try:
        files = list(bounded(walk_pack_folder(folder, lambda name: False), folder))
    except PackTooLarge as exc:
        raise GitPackError(PACK_TOO_LARGE, str(exc)) from None
    budget = MAX_PACK_BYTES
    for found in sorted(files, key=lambda f: f.relative.split("/")):
        if found.outside is not None:
            raise GitPackError(
                PATH_ESCAPE,
                f"{folder.name}/{found.relative}: a symlink out of the git pack "
                f"({found.outside}); nothing is read through it",
            )
        content = read_bounded(found, budget)
        budget -= len(content)
        if budget < 0:
            raise GitPackError(PACK_TOO_LARGE, f"{folder}: grew past the bound while read")
        digest.update(found.relative.encode("utf-8") + b"\0")
        digest.update(content + b"\0")
    return "sha256:" + digest.hexdigest()


def read_lock(lock_file: Path) -> dict[str, dict[str, str]]:
    """The entries of a lock file (an empty table when there is none), each checked
    before anything uses it: its key a git reference, its commit 40 hex digits, its hash
    ``sha256:`` and 64 hex digits (a commit is a cache folder's name)."""
    if not lock_file.is_file():
        return {}
    try:
        data = json.loads(lock_file.read_text(encoding="utf-8"))
        packs = data["packs"]
        assert isinstance(packs, dict)
        entries = {str(k): dict(v) for k, v in packs.items()}
    except (ValueError, KeyError, AssertionError, TypeError, AttributeError):
        raise GitPackError(
            GIT_LOCK_INVALID, f"{lock_file}: not a rules lock file; run `rules lock` again"
        ) from None
    for ref, entry in entries.items():
        problem = _entry_problem(ref, entry)
        if problem is not None:
            raise GitPackError(
                GIT_LOCK_INVALID,
                f"{lock_file}: the entry {ref[:200]!r}: {problem}; run "
                "`rules lock --upgrade` to write it afresh (and look at who changed it)",
            )
    return entries


def _entry_problem(ref: str, entry: dict[str, object]) -> str | None:
    """Why a lock file's entry cannot be used, or None."""
    try:
        parse_git_ref(ref)
    except GitPackError as exc:
        return str(exc)
    commit, found = entry.get("commit"), entry.get("hash")
    if not isinstance(commit, str) or not _SHA.match(commit):
        return f"its commit {str(commit)[:80]!r} is not 40 lowercase hex digits"
    if not isinstance(found, str) or not _HASH.match(found):
        return f"its hash {str(found)[:80]!r} is not sha256: and 64 hex digits"
    return None


def write_lock(lock_file: Path, entries: dict[str, dict[str, str]]) -> None:
    body = {"version": 1, "packs": dict(sorted(entries.items()))}
    lock_file.write_text(json.dumps(body, indent=2) + "\n", encoding="utf-8")


@dataclass
class Locking:
    """What `rules lock` collects while the packs load: every git reference it met, kept
    at its earlier entry unless upgrading."""

    existing: dict[str, dict[str, str]]
    entries: dict[str, dict[str, str]]


_LOCKING: list[Locking] = []


def start_locking(upgrade: bool, existing: dict[str, dict[str, str]]) -> Locking:
    locking = Locking({} if upgrade else dict(existing), {})
    _LOCKING.append(locking)
    return locking


def stop_locking() -> None:
    _LOCKING.pop()


def resolve_git_pack(ref: str, top_pack_file: Path, locked: bool | None = None) -> Path:
    """The pack file a git reference names, at its locked commit (fetched if needed). With
    ``locked`` (default: CI=true) a reference without a lock entry is refused."""
    git = parse_git_ref(ref)
    lock_file = top_pack_file.parent / LOCK_FILE
    locking = _LOCKING[-1] if _LOCKING else None
    entries = {**locking.existing, **locking.entries} if locking else read_lock(lock_file)
    entry = entries.get(ref)
    if entry is None:
        if locking is None and locked_mode(locked):
            raise GitPackError(
                GIT_UNLOCKED,
                f"{ref} has no entry in {lock_file.name} (--locked, or CI=true): run "
                "`rules lock` and commit the lock file",
            )
        sha = resolve_revision(git)  # a SHA ls-remote gave, checked as a folder name by fetch
        folder = fetch(git.url, sha)
        entry = {"commit": sha, "hash": content_hash(_pack_folder(folder, git))}
    if locking is not None:
        locking.entries[ref] = entry
    folder = fetch(git.url, entry["commit"])
    pack_folder = _pack_folder(folder, git)
    found = content_hash(pack_folder)
    if found != entry.get("hash"):
        raise GitPackError(
            GIT_HASH_MISMATCH,
            f"{ref} at {entry['commit'][:12]}: the content's hash {found[:19]}... is not the "
            f"locked {str(entry.get('hash'))[:19]}...: the cache or the lock file was changed",
        )
    pack_file = pack_folder / "pack.yaml" if pack_folder.is_dir() else pack_folder
    if not pack_file.is_file():
        raise GitPackError(GIT_FETCH_FAILED, f"{ref}: no pack.yaml at {git.path}")
    return pack_file


def _pack_folder(checkout: Path, git: GitRef) -> Path:
    target = (checkout / git.path).resolve()
    if not target.is_relative_to(checkout.resolve()):
        raise GitPackError(GIT_PATH_OUTSIDE, f"{git.text}: the pack path leaves the repository")
    return target
