"""Ledger locations: paths and URLs of both backends, and passwords never shown."""

from __future__ import annotations

from pathlib import Path

import pytest

from engine.ledger import LedgerError, parse_url, redacted

SECRET = "hunter2-Xq"


@pytest.mark.parametrize(
    ("location", "backend", "path"),
    [
        ("ledger.db", "sqlite", Path("ledger.db")),
        ("sessions/a/ledger.db", "sqlite", Path("sessions/a/ledger.db")),
        ("/var/rules/ledger.db", "sqlite", Path("/var/rules/ledger.db")),
        ("sqlite:///var/rules/ledger.db", "sqlite", Path("/var/rules/ledger.db")),
        ("sqlite:///var/rules/my%20ledger.db", "sqlite", Path("/var/rules/my ledger.db")),
        ("postgresql://u@db.example:5432/rules", "postgresql", None),
        (f"postgres://u:{SECRET}@db.example/rules", "postgresql", None),
        ("postgresql:///rules?host=/run/postgresql", "postgresql", None),
    ],
)
def test_locations_name_their_backend(location: str, backend: str, path: Path | None) -> None:
    url = parse_url(location)
    assert (url.backend, url.path) == (backend, path)
    assert SECRET not in str(url) and SECRET not in repr(url)


def test_a_path_object_is_a_sqlite_file(tmp_path: Path) -> None:
    assert parse_url(tmp_path / "l.db").path == tmp_path / "l.db"


@pytest.mark.parametrize(
    ("location", "says"),
    [
        (f"mysql://u:{SECRET}@h/db", "unknown ledger scheme 'mysql'"),
        (f"postgresql://u:{SECRET}@h:port/db", "the port is not a number"),
        (f"postgresql://u:{SECRET}@h:99999/db", "the port is not a number"),
        (f"postgresql://u:{SECRET}@h:5432/", "no database name"),
        (f"postgresql://u:{SECRET}@/db", "no server host"),
        (f"postgresql:u:{SECRET}@h/db", "no '//' after the scheme"),
        ("sqlite://host/ledger.db", "sqlite:///path"),
        ("   ", "an empty ledger location"),
    ],
)
def test_a_bad_location_is_named_redacted_with_the_accepted_forms(location: str, says: str) -> None:
    with pytest.raises(LedgerError) as caught:
        parse_url(location)
    message = str(caught.value)
    assert says in message
    assert "postgresql://user:password@host:port/dbname" in message
    assert SECRET not in message


@pytest.mark.parametrize(
    ("url", "shown"),
    [
        (f"postgresql://u:{SECRET}@h:5432/db", "postgresql://u:***@h:5432/db"),
        (f"postgres://u:{SECRET}@h/db?sslmode=require", "postgres://u:***@h/db?sslmode=require"),
        ("postgresql://u:p@ss/w@rd@h/db", "postgresql://u:***@h/db"),
        (f"postgresql://u@h/db?password={SECRET}&x=1", "postgresql://u@h/db?password=***&x=1"),
        ("postgresql://u@h/db", "postgresql://u@h/db"),
        ("postgresql://h:5432/db", "postgresql://h:5432/db"),
        ("sessions/a/ledger.db", "sessions/a/ledger.db"),
    ],
)
def test_redacted_hides_any_password_and_nothing_else(url: str, shown: str) -> None:
    assert redacted(url) == shown


def test_scrub_hides_a_percent_encoded_password_in_both_forms() -> None:
    url = parse_url("postgresql://u:p%40ss%20w0rd%21@db.example:5432/rules")
    message = (
        'connection to server at "db.example" failed: password "p@ss w0rd!" rejected; '
        "dsn postgresql://u:p%40ss%20w0rd%21@db.example:5432/rules; raw p%40ss%20w0rd%21"
    )
    scrubbed = url.scrub(message)
    assert "p@ss w0rd!" not in scrubbed and "p%40ss%20w0rd%21" not in scrubbed
    assert scrubbed == (
        'connection to server at "db.example" failed: password "***" rejected; '
        "dsn postgresql://u:***@db.example:5432/rules; raw ***"
    )


def test_scrub_hides_a_query_password_value_in_both_forms() -> None:
    url = parse_url(f"postgresql://u@db.example/rules?sslmode=require&password={SECRET}%2Fz")
    assert str(url) == "postgresql://u@db.example/rules?sslmode=require&password=***"
    scrubbed = url.scrub(f"bad password {SECRET}/z (given as {SECRET}%2Fz)")
    assert scrubbed == "bad password *** (given as ***)"
    assert SECRET not in url.scrub(f"host=db.example password={SECRET}/z")


def test_scrub_leaves_a_message_without_the_password_as_it_is() -> None:
    url = parse_url("postgresql://u@db.example/rules")
    assert url.scrub('role "u" does not exist') == 'role "u" does not exist'
