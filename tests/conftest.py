"""Hermetic tests: every test gets its own AUTORECAP_HOME and a scrubbed environment."""

from __future__ import annotations

import os
from collections.abc import Iterator
from pathlib import Path

import pytest

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
