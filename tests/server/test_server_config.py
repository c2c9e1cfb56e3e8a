"""What `ServerConfig` (and `autorecap serve`'s options) change in the app."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from autorecap.cli import app as cli
from autorecap.errors import AutorecapError
from autorecap.server.app import ServerConfig, create_app

UPSTREAM = "http://127.0.0.1:9/v1"


def synchronous(db: Path, durable: bool) -> int:
    app = create_app(ServerConfig(upstream=UPSTREAM, db=db, durable=durable))
    value: int = app.state.store.run(lambda c: c.execute("PRAGMA synchronous").fetchone()[0])
    app.state.store.close()
    return value


def test_saves_wait_for_the_disk_only_when_durable(tmp_path: Path) -> None:
    assert synchronous(tmp_path / "a.db", durable=False) == 1  # NORMAL
    assert synchronous(tmp_path / "b.db", durable=True) == 2  # FULL


def test_an_upstream_that_is_not_a_url_is_refused(tmp_path: Path) -> None:
    with pytest.raises(AutorecapError, match="must be an http"):
        create_app(ServerConfig(upstream="localhost:8080", db=tmp_path / "x.db"))


def test_serve_documents_durable_and_keys() -> None:
    result = CliRunner().invoke(cli, ["serve", "--help"], terminal_width=200)
    assert result.exit_code == 0
    assert "--durable" in result.output
    assert "--keys-file" in result.output


def test_the_api_docs_need_no_cdn(tmp_path: Path) -> None:
    from fastapi.testclient import TestClient

    app = create_app(ServerConfig(upstream=UPSTREAM, db=tmp_path / "x.db", worker=False))
    with TestClient(app) as client:
        page = client.get("/docs")
        assert page.status_code == 200
        assets = re.findall(r'(?:src|href)="([^"]+)"', page.text)
        assert assets
        assert all(asset.startswith("/") for asset in assets)  # nothing from another host
        for asset in assets:
            assert client.get(asset).status_code == 200
        assert client.get("/openapi.json").json()["paths"]["/api/chats"]
