"""Hermetic tests: every test gets its own AUTORECAP_HOME and a scrubbed environment."""

from __future__ import annotations

import itertools
import os
from collections.abc import Iterator
from pathlib import Path

import psycopg
import pytest

from autorecap.testing.postgres import PostgresServer

FIXTURES = Path(__file__).resolve().parents[2] / "shared" / "fixtures" / "st-chats"
if not FIXTURES.is_dir():  # a checkout laid out differently: fall back to a copy under tests/
    FIXTURES = Path(__file__).resolve().parent / "fixtures" / "st-chats"

_SCRUBBED_PREFIXES = ("AUTORECAP_", "OPENAI_", "XDG_DATA_HOME")


@pytest.fixture(autouse=True)
def _isolated_home(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    home = tmp_path_factory.mktemp("autorecap-home")
    saved = dict(os.environ)
    for key in list(os.environ):
        if key.startswith(_SCRUBBED_PREFIXES):
            del os.environ[key]
    os.environ["AUTORECAP_HOME"] = str(home)
    try:
        yield home
    finally:
        os.environ.clear()
        os.environ.update(saved)


@pytest.fixture
def home(_isolated_home: Path) -> Path:
    """This test's AUTORECAP_HOME."""
    return _isolated_home


def fixture_files() -> list[Path]:
    """Every SillyTavern chat file in shared/fixtures/st-chats."""
    return sorted(FIXTURES.rglob("*.jsonl"))


@pytest.fixture
def fixtures_dir() -> Path:
    return FIXTURES


# --- PostgreSQL ---------------------------------------------------------------------------------
# One throwaway server for the whole run (started at the first test that asks for it, on a Unix
# socket in a temporary folder), and a new empty database for each test. `make test` installs
# Debian's postgresql where it is missing.

_DATABASES = itertools.count(1)


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[PostgresServer]:
    server = PostgresServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def postgres_url(postgres_server: PostgresServer) -> Iterator[str]:
    """A new empty database of its own."""
    name = f"test_{next(_DATABASES)}"
    yield postgres_server.create_database(name)
    with psycopg.connect(postgres_server.url, autocommit=True) as conn:
        conn.execute(f'DROP DATABASE "{name}" WITH (FORCE)')


@pytest.fixture(params=["sqlite", "postgresql"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """The store of a test that runs on both backends: a SQLite file, or a PostgreSQL
    database of its own."""
    if request.param == "sqlite":
        return str(tmp_path / "store.db")
    url: str = request.getfixturevalue("postgres_url")
    return url
