"""Reading the files the engine is given, within a byte bound and without blocking.

A FIFO blocks ``open`` until a writer comes (and a read until it writes), a socket is no
file, a folder cannot be read: each is refused before anything is read. The file is opened
without blocking and checked on the open descriptor (``fstat``), so nothing can be swapped
in between the check and the read. A device (``/dev/zero``) is read up to the bound, still
without blocking: a terminal with nothing typed is an error, not a wait.
"""

from __future__ import annotations

import contextlib
import io
import os
import stat
from pathlib import Path
from typing import Any, BinaryIO, cast

from engine.core.textio import read_capped


class NotARegularFile(OSError):
    """The path names a FIFO, a socket or a folder, not a file."""


def _kind(mode: int) -> str:
    if stat.S_ISDIR(mode):
        return "a folder"
    if stat.S_ISFIFO(mode):
        return "a FIFO (named pipe)"
    if stat.S_ISCHR(mode) or stat.S_ISBLK(mode):
        return "a device"
    if stat.S_ISSOCK(mode):
        return "a socket"
    return "not a regular file"


def open_checked(path: Path | str) -> BinaryIO:
    """The file at ``path``, open for reading in binary, never having blocked to open it.

    Raises ``NotARegularFile`` (an ``OSError`` naming the file) for a socket, a folder, or a
    FIFO that no process writes to (reading it would wait forever); a pipe with a writer (a
    process substitution ``<(cmd)``, ``/dev/stdin`` on a pipe) is read as it is written.
    ``OSError`` for a file that cannot be opened.
    """
    flags = os.O_RDONLY | getattr(os, "O_NONBLOCK", 0) | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)
    try:
        mode = os.fstat(fd).st_mode
        if stat.S_ISSOCK(mode) or stat.S_ISDIR(mode):
            raise NotARegularFile(
                0, f"{_kind(mode)}, not a regular file; give a file", os.fspath(path)
            )
        prefix: bytes | None = b""
        if stat.S_ISFIFO(mode):
            try:
                prefix = os.read(fd, _PROBE_BYTES)
            except BlockingIOError:
                prefix = None  # a writer, nothing written yet
            if prefix == b"":  # no writer: end of file at once, never data
                raise NotARegularFile(
                    0, f"{_kind(mode)}, not a regular file; give a file", os.fspath(path)
                )
            os.set_blocking(fd, True)  # a live pipe: wait for what its writer writes
        stream = os.fdopen(fd, "rb")
    except BaseException:
        os.close(fd)
        raise
    if prefix:
        return cast(BinaryIO, io.BufferedReader(_Prefixed(prefix, stream)))
    return cast(BinaryIO, stream)


_PROBE_BYTES = 65536


class _Prefixed(io.RawIOBase):
    """A stream that gives ``prefix`` (bytes already read from a pipe) before the rest."""

    def __init__(self, prefix: bytes, rest: BinaryIO) -> None:
        self._prefix = memoryview(prefix)
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if self._prefix:
            size = min(len(buffer), len(self._prefix))
            buffer[:size] = self._prefix[:size]
            self._prefix = self._prefix[size:]
            return size
        return self._rest.readinto(buffer)  # type: ignore[attr-defined,no-any-return]

    def close(self) -> None:
        self._rest.close()
        super().close()


def read_file_capped(path: Path | str, limit: int) -> tuple[bytes, bool]:
    """At most ``limit`` bytes of the file at ``path``, and whether it holds more.

    Raises ``NotARegularFile`` (an ``OSError`` naming the file) for a socket, a folder or a
    FIFO without a writer, and ``OSError`` for a file that cannot be opened or read; never
    waits on a file that nothing will write.
    """
    with open_checked(path) as stream:
        return read_capped(stream, limit)


def read_file_bytes(path: Path | str, limit: int) -> bytes:
    """The whole file at ``path``; ``OSError`` when it is larger than ``limit``."""
    data, more = read_file_capped(path, limit)
    if more:
        raise OSError(0, f"file is over the {limit}-byte limit; it was not read", os.fspath(path))
    return data


def read_file_text(path: Path | str, limit: int) -> str:
    """The file at ``path`` as UTF-8 (``UnicodeDecodeError`` if it is not); ``OSError``
    when it is a FIFO, socket or folder, cannot be read or is over ``limit`` bytes."""
    return read_file_bytes(path, limit).decode("utf-8")


def read_own_file(path: Path | str, limit: int) -> bytes:
    """The regular file at ``path`` itself, as a program reads back a file it wrote: a
    symlink, a FIFO, a device or a folder in its place is an ``OSError``, never followed,
    waited on or read; so is a file larger than ``limit``."""
    flags = os.O_RDONLY | os.O_NONBLOCK | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    fd = os.open(path, flags)  # a symlink: ELOOP
    with os.fdopen(fd, "rb") as stream:
        mode = os.fstat(fd).st_mode
        if not stat.S_ISREG(mode):
            raise NotARegularFile(0, f"{_kind(mode)}, not a regular file", os.fspath(path))
        data, more = read_capped(cast(BinaryIO, stream), limit)
    if more:
        raise OSError(0, f"file is over the {limit}-byte limit; it was not read", os.fspath(path))
    return data


def written_beside(path: Path, content: bytes, mode: int) -> Path:
    """A new file in the folder of ``path``, of a name of its own (processes writing at once
    do not share one), holding ``content``: to be renamed to ``path`` once whole. Removed
    again when it cannot be written whole (a full disk): ``OSError`` then."""
    temporary = path.with_name(f".{path.name}.{os.getpid()}.{os.urandom(4).hex()}.tmp")
    flags = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | getattr(os, "O_CLOEXEC", 0)
    handle = os.open(temporary, flags, mode)
    try:
        with os.fdopen(handle, "wb") as out:
            out.write(content)
    except BaseException:
        remove_quietly(temporary)
        raise
    return temporary


def remove_quietly(path: Path | str) -> None:
    """``path`` removed, if it can be."""
    with contextlib.suppress(OSError):
        os.unlink(path)


def is_regular_file(path: Path | str) -> bool:
    """Whether ``path`` is a regular file (following links), without opening it."""
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except (OSError, ValueError):
        return False


MAX_NAME_BYTES = 255
MAX_PATH_BYTES = 4096


def path_problem(name: str) -> str | None:
    """Why ``name`` (a path a pack writes) can be no file name on this system, or None: a NUL
    character, a part longer than 255 bytes or a path longer than 4096 bytes would make the
    operating system refuse it with an error rather than a finding."""
    if "\0" in name:
        return "it holds a NUL character"
    try:
        os.fsencode(name)
    except UnicodeEncodeError:
        return "it holds a character no file name can hold (a lone surrogate)"
    encoded = name.encode("utf-8", "surrogatepass")
    if len(encoded) > MAX_PATH_BYTES:
        return f"it is longer than {MAX_PATH_BYTES} bytes"
    if any(len(part) > MAX_NAME_BYTES for part in encoded.split(b"/")):
        return f"a part of it is longer than {MAX_NAME_BYTES} bytes"
    return None
