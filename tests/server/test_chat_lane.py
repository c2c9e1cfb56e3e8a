"""The short way in for chat completions (`app._ChatLane`): the paths it takes, the ones it
leaves to FastAPI, and an unexpected failure answered in the proxy's error shape."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from autorecap.server.app import ServerConfig, create_app
from autorecap.server.proxy.routes import _chat_of_path

UPSTREAM = "http://127.0.0.1:9/v1"  # nothing listens there: a chat completion is a 502
BODY = {"model": "m", "messages": [{"role": "user", "content": "Ahoy."}]}


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    app = create_app(ServerConfig(upstream=UPSTREAM, db=tmp_path / "lane.db", worker=False))
    with TestClient(app, raise_server_exceptions=False) as made:
        yield made


@pytest.mark.parametrize(
    ("path", "chat"),
    [
        ("/v1/chat/completions", ""),
        ("/c/mira/v1/chat/completions", "mira"),
        ("/c/Captain Mira - 2026/v1/chat/completions", "Captain Mira - 2026"),
        ("/c//v1/chat/completions", None),  # no chat id
        ("/c/a/b/v1/chat/completions", None),  # two segments: not the route's
        ("/v1/chat/completions/", None),
        ("/v1/completions", None),
        ("/api/chats", None),
    ],
)
def test_the_paths_the_lane_takes(path: str, chat: str | None) -> None:
    assert _chat_of_path(path) == chat


def test_chat_completions_through_the_lane_reach_the_upstream_or_say_why(
    client: TestClient,
) -> None:
    answer = client.post("/c/mira/v1/chat/completions", json=BODY)
    assert answer.status_code == 502
    assert "cannot be reached" in answer.json()["error"]["message"]
    assert client.get("/api/chats").json()["chats"][0]["id"] == "mira"
    bad = client.post("/c/mira/v1/chat/completions", content=b"{nope")
    assert bad.status_code == 400
    assert bad.json()["error"]["message"] == "the request body is not JSON"


def test_a_slash_inside_a_chat_id_goes_the_long_way(client: TestClient) -> None:
    assert client.post("/c/a%2Fb/v1/chat/completions", json=BODY).status_code == 404


def test_an_unexpected_failure_is_a_500_in_the_error_shape_and_logged(
    client: TestClient, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    registry: Any = client.app.state.registry  # type: ignore[attr-defined]

    def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("the disk caught fire")

    monkeypatch.setattr(registry, "begin", broken)
    with caplog.at_level(logging.ERROR, logger="autorecap.server"):
        answer = client.post("/c/mira/v1/chat/completions", json=BODY)
    assert answer.status_code == 500
    assert answer.json()["error"]["message"] == "the proxy failed on this request (see its log)"
    assert "the disk caught fire" in caplog.text  # the traceback is in the log, not the body
    assert "fire" not in answer.text
    monkeypatch.undo()
    assert client.post("/c/mira/v1/chat/completions", json=BODY).status_code == 502  # still up


def test_a_body_nested_too_deeply_or_a_chat_id_no_url_reaches_is_a_400(
    client: TestClient, caplog: pytest.LogCaptureFixture
) -> None:
    deep = b'{"model":"m","messages":[{"role":"user","content":"d","x":%s%s}]}' % (
        b"[" * 100_000,
        b"]" * 100_000,
    )
    with caplog.at_level("WARNING"):
        answer = client.post("/c/mira/v1/chat/completions", content=deep)
    assert answer.status_code == 400
    assert answer.json()["error"]["message"] == "the request body is not JSON"
    assert "Traceback" not in caplog.text
    for chat_id in ("%2e%2e", "."):
        dots = client.post(f"/c/{chat_id}/v1/chat/completions", json=BODY)
        assert dots.status_code in (400, 404), dots.text  # a router may normalise it away
        if dots.status_code == 400:
            assert "cannot be reached in a URL" in dots.json()["error"]["message"]
    named = client.post("/v1/chat/completions", json=BODY, headers={"X-Autorecap-Chat": ".."})
    assert named.status_code == 400
    assert "cannot be reached in a URL" in named.json()["error"]["message"]
