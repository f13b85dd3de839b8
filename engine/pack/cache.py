"""The compiled-pack cache: what `rules parse` and `rules check` need to remember of a pack.

Loading a pack validates its YAML with pydantic and checks its templates with Jinja2: right
the first time, too slow for a command that parses one block or re-checks unchanged packs.
After a pack loads cleanly, the plain data of its parsers (as each kind gives it) is written
to the user cache folder, and the next `rules parse` builds its parsers from it without
importing YAML, pydantic or Jinja2. After `rules check` finds a pack clean, that is
remembered too; a pack with findings is always checked afresh.

An entry is keyed by purpose, the pack file's path, the engine version and the Python
version. It is used only while every file in the folders of the pack's YAML files (the pack
and what it extends) has the content it had when the entry was written (SHA-256 of each
file, the same set of files, symlinks pointing to the same place), and while the engine
modules the entry depends on are unchanged (their mtime and size); else the pack is loaded
and checked as usual and the entry rewritten. The fingerprint written is the one the files
had before the load, so a pack saved while a command loads it is loaded again by the next.
A pack whose folders hold a file that cannot be read is not cached. Any problem with the
cache itself (unreadable, damaged, read-only folder, a full disk) falls back to a normal
load, silently.

Every entry is signed as a whole (its name, the engine stamp, its files, its data) with an
HMAC under the folder's key (``folder_key``): an entry copied, edited or forged by anyone
who does not know the key is passed over. The key is trusted only as a regular file (not a
symlink) of this user, mode 0600, 32 to 256 bytes. One that is not (readable by others,
0644: anyone who read it could sign entries) is replaced when the key or the folder is this
user's, else left alone and the cache not used. A new key is written whole, then linked
into place, so that processes making it at once end up with one key.
Entries are written whole, then renamed into place.

``RULES_CACHE_DIR`` names the folder (default: ``$XDG_CACHE_HOME/rules-engine`` or
``~/.cache/rules-engine``); ``RULES_NO_CACHE=1`` turns the cache off.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import os
import secrets
import stat
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any, Protocol

from engine.contracts.registry import parser_data, parser_from_data
from engine.core.errors import EngineError, no_parser_error, unknown_block_error
from engine.core.files import read_own_file, remove_quietly, written_beside
from engine.core.numbers import strict_loads
from engine.core.version import VERSION
from engine.format.locate import display_path, find_one_pack_file, find_pack_files
from engine.format.packfolder import read_bounded, walk_pack_folder
from engine.pack.parsing import Parsing
from engine.pack.result import CheckResult

if TYPE_CHECKING:
    from engine.core.results import ParseResult
    from engine.pack.compiled import Pack
    from engine.pack.parsing import BlockParser

    class CachedParser(BlockParser, Protocol):
        """A block's parser as its kind rebuilds it from plain data (``parser_from_data``)."""

        param_names: frozenset[str]
        required_params: tuple[str, ...]


FORMAT = 4
MAX_FILES = 500
MAX_ENTRY_BYTES = 16 * 1024 * 1024
MAX_BYTES = 16 * 1024 * 1024
_ENGINE_DIR = Path(__file__).resolve().parent.parent
# The modules whose code gives the cached parse data its meaning (a check depends on all).
_PARSE_MEANING = ("format/model.py", "contracts", "pack/cache.py")
# ... and a pack's image: what turns its YAML into model data and finds it clean (the file
# format, the sections' models and checks, the kinds), and the image's own encoding. The
# code that compiles and runs the image is the engine's of the moment.
_IMAGE_MEANING = (
    "format",
    "contracts",
    *(
        f"{layer}/{name}"
        for layer in ("policy", "prompts")
        for name in ("*/model.py", "*/section.py", "*/checks.py")
    ),
    "pack/sections.py",
    "pack/cases.py",
    "pack/image.py",
    "core/frozen.py",
    "core/numbers.py",
)


class ParsingPack(Parsing):
    """The parse side of a pack, built from plain data: ``parse`` is ``Pack.parse`` (both are
    ``Parsing.parse``), over the parsers the cache holds (guarded by a fresh load
    when they come from a cache entry: ``_Reloading``)."""

    def __init__(
        self, data: Mapping[str, Any], reload: Callable[[], ParsingPack] | None = None
    ) -> None:
        self._reload = reload
        """How to load the pack afresh when data read from a cache entry proves wrong."""
        self.name: str = data["name"]
        self.kinds: dict[str, str] = dict(data["kinds"])
        self.max_output_bytes: int | None = data.get("max_output_bytes")
        self.parsers: dict[str, CachedParser] = {
            block: parser_from_data(kind, block, parser)
            for block, (kind, parser) in data["parsers"].items()
        }
        self._guarded: dict[str, BlockParser] = (
            dict(self.parsers)
            if reload is None
            else {block: _Reloading(self, block, p) for block, p in self.parsers.items()}
        )
        """What ``block_parser`` hands out: each parser, guarded by a fresh load when it
        was built from a cache entry (built once: a batch parses many records)."""

    def param_names(self, block: str) -> frozenset[str]:
        """The params a block's delimiters take (none for a block without a parser)."""
        parser = self.parsers.get(block)
        return parser.param_names if parser is not None else frozenset()

    def required_params(self, block: str) -> tuple[str, ...]:
        """The params a caller must give for ``block`` (none for a block without a parser)."""
        parser = self.parsers.get(block)
        return parser.required_params if parser is not None else ()

    def block_parser(self, block: str) -> BlockParser:
        parser = self._guarded.get(block)
        if parser is None:
            if block not in self.kinds:
                raise unknown_block_error(self.name, block, list(self.kinds))
            raise no_parser_error(block, self.kinds[block])
        return parser


class _Reloading:
    """A parser built from a cache entry's data that, when it fails in a way the engine's
    own data never does (an entry edited by hand and its digest recomputed), loads the
    pack afresh and parses with the fresh parser instead. An error of the fresh pack
    stands."""

    def __init__(self, pack: ParsingPack, block: str, parser: CachedParser) -> None:
        self.pack, self.block, self.parser = pack, block, parser

    def parse(self, text: str, nonce: str | None, params: Mapping[str, str]) -> ParseResult:
        try:
            return self.parser.parse(text, nonce, params)
        except EngineError:
            raise
        except Exception:
            assert self.pack._reload is not None
            fresh = self.pack._reload()
            self.pack.__dict__.update(fresh.__dict__)
            return self.pack.block_parser(self.block).parse(text, nonce, params)


def parsing_data(pack: Pack) -> dict[str, Any]:
    """The plain data a ``ParsingPack`` is built from."""
    model = pack.model
    return {
        "name": model.rulepack,
        "kinds": {name: contract.kind for name, contract in model.contracts.items()},
        "max_output_bytes": model.limits.max_output_bytes,
        "parsers": {
            name: [contract.kind, data]
            for name, contract in model.contracts.items()
            if (data := parser_data(contract, model)) is not None
        },
    }


def cache_dir() -> Path | None:
    if os.environ.get("RULES_NO_CACHE"):
        return None
    configured = os.environ.get("RULES_CACHE_DIR")
    if configured:
        return Path(configured)
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "rules-engine"


def _engine_stamp(names: tuple[str, ...]) -> list[list[Any]]:
    """Name, mtime and size of the engine modules ``names`` (files, folders (recursive) or
    glob patterns)."""
    stamp = []
    for name in names:
        target = _ENGINE_DIR / name
        if "*" in name:
            paths = sorted(_ENGINE_DIR.glob(name))
        else:
            paths = sorted(target.rglob("*.py")) if target.is_dir() else [target]
        for path in paths:
            info = path.stat()
            stamp.append([str(path.relative_to(_ENGINE_DIR)), info.st_mtime_ns, info.st_size])
    return stamp


# Version control's and Python tools' folders, never a pack's (any other may be: `.templates/`)
_NOT_THE_PACKS = frozenset(
    {".git", ".hg", ".svn", "__pycache__", ".venv", ".tox", ".mypy_cache", ".pytest_cache"}
)


def _fingerprint(folders: list[str]) -> dict[str, str] | None:
    """SHA-256 of every file under ``folders`` (and where a symlink points; one out of its
    folder is never read, its target's path is its fingerprint); None when there are too
    many files or too many bytes to be worth it, or a file cannot be read (a stray file of
    another user, a file deleted while the folder is read): such a pack is loaded every
    time."""
    digests: dict[str, str] = {}
    total = 0
    for folder in folders:
        for found in walk_pack_folder(Path(folder), lambda name: name in _NOT_THE_PACKS):
            path = str(found.path)
            if len(digests) >= MAX_FILES or found.size > MAX_BYTES - total:
                return None
            try:
                content = read_bounded(found, MAX_BYTES - total)
            except OSError:  # unreadable, or gone since the folder was listed
                return None
            total += len(content)
            if total > MAX_BYTES:
                return None
            digest = hashlib.sha256(content).hexdigest()
            if os.path.islink(path):
                digest += " -> " + os.path.realpath(path)
            digests[path] = digest
    return digests


def _entry_path(root: Path, purpose: str, pack_file: Path) -> Path:
    key = json.dumps([purpose, str(pack_file), VERSION, sys.version, FORMAT])
    return root / f"{purpose}-{hashlib.sha256(key.encode()).hexdigest()[:32]}.json"


def _signed(path: Path, stamp: Any, folders: Any, files: Any, text: str) -> str:
    """What an entry's digest signs: all it is used by (its name: purpose, pack, versions),
    so that no part of one entry can be moved into another or changed."""
    return json.dumps([path.name, FORMAT, stamp, folders, files, text])


Seen = dict[str, "dict[str, str] | None"]
"""The fingerprint of each of some folders, as a command found them before it loaded a pack."""


def _read_entry(path: Path, stamp: list[list[Any]], seen: Seen) -> dict[str, Any] | None:
    """The data of a current entry, or None (absent, damaged, edited, not a regular file,
    or anything changed): the whole entry must carry the digest it was signed with. The
    fingerprints of its folders, taken to compare, are put in ``seen``."""
    try:
        entry = strict_loads(read_own_file(path, MAX_ENTRY_BYTES))
    except (OSError, ValueError, RecursionError):
        return None
    if not isinstance(entry, dict) or entry.get("format") != FORMAT:
        return None
    folders, files = entry.get("folders"), entry.get("files")
    text, digest = entry.get("data"), entry.get("digest")
    if not isinstance(text, str) or not isinstance(digest, str) or not digest.isascii():
        return None  # (hmac.compare_digest refuses a str of other characters)
    try:
        signed = signature(_signed(path, stamp, folders, files, text), folder_key(path.parent))
    except (OSError, ValueError, RecursionError):
        return None
    if not hmac.compare_digest(digest, signed):
        return None
    # signed with the key: the engine's own writing, for this pack and this engine
    if not isinstance(folders, list) or not all(isinstance(f, str) for f in folders):
        return None
    seen.update((folder, _fingerprint([folder])) for folder in folders)
    if _merged(seen, folders) != files:
        return None
    try:
        data = json.loads(text)
    except (ValueError, RecursionError):
        return None
    return data if isinstance(data, dict) else None


def _merged(seen: Seen, folders: list[str]) -> dict[str, str] | None:
    files: dict[str, str] = {}
    for folder in folders:
        part = seen[folder] if folder in seen else _fingerprint([folder])
        if part is None:
            return None
        files.update(part)
    return files


def _seen_before_loading(seen: Seen, pack_file: Path) -> Seen:
    """``seen`` with the pack's own folder fingerprinted before the load (those of the packs
    it extends are known before only from a stale entry; else fingerprinted after)."""
    folder = str(pack_file.parent)
    if folder not in seen:
        seen[folder] = _fingerprint([folder])
    return seen


def _write_entry(
    path: Path, stamp: list[list[Any]], yaml_files: list[Path], data: dict[str, Any], seen: Seen
) -> None:
    if _from_git(yaml_files):
        return  # git packs resolve through rules.lock (or the remote) on every run
    folders = sorted({str(f.resolve().parent) for f in yaml_files})
    files = _merged(seen, folders)
    if files is None:
        return
    text = json.dumps(data, allow_nan=False)
    try:
        entry = {
            "format": FORMAT,
            "engine": stamp,
            "folders": folders,
            "files": files,
            "data": text,
            "digest": signature(
                _signed(path, stamp, folders, files, text), folder_key(path.parent)
            ),
        }
        content = json.dumps(entry).encode()
        if len(content) > MAX_ENTRY_BYTES:
            return  # it would never be read
        temporary = written_beside(path, content, 0o666)
        try:
            os.replace(temporary, path)  # readers see the old entry or the new, whole
        finally:
            remove_quietly(temporary)
    except OSError:
        return


def _from_git(files: list[Path]) -> bool:
    """Whether a pack was loaded with a git pack (which is never remembered)."""
    # Deferred: only writing an entry asks; a warm `rules parse` runs no git and saves
    # 6 ms of imports, 5% of its start (python -X importtime).
    from engine.format.gitpacks import cache_root

    try:
        root = cache_root().resolve()
        return any(Path(f).resolve().is_relative_to(root) for f in files)
    except (OSError, RuntimeError):  # a symlink loop in the way: not to be remembered
        return True


def _load_pack(pack_file: str | Path, locked: bool | None) -> Pack:
    """The pack loaded from its YAML and checked (``engine.pack.loaded.load_pack``)."""
    # Deferred: a warm `rules parse` and a pack from its image load no YAML and validate
    # nothing; pydantic, the models and the checks are 0.19 s more (python -X importtime).
    from engine.pack.loaded import load_pack

    return load_pack(pack_file, locked)


def open_parsing_pack(ref: str, locked: bool | None = None) -> ParsingPack:
    """The pack ``ref`` names, ready to parse: from the cache when it is current, else
    loaded and checked (``PackError`` as ``load_pack``, ``locked`` as there) and then
    cached."""
    pack_file = find_one_pack_file(ref).resolve()
    root = cache_dir()
    entry_path = _entry_path(root, "parse", pack_file) if root is not None else None
    stamp = _engine_stamp(_PARSE_MEANING)
    seen: Seen = {}

    def fresh() -> ParsingPack:
        if entry_path is not None:
            _seen_before_loading(seen, pack_file)
        pack = _load_pack(pack_file, locked)
        data = parsing_data(pack)
        if entry_path is not None:
            _write_entry(entry_path, stamp, list(pack.files), data, seen)
        return ParsingPack(data)

    if entry_path is not None:
        data = _read_entry(entry_path, stamp, seen)
        if data is not None:
            try:
                return ParsingPack(data, reload=fresh)
            except Exception:
                pass
    return fresh()


def open_pack(ref: str, locked: bool | None = None, *, cached: bool = True) -> Pack:
    """The pack ``ref`` names, built from its image (engine.pack.image) when the cache
    holds a current one, without YAML or pydantic; else loaded and checked (``PackError``
    as ``load_pack``, ``locked`` as there) and its image written. A damaged image is
    loaded afresh. Without ``cached``, loaded and checked only."""
    if not cached:
        return _load_pack(ref, locked)
    pack_file = find_one_pack_file(ref).resolve()
    root = cache_dir()
    entry_path = _entry_path(root, "pack", pack_file) if root is not None else None
    stamp = _engine_stamp(_IMAGE_MEANING) if root is not None else []
    seen: Seen = {}
    # Deferred: `rules parse` imports this module and builds no Pack; the compiled pack's
    # modules are 0.15 s more (python -X importtime).
    from engine.pack.image import pack_image, thawed_pack

    if entry_path is not None:
        image = _read_entry(entry_path, stamp, seen)
        if image is not None:
            try:
                return thawed_pack(image)
            except Exception:  # a file it names is gone, or data of the wrong shape:
                pass  # the pack is loaded afresh, and a problem of the pack is its error
    if entry_path is not None:
        _seen_before_loading(seen, pack_file)
    pack = _load_pack(pack_file, locked)
    image = pack_image(pack) if entry_path is not None else None
    if entry_path is not None and image is not None:
        _write_entry(entry_path, stamp, list(pack.files), image, seen)
    return pack


def check_packs_remembered(targets: list[str], locked: bool | None = None) -> list[CheckResult]:
    """``engine.pack.loaded.check_packs`` with a memory: a pack that was found clean is not
    loaded again while its files and the engine are unchanged. Packs with findings are
    always checked afresh, so every finding is current."""
    root = cache_dir()
    stamp = _engine_stamp(("",)) if root is not None else []
    results = []
    for target in targets:
        for pack_file in find_pack_files(target):
            results.append(_check_one(root, stamp, pack_file, locked))
    return results


def _check_one(
    root: Path | None, stamp: list[list[Any]], pack_file: Path, locked: bool | None
) -> CheckResult:
    entry_path = _entry_path(root, "check", pack_file.resolve()) if root is not None else None
    seen: Seen = {}
    if entry_path is not None:
        data = _read_entry(entry_path, stamp, seen)
        if data is not None and isinstance(data.get("name"), str):
            version = data.get("version")
            return CheckResult(
                display_path(pack_file),
                [],
                data["name"],
                version=version if isinstance(version, str) else None,
            )
    # Deferred: a remembered `rules check` loads no pack; YAML, pydantic, Jinja2 and every
    # check are 0.35 s more (python -X importtime).
    from engine.pack.selftests import check_pack_with_cases

    if entry_path is not None:
        _seen_before_loading(seen, pack_file.resolve())
    result = check_pack_with_cases(pack_file, locked)
    if entry_path is not None and not result.findings and result.tree is not None:
        data = {"name": result.name, "version": result.version}
        _write_entry(entry_path, stamp, result.tree.files, data, seen)
    return result


# ------------------------------------------------- the key that signs a folder's entries


def folder_key(root: Path) -> bytes:
    """The secret of the cache folder that signs its entries (the module's text says when
    it is trusted), made whole before it appears under its name, so that processes making
    it at once end up with one key. ``OSError`` when there is none to trust."""
    path = root / "key"
    try:
        return _trusted_key(path)
    except FileNotFoundError:
        root.mkdir(parents=True, exist_ok=True)
        return _new_key(path, replace=False)
    except OSError:
        info, ours = os.lstat(path), os.geteuid()
        if stat.S_ISDIR(info.st_mode) or ours not in (info.st_uid, os.stat(root).st_uid):
            raise  # a folder, or another user's key in another user's folder: left alone
        return _new_key(path, replace=True)


def _trusted_key(path: Path) -> bytes:
    flags = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | getattr(os, "O_CLOEXEC", 0)
    handle = os.open(path, flags)  # a symlink: OSError (ELOOP)
    try:
        info = os.fstat(handle)
        key = os.read(handle, 257)
    finally:
        os.close(handle)
    if not stat.S_ISREG(info.st_mode) or info.st_uid != os.geteuid():
        raise OSError(f"{path}: not a file of this user")
    if info.st_mode & 0o077:
        raise OSError(f"{path}: others may read or write it")
    if not 32 <= len(key) <= 256:
        raise OSError(f"{path}: not a key")
    return key


def _new_key(path: Path, replace: bool) -> bytes:
    """A new key as ``path`` (over the untrusted one when ``replace``), or the one another
    process made just before."""
    temporary = written_beside(path, secrets.token_hex(32).encode(), 0o600)
    try:
        if replace:
            os.replace(temporary, path)
        else:
            try:
                os.link(temporary, path)  # appears whole, or not at all when there is one
            except FileExistsError:
                pass  # made by another process just now: that one is the key
            except OSError:  # a file system without links: the last one written wins
                os.replace(temporary, path)
    finally:
        remove_quietly(temporary)
    return _trusted_key(path)


def signature(text: str, key: bytes) -> str:
    """The HMAC-SHA256 of ``text`` under ``key``, in hex."""
    return hmac.new(key, text.encode(), "sha256").hexdigest()
