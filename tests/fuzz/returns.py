"""Strategies of hostile return values of a model call (issue 35, item 7): what a Python
``call`` given to ``engine.run``/``engine.arun`` may hand back or raise. The engine reads
a return value once through the built-in types' own methods (engine.session.returned), so
none of these may get past it as an exception: each run ends in a RunResult (the hostile
value an EXECUTION_FAILED attempt) or, for an awaitable from a sync call, a UsageError."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st
from strategies import BASE_PACK, json_documents
from warm import RUN_PACK, api_pack_files, fenced

from engine.core.textio import MAX_OUTPUT_BYTES

X_CONTRACT = {"kind": "json", "schema_file": "s.json"}
"""The block ``x``: a valid pack always (what is fuzzed is the call, not the pack)."""


class Boom(Exception):
    """What the hostile methods raise."""


def _boom(*args: Any, **kwargs: Any) -> Any:
    raise Boom("hostile method ran")


def _str_subclass(method: str, text: str) -> str:
    """A ``str`` subclass of ``text`` whose ``method`` raises."""
    kind = type(f"HostileStr_{method.strip('_')}", (str,), {method: _boom})
    return kind(text)  # type: ignore[no-any-return]


def _bytes_subclass(method: str, data: bytes) -> bytes:
    kind = type(f"HostileBytes_{method.strip('_')}", (bytes,), {method: _boom})
    return kind(data)  # type: ignore[no-any-return]


STR_METHODS = [
    "__len__", "__str__", "__repr__", "encode", "__getitem__", "__iter__", "__hash__",
    "__eq__", "strip", "split", "splitlines", "__contains__", "startswith", "find",
    "__format__", "__getattribute__", "__bool__", "replace", "lstrip",
]  # fmt: skip
BYTES_METHODS = ["__len__", "__bytes__", "decode", "__getitem__", "__iter__", "__repr__"]


class PretendStr:
    """An object that says it is a ``str`` (isinstance is True) but is not one."""

    __class__ = str  # type: ignore[assignment]

    def __str__(self) -> str:
        return "VERDICT: PASS\n"

    def __len__(self) -> int:
        return 14


class Lying:
    """An object whose every text-ish method lies or raises."""

    def __str__(self) -> str:
        raise Boom("str")

    def __len__(self) -> int:
        return -1

    def __bytes__(self) -> bytes:
        raise Boom("bytes")


class HostileMeta(type):
    """A metaclass whose class attributes raise when read (a type's own name included)."""

    def __getattribute__(cls, name: str) -> Any:
        if name in ("__name__", "__qualname__", "__module__"):
            raise Boom(name)
        return type.__getattribute__(cls, name)


class MetaError(Exception, metaclass=HostileMeta):
    pass


class StrRaises(Exception):
    def __str__(self) -> str:
        raise Boom("str of an exception")

    def __repr__(self) -> str:
        raise Boom("repr of an exception")


class StrNotText(Exception):
    def __str__(self) -> Any:
        return 42


class StrSubclassOut(Exception):
    def __str__(self) -> str:
        return _str_subclass("split", "a hostile message")


class HugeMessage(Exception):
    def __str__(self) -> str:
        return "m" * 3_000_000


class Awaitable:
    def __await__(self) -> Any:
        yield from ()
        return "VERDICT: PASS\n"


class AwaitRaises:
    def __await__(self) -> Any:
        raise Boom("await")


async def _coroutine() -> str:
    return "VERDICT: PASS\n"


CAP = 4096
"""The ``max_output_bytes=`` of cases that measure text near the cap."""


def _near_cap() -> st.SearchStrategy[Any]:
    """Texts and bytes about ``CAP`` bytes long: one-byte, two-byte and four-byte
    characters, lone surrogates, each side of the cap."""
    sizes = st.sampled_from([CAP - 1, CAP, CAP + 1])
    chars = st.sampled_from(["x", "é", "\U0001f600", "\ud800", "\x00"])

    def text(size: int, char: str) -> Any:
        width = len(char.encode("utf-8", "surrogatepass"))
        return char * max(1, size // width) + "x" * (size % width)

    return st.one_of(
        st.builds(text, sizes, chars),
        sizes.map(lambda n: b"y" * n),
        sizes.map(lambda n: bytearray(b"z" * n)),
        sizes.map(lambda n: _str_subclass("encode", "x" * n)),
    )


def hostile_values() -> st.SearchStrategy[Any]:
    """A value a call returns (made fresh per example: some are used up once awaited)."""
    return st.one_of(
        st.builds(_str_subclass, st.sampled_from(STR_METHODS), st.sampled_from(["", "VERDICT"])),
        st.builds(_bytes_subclass, st.sampled_from(BYTES_METHODS), st.just(b"x")),
        st.sampled_from(
            [None, 0, 1.5, True, ["x"], {"a": "b"}, ("x",), object(), str, b"", bytearray()]
        ),
        st.builds(PretendStr),
        st.builds(Lying),
        st.builds(lambda: memoryview(b"x")),
        st.builds(lambda: iter(["x"])),
        st.builds(lambda: (c for c in "x")),
        st.builds(Boom, st.just("an exception returned, not raised")),
        st.builds(lambda: "x" * (MAX_OUTPUT_BYTES + 1)),  # past the default cap
        _near_cap(),
        st.one_of(fenced(), json_documents()),
    )


def _chained() -> Exception:
    """An exception caused by one whose ``__str__`` raises."""
    exc = Boom("outer")
    exc.__cause__ = StrRaises()
    return exc


def raised_values() -> st.SearchStrategy[tuple[str, Callable[[], BaseException]]]:
    """An exception a call raises: (its name, a function making it when the call runs, so
    that one whose type's name raises is never printed by the harness)."""
    made: list[tuple[str, Callable[[], BaseException]]] = [
        ("StrRaises", StrRaises),
        ("StrNotText", StrNotText),
        ("StrSubclassOut", StrSubclassOut),
        ("HugeMessage", HugeMessage),
        ("MetaError", lambda: MetaError("meta")),
        ("OSError", lambda: OSError(5, "x\x00\ud800")),
        ("UnicodeDecodeError", lambda: UnicodeDecodeError("utf-8", b"\xff", 0, 1, "bad")),
        ("RecursionError", RecursionError),
        ("chained", _chained),
        ("StopIteration", StopIteration),
        ("TimeoutError", asyncio.TimeoutError),
    ]
    return st.one_of(
        st.sampled_from(made),
        st.text(max_size=20).map(lambda text: ("Boom", lambda: Boom(text))),
    )


# A thunk makes the value when the call runs: a coroutine is used up once awaited.
Answer = Callable[[], Any]


def answers(asynchronous: bool) -> st.SearchStrategy[tuple[str, Answer]]:
    """(what the call does, shown in a failure; a thunk giving the value or raising)."""

    def returns(value: Any) -> tuple[str, Answer]:
        return (f"returns {_shown(value)}", lambda: value)

    def raises(made: tuple[str, Callable[[], BaseException]]) -> tuple[str, Answer]:
        def thunk() -> Any:
            raise made[1]()

        return (f"raises {made[0]}", thunk)

    awaitables: list[tuple[str, Answer]] = [
        ("returns a coroutine", _coroutine),
        ("returns an object with __await__", Awaitable),
        ("returns an awaitable whose __await__ raises", AwaitRaises),
    ]
    return st.one_of(
        hostile_values().map(returns),
        raised_values().map(raises),
        st.sampled_from(awaitables),
    )


def _shown(value: Any) -> str:
    kind = type.__getattribute__(type(value), "__name__")
    if type(value) in (str, bytes, bytearray):
        return f"{kind} of {len(value)}"
    return f"a {kind}"


def return_cases() -> st.SearchStrategy[
    tuple[str, dict[str, Any], list[tuple[str, Answer]], dict[str, Any], bool]
]:
    """(block, pack data, what successive calls do, options, async) for ``engine.run``."""

    @st.composite
    def case(draw: st.DrawFn) -> Any:
        asynchronous = draw(st.booleans())
        pack = {**RUN_PACK, "contracts": {**BASE_PACK["contracts"], "x": X_CONTRACT}}
        calls = draw(st.lists(answers(asynchronous), min_size=1, max_size=3))
        options: dict[str, Any] = draw(
            st.fixed_dictionaries(
                {},
                optional={
                    "max_output_bytes": st.just(CAP),
                    "timeout": st.sampled_from([5.0, 30.0]),
                },
            )
        )
        return draw(st.sampled_from(["doc", "x"])), pack, calls, options, asynchronous

    return case()


__all__ = ["CAP", "api_pack_files", "return_cases"]
