"""Issue 35: one redaction for every text the engine shows (engine/core/redaction.py): a
registered secret is scrubbed in every form a program may show it, and so is a password
a URL's shape shows."""

from __future__ import annotations

import io
import logging
import sys

import pytest

from engine.core import redaction
from engine.server.access import ScrubFilter


def test_a_registered_value_is_scrubbed_in_every_form_and_piece() -> None:
    redaction.register("Reg@Tail-Unit91/x")
    for shown in (
        "password Reg@Tail-Unit91/x refused",
        "given as Reg%40Tail-Unit91%2Fx",
        "failed to resolve host 'Tail-Unit91/x@127.0.0.1'",
        "failed to resolve host 'Tail-Unit91@127.0.0.1'",
    ):
        assert "Tail-Unit91" not in redaction.scrub(shown), shown
    assert redaction.scrub("nothing here") == "nothing here"


def test_a_value_shorter_than_four_characters_is_left_to_the_url_shape() -> None:
    redaction.register("abc")
    assert redaction.scrub("abcdef") == "abcdef"
    assert redaction.scrub("postgresql://u:abc@h/db") == "postgresql://u:***@h/db"


@pytest.mark.parametrize(
    ("text", "shown"),
    [
        ("at postgresql://u:Some@Pass@h:5432/db.", "at postgresql://u:***@h:5432/db."),
        ("dsn postgres://u:pw@h/db and more", "dsn postgres://u:***@h/db and more"),
        ("GET /x?access_token=abcdefgh&y=1", "GET /x?access_token=***&y=1"),
        ("give postgresql://user:password@host:port/dbname", None),  # a form, not a secret
        ("role u@h has no password", None),
    ],
)
def test_a_url_that_shows_a_password_loses_it(text: str, shown: str | None) -> None:
    assert redaction.scrub(text) == (shown or text)


def test_the_streams_of_the_command_are_scrubbed(monkeypatch: pytest.MonkeyPatch) -> None:
    redaction.register("Stream-Secret-55")
    out = io.StringIO()
    monkeypatch.setattr(sys, "stdout", out)
    redaction.guard_streams()
    redaction.guard_streams()  # once only
    assert isinstance(sys.stdout, redaction.ScrubbingStream)
    assert not isinstance(sys.stdout._stream, redaction.ScrubbingStream)
    print("error: Stream-Secret-55 was refused")
    sys.stdout.writelines(["x Stream-Secret-55\n"])
    assert out.getvalue() == "error: *** was refused\nx ***\n"
    assert sys.stdout.getvalue() == out.getvalue()  # everything else is the stream's


def test_a_log_record_and_its_traceback_are_scrubbed() -> None:
    redaction.register("Log-Secret-66")
    sink = io.StringIO()
    handler = logging.StreamHandler(sink)
    handler.addFilter(ScrubFilter())
    log = logging.getLogger("tests.redaction")
    log.addHandler(handler)
    try:
        try:
            raise ValueError("bad Log-Secret-66")
        except ValueError:
            log.exception("ledger %s failed", "postgresql://u:Log-Secret-66@h/db")
    finally:
        log.removeHandler(handler)
    assert "Log-Secret-66" not in sink.getvalue()
    assert "ValueError: bad ***" in sink.getvalue()


def test_scrubbing_a_hostile_text_takes_linear_time() -> None:
    """Everything the command prints goes through ``scrub``: a model's output of any shape
    must not make it quadratic."""
    import time

    redaction.register("Linear-Secret-77")
    for text in (
        "a.:" * 300_000 + "@" + "://" * 300_000,
        "x://u:" + "@" * 1_000_000,
        "?password=" * 200_000,
        "://a@" * 300_000,
    ):
        started = time.perf_counter()
        redaction.scrub(text)
        assert time.perf_counter() - started < 2, text[:20]
