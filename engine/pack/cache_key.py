"""The secret that signs the compiled-pack cache's entries: one key per cache folder.

The key is trusted only as a regular file (not a symlink) of this user, mode 0600, 32 to
256 bytes. One that is not (readable by others, 0644: anyone who read it could sign
entries) is replaced when the key or the folder is this user's, else left alone and the
cache not used. A new key is written whole, then linked into place, so that processes
making it at once end up with one key.
"""

from __future__ import annotations

import hmac
import os
import secrets
import stat
from pathlib import Path

from engine.core.files import remove_quietly, written_beside


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
