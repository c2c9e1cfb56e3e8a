"""The REST API's chats: list, import, get, export, delete, recap; memory switches; the prompt
preview; the error shape; keys. In process (`TestClient`, lifespan on), the recap worker off
unless a test runs the jobs itself (`run_jobs`). The helpers here serve test_api_chats_*.py."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx
import pytest
from fastapi.testclient import TestClient

from autorecap.core.data import set_data
from autorecap.core.recall import RECALL_KEY
from autorecap.core.slots import SHORT_KEY
from autorecap.jobs.context import WorkerStats
from autorecap.profiles import Profiles
from autorecap.recap.backends import make_backend
from autorecap.sample import sample_chat_path
from autorecap.server.api import chats as api_chats
from autorecap.server.app import ServerConfig, create_app
from autorecap.stfiles.jsonl import serialize_chat
from autorecap.testing import generate_chat
from tests.conftest import FIXTURES

UPSTREAM = "http://127.0.0.1:9/v1"
CHAT = "Captain Mira - 2026-03-02@18h11m40s"
"""A SillyTavern-style id: spaces and '@'."""


# --- helpers (imported by test_api_chats_*.py) ---------------------------------------------------


@contextmanager
def client_for(db: Path, **options: Any) -> Iterator[TestClient]:
    """An app on `db` (the worker off unless `worker=True`), lifespan running."""
    options.setdefault("worker", False)
    app = create_app(ServerConfig(upstream=UPSTREAM, db=db, **options))
    with TestClient(app) as client:
        yield client


@pytest.fixture
def db(tmp_path: Path) -> Path:
    return tmp_path / "api.db"


@pytest.fixture
def client(db: Path) -> Iterator[TestClient]:
    with client_for(db) as made:
        yield made


def url(chat: str, rest: str = "") -> str:
    return f"/api/chats/{quote(chat, safe='')}{rest}"


def sample_bytes() -> bytes:
    return sample_chat_path().read_bytes()


def chat_bytes(n: int = 60, *, seed: int = 3, **options: Any) -> bytes:
    return serialize_chat(generate_chat(n, seed=seed, **options))


def import_chat(client: TestClient, data: bytes, chat: str = CHAT) -> dict[str, Any]:
    response = client.post("/api/chats", params={"id": chat}, content=data)
    assert response.status_code == 201, response.text
    body: dict[str, Any] = response.json()
    return body


def run_jobs(client: TestClient) -> WorkerStats:
    """Run every queued job with the offline engine, on the app's shared chats."""
    app: Any = client.app
    registry = app.state.registry
    worker = registry.worker(
        lambda settings: make_backend(settings, backend="offline"),
        idle_sleep=0.01,
    )
    return worker.run(until_empty=True)


def recapped(client: TestClient, chat: str = CHAT) -> None:
    """Import the sample chat as `chat` and run the whole pipeline on it."""
    import_chat(client, sample_bytes(), chat)
    assert client.post(url(chat, "/recap")).status_code == 200
    stats = run_jobs(client)
    assert stats.failed == 0, stats.errors


def error_of(response: httpx.Response, status: int, field: str | None = None) -> str:
    """Check the one error shape and return its message."""
    assert response.status_code == status, response.text
    error = response.json()["error"]
    assert error["type"] == "autorecap_error"
    assert error["code"] == status
    assert error.get("field") == field
    message: str = error["message"]
    assert message
    return message


# --- listing and importing -----------------------------------------------------------------------


def test_a_new_server_lists_no_chats(client: TestClient) -> None:
    assert client.get("/api/chats").json() == {"chats": []}


def test_a_group_chat_is_summarised_with_its_cast(client: TestClient) -> None:
    group = (FIXTURES / "handmade" / "group.jsonl").read_bytes()
    summary = import_chat(client, group, "caravan")["chat"]
    assert summary["character"] == "Juno, Bram"  # not whoever spoke last
    assert client.get("/api/chats").json()["chats"][0]["character"] == "Juno, Bram"


def test_import_stores_the_chat_and_summarises_it(client: TestClient, db: Path) -> None:
    body = import_chat(client, sample_bytes())
    summary = body["chat"]
    assert body["problems"] == []
    assert summary["id"] == CHAT
    assert summary["messages"] == 199
    assert summary["character"] == "Captain Mira Vale"
    assert summary["user"] == "Tomas"
    assert summary["enabled"] is True
    assert summary["running_versions"] == 0
    listed = client.get("/api/chats").json()["chats"]
    assert [c["id"] for c in listed] == [CHAT]
    assert listed[0]["messages"] == 199
    client.close()
    with client_for(db) as again:
        assert [c["id"] for c in again.get("/api/chats").json()["chats"]] == [CHAT]


def test_the_list_shows_running_versions_once_recapped(client: TestClient) -> None:
    recapped(client)
    import_chat(client, chat_bytes(30), "second")
    listed = {c["id"]: c for c in client.get("/api/chats").json()["chats"]}
    assert listed[CHAT]["running_versions"] >= 2
    assert listed["second"]["running_versions"] == 0
    assert listed["second"]["messages"] == 30


def test_import_takes_the_id_from_x_filename(client: TestClient) -> None:
    response = client.post(
        "/api/chats",
        content=sample_bytes(),
        headers={"X-Filename": quote("chats/Mira - 2026-03-02@18h11m40s.jsonl")},
    )
    assert response.status_code == 201, response.text
    assert response.json()["chat"]["id"] == "Mira - 2026-03-02@18h11m40s"


def test_import_without_a_name_makes_one(client: TestClient) -> None:
    first = client.post("/api/chats", content=sample_bytes())
    second = client.post("/api/chats", content=sample_bytes())
    assert first.status_code == second.status_code == 201
    ids = {first.json()["chat"]["id"], second.json()["chat"]["id"]}
    assert len(ids) == 2
    assert all(i.startswith("chat-") for i in ids)


def test_import_over_an_existing_chat_needs_replace(client: TestClient, db: Path) -> None:
    import_chat(client, sample_bytes())
    taken = client.post("/api/chats", params={"id": CHAT}, content=chat_bytes(40))
    assert "replace=true" in error_of(taken, 409, "id")
    assert client.get(url(CHAT)).json()["messages"] == 199  # untouched
    replaced = client.post(
        "/api/chats", params={"id": CHAT, "replace": "true"}, content=chat_bytes(40)
    )
    assert replaced.status_code == 201, replaced.text
    assert client.get(url(CHAT)).json()["messages"] == 40
    assert client.get(url(CHAT, "/messages")).json()["total"] == 40
    client.close()
    with client_for(db) as again:
        assert again.get(url(CHAT)).json()["messages"] == 40


def test_import_keeps_malformed_lines_and_reports_them(client: TestClient) -> None:
    lines = sample_bytes().split(b"\n")
    lines.insert(3, b'{"name": "Tomas", "mes": "cut off')
    lines.insert(6, b"[1, 2]")
    data = b"\n".join(lines)
    body = import_chat(client, data)
    assert [p["line"] for p in body["problems"]] == [4, 7]
    assert all(p["message"] for p in body["problems"])
    assert body["chat"]["messages"] == 199
    exported = client.get(url(CHAT, "/export"))
    assert exported.content == data  # the bad lines are back where they were


@pytest.mark.parametrize(
    "data",
    [
        b"# A README\n\nSome text, not a chat.\n",
        bytes(range(256)) * 40,
        b'{"user_name": "a"}\nnot json\n[1]\n',  # a header, and no message read
    ],
    ids=["text", "binary", "no-message"],
)
def test_import_refuses_a_file_that_is_not_a_chat(client: TestClient, data: bytes) -> None:
    message = error_of(client.post("/api/chats", params={"id": "x"}, content=data), 422, "body")
    assert message.startswith("this is not a SillyTavern chat (line ")
    assert client.get("/api/chats").json() == {"chats": []}  # nothing stored


def test_import_refuses_an_empty_file(client: TestClient) -> None:
    assert "empty" in error_of(client.post("/api/chats", params={"id": "x"}, content=b""), 400)
    assert client.get("/api/chats").json() == {"chats": []}


def test_import_refuses_an_id_with_a_slash(client: TestClient) -> None:
    response = client.post("/api/chats", params={"id": "a/b"}, content=sample_bytes())
    error_of(response, 422, "id")
    response = client.post("/api/chats", params={"id": " "}, content=sample_bytes())
    error_of(response, 422, "id")


def test_import_refuses_a_header_whose_metadata_is_not_an_object(client: TestClient) -> None:
    data = b'{"chat_metadata": 5, "user_name": "unused"}\n{"name": "A", "mes": "hi"}\n'
    response = client.post("/api/chats", params={"id": "bad"}, content=data)
    assert "chat_metadata" in error_of(response, 400, "body")
    assert client.get("/api/chats").json() == {"chats": []}


def test_import_over_the_size_limit_is_413(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(api_chats, "MAX_IMPORT_BYTES", 1000)
    declared = client.post("/api/chats", params={"id": "big"}, content=sample_bytes())
    error_of(declared, 413)

    def pieces() -> Iterator[bytes]:  # no Content-Length: the limit holds while reading
        data = sample_bytes()
        for start in range(0, len(data), 500):
            yield data[start : start + 500]

    streamed = client.post("/api/chats", params={"id": "big"}, content=pieces())
    error_of(streamed, 413)
    assert client.get("/api/chats").json() == {"chats": []}


# --- one chat ------------------------------------------------------------------------------------


def test_get_a_chat_before_and_after_a_recap(client: TestClient) -> None:
    import_chat(client, sample_bytes())
    before = client.get(url(CHAT)).json()
    assert before["running"] is None
    assert before["scenes"] == 1  # one open scene
    assert before["jobs"]["queued"] == 0
    assert client.post(url(CHAT, "/recap")).json()["jobs"] > 100
    queued = client.get(url(CHAT)).json()["jobs"]
    assert queued["queued"] > 100
    run_jobs(client)
    after = client.get(url(CHAT)).json()
    assert after["jobs"]["queued"] == 0
    assert after["jobs"]["done"] > 100
    assert after["scenes"] > 2
    assert after["running_versions"] >= 2
    assert after["running"]["content"]
    running = client.get(url(CHAT, "/running")).json()
    assert after["running"]["version"] == running["selected"]


def test_unknown_chats_are_404_everywhere(client: TestClient) -> None:
    for method, path in [
        ("GET", ""),
        ("GET", "/export"),
        ("DELETE", ""),
        ("POST", "/recap"),
        ("GET", "/messages"),
        ("GET", "/messages/0"),
        ("POST", "/messages/0/regenerate"),
        ("GET", "/scenes"),
        ("DELETE", "/scenes/0"),
        ("POST", "/scenes/0/regenerate"),
        ("GET", "/running"),
        ("DELETE", "/running/0"),
        ("GET", "/memory"),
        ("GET", "/preview"),
    ]:
        response = client.request(method, url("no such chat", path))
        assert "no chat 'no such chat'" in error_of(response, 404, "chat"), (method, path)
    for path, body in [
        ("/messages/0", {"exclude": True}),
        ("/scenes/0", {"name": "x"}),
        ("/running", {"selected": 0}),
        ("/memory", {"chat": False}),
    ]:
        error_of(client.patch(url("no such chat", path), json=body), 404, "chat")
    error_of(client.post(url("no such chat", "/scenes"), json={"index": 0}), 404, "chat")
    assert client.get("/api/chats").json() == {"chats": []}  # nothing was created


def test_export_is_byte_exact_and_follows_changes(client: TestClient) -> None:
    data = sample_bytes()
    import_chat(client, data)
    response = client.get(url(CHAT, "/export"))
    assert response.status_code == 200
    assert response.content == data
    assert response.headers["content-type"] == "application/x-ndjson"
    assert response.headers["content-disposition"].startswith(
        f'attachment; filename="{CHAT}.jsonl"'
    )
    patched = client.patch(url(CHAT, "/messages/3"), json={"recap": "Tomas asks for passage."})
    assert patched.status_code == 200
    changed = client.get(url(CHAT, "/export")).content.split(b"\n")
    original = data.split(b"\n")
    assert len(changed) == len(original)
    assert [i for i, (a, b) in enumerate(zip(changed, original, strict=True)) if a != b] == [4]
    assert b"Tomas asks for passage." in changed[4]


def test_export_of_a_chat_nobody_opened_is_the_imported_file(client: TestClient) -> None:
    data = chat_bytes(300, with_recaps=True)
    import_chat(client, data)
    assert client.get(url(CHAT, "/export")).content == data
    client.get(url(CHAT, "/messages"))  # opening it refreshes its memory, as SillyTavern does
    opened = client.get(url(CHAT, "/export")).content
    assert opened.count(b"\n") == data.count(b"\n")


def test_delete_removes_the_chat_and_cancels_its_jobs(client: TestClient, db: Path) -> None:
    import_chat(client, sample_bytes())
    import_chat(client, chat_bytes(20), "other")
    client.post(url(CHAT, "/recap"))
    response = client.delete(url(CHAT))
    assert response.status_code == 204
    assert response.content == b""
    error_of(client.get(url(CHAT)), 404, "chat")
    error_of(client.delete(url(CHAT)), 404, "chat")
    assert [c["id"] for c in client.get("/api/chats").json()["chats"]] == ["other"]
    app: Any = client.app
    assert app.state.queue.counts(CHAT)["queued"] == 0
    assert app.state.queue.counts(CHAT)["cancelled"] > 0
    run_jobs(client)
    assert [c["id"] for c in client.get("/api/chats").json()["chats"]] == ["other"]
    client.close()
    with client_for(db) as again:
        assert [c["id"] for c in again.get("/api/chats").json()["chats"]] == ["other"]


def test_a_job_running_when_its_chat_is_deleted_does_not_bring_it_back(
    client: TestClient,
) -> None:
    import_chat(client, sample_bytes())
    client.post(url(CHAT, "/recap"))
    app: Any = client.app
    registry = app.state.registry
    worker = registry.worker(lambda settings: make_backend(settings, backend="offline"))
    job = app.state.queue.claim()  # the worker is running this job...
    assert client.delete(url(CHAT)).status_code == 204  # ...when the chat is deleted
    worker.execute(job)
    assert client.get("/api/chats").json() == {"chats": []}


def test_recap_with_the_in_process_worker(db: Path) -> None:
    with client_for(db, worker=True) as client:
        import_chat(client, sample_bytes())
        assert client.post(url(CHAT, "/recap")).status_code == 200
        deadline = time.monotonic() + 30
        while True:
            # Scene detection queues the scene jobs just after it is done: the queue can look
            # empty for a moment before the running recap is made.
            found = client.get(url(CHAT)).json()
            jobs = found["jobs"]
            if jobs["queued"] == jobs["running"] == 0 and found["running"] is not None:
                break
            assert time.monotonic() < deadline, jobs
            time.sleep(0.05)
        assert jobs["failed"] == 0
        assert found["running_versions"] >= 2


def test_recap_force_redoes_recaps_written_by_hand(client: TestClient, db: Path) -> None:
    recapped(client)
    client.patch(url(CHAT, "/messages/7"), json={"recap": "My own words."})
    client.post(url(CHAT, "/recap"))
    run_jobs(client)
    kept = client.get(url(CHAT, "/messages/7")).json()
    assert (kept["recap"], kept["edited"]) == ("My own words.", True)
    client.post(url(CHAT, "/recap"), params={"force": "true"})
    run_jobs(client)
    redone = client.get(url(CHAT, "/messages/7")).json()
    assert redone["recap"] not in (None, "My own words.")
    assert redone["edited"] is False
    client.close()
    with client_for(db) as again:
        assert again.get(url(CHAT, "/messages/7")).json()["recap"] == redone["recap"]


def test_recap_force_is_validated(client: TestClient) -> None:
    import_chat(client, sample_bytes())
    error_of(client.post(url(CHAT, "/recap"), params={"force": "perhaps"}), 422, "force")


# --- memory switches -----------------------------------------------------------------------------


def test_memory_switch_per_chat(client: TestClient, db: Path) -> None:
    recapped(client)
    assert client.get(url(CHAT, "/memory")).json() == {
        "enabled": True,
        "chat": None,
        "global": {"use_global_toggle_state": False, "global_toggle_state": True},
    }
    off = client.patch(url(CHAT, "/memory"), json={"chat": False}).json()
    assert (off["enabled"], off["chat"]) == (False, False)
    assert client.get(url(CHAT)).json()["enabled"] is False
    preview = client.get(url(CHAT, "/preview")).json()
    assert preview["enabled"] is False
    assert preview["injections"] == []
    client.close()
    with client_for(db) as again:
        assert again.get(url(CHAT, "/memory")).json()["chat"] is False
        assert again.get("/api/chats").json()["chats"][0]["enabled"] is False
        back = again.patch(url(CHAT, "/memory"), json={"chat": None}).json()
        assert (back["enabled"], back["chat"]) == (True, None)
        assert again.get(url(CHAT, "/preview")).json()["injections"]


def test_memory_switch_bodies_are_validated(client: TestClient) -> None:
    import_chat(client, sample_bytes())
    error_of(client.patch(url(CHAT, "/memory"), json={}), 422, "chat")
    error_of(client.patch(url(CHAT, "/memory"), json={"chat": "maybe"}), 422, "chat")
    error_of(client.patch(url(CHAT, "/memory"), json={"chat": True, "x": 1}), 422, "x")
    error_of(client.patch(url(CHAT, "/memory"), content=b"{not json"), 422)
    assert client.get(url(CHAT, "/memory")).json()["chat"] is None


# --- the prompt preview --------------------------------------------------------------------------


def test_preview_places_the_memory_and_leaves_hidden_messages_out(client: TestClient) -> None:
    recapped(client)
    preview = client.get(url(CHAT, "/preview")).json()
    assert preview["format"] == "messages"
    assert preview["enabled"] is True
    keys = [i["key"] for i in preview["injections"]]
    assert "auto_recap_memory_scene" in keys
    scene = next(i for i in preview["injections"] if i["key"] == "auto_recap_memory_scene")
    # the running recap, and what the newest message recalls (the tier is on by default), just
    # before the newest message
    recall = next(i for i in preview["injections"] if i["key"] == RECALL_KEY)
    injected = [m for m in preview["messages"] if m["injected"]]
    assert [m["content"] for m in injected] == [scene["text"].strip(), recall["text"].strip()]
    assert preview["messages"][-2]["content"] == recall["text"].strip()
    assert scene["role"] == "system"
    assert scene["position"] in ("in_prompt", "in_chat", "before_prompt")
    hidden = [m["index"] for m in _all_messages(client) if m["hidden"]]
    assert hidden
    assert preview["hidden"] == hidden
    tokens = preview["tokens"]
    assert tokens["total"] == tokens["injected"] + tokens["history"]
    assert tokens["context_size"] > 0
    history = [m for m in preview["messages"] if not m["injected"]]
    assert history[-1]["content"] == _all_messages(client)[-1]["text"]


def test_preview_marks_memory_placed_inside_the_history(client: TestClient) -> None:
    profiles = Profiles()
    profiles.set("message_recap_injection_enabled", True)
    profiles.set("message_recap_position", 1)  # in chat
    profiles.set("message_recap_depth", 4)
    import_chat(client, chat_bytes(40, with_recaps=True, hidden_rate=0.0))
    preview = client.get(url(CHAT, "/preview")).json()
    short = next(i for i in preview["injections"] if i["key"] == SHORT_KEY)
    assert (short["position"], short["depth"], short["role"]) == ("in_chat", 4, "system")
    messages = preview["messages"]
    assert [m["injected"] for m in messages[-5:]] == [True, False, False, False, False]
    assert messages[-5]["content"] == short["text"].strip()
    history = [m["content"] for m in messages if not m["injected"]]
    texts = [m["text"] for m in _all_messages(client) if not m["hidden"]]
    assert history == texts[len(texts) - len(history) :]


def test_a_message_is_pinned_and_unpinned(client: TestClient) -> None:
    recapped(client)
    pinned = client.patch(url(CHAT, "/messages/14"), json={"remember": True})
    assert pinned.status_code == 200
    assert pinned.json()["remember"] is True
    Profiles().set("long_term_enabled", True)
    preview = client.get(url(CHAT, "/preview")).json()
    long = next(i for i in preview["injections"] if i["key"] == "auto_recap_memory_long")
    assert pinned.json()["recap"] in long["text"]
    assert (
        client.patch(url(CHAT, "/messages/14"), json={"remember": False}).json()["remember"]
        is False
    )
    keys = [i["key"] for i in client.get(url(CHAT, "/preview")).json()["injections"]]
    assert "auto_recap_memory_long" not in keys
    error_of(client.patch(url(CHAT, "/messages/14"), json={"remember": "maybe"}), 422, "remember")


def test_the_combined_recap_is_made_by_the_jobs_listed_selected_and_injected(
    client: TestClient,
) -> None:
    Profiles().set("combined_recap_enabled", True)
    recapped(client)  # the running recap job merges the message recaps too
    made = client.get(url(CHAT, "/combined")).json()
    assert made["enabled"] is True
    assert len(made["versions"]) >= 1
    newest = made["versions"][0]
    assert made["selected"] == newest["version"]
    assert newest["message_count"] > 100
    preview = client.get(url(CHAT, "/preview")).json()
    placed = next(i for i in preview["injections"] if i["key"] == "auto_recap_memory_combined")
    assert newest["content"] in placed["text"]
    selected = client.patch(url(CHAT, "/combined"), json={"selected": newest["version"]})
    assert selected.status_code == 200
    error_of(client.patch(url(CHAT, "/combined"), json={"selected": 99}), 404, "selected")
    error_of(client.patch(url(CHAT, "/combined"), json={}), 422, "selected")


def test_preview_shows_what_a_question_recalls_and_why(client: TestClient) -> None:
    recapped(client)
    asked = "What did the violet lens from Mother Quillon cost?"
    preview = client.get(url(CHAT, "/preview"), params={"query": asked}).json()
    recall = preview["recall"]
    assert recall["enabled"] is True
    assert recall["query"] == asked
    pieces = recall["pieces"]
    assert pieces
    assert all(p["score"] > 0 for p in pieces)
    assert all(p["source"].startswith("scene ") for p in pieces)
    lens = next(p for p in pieces if "Nine crowns" in p["text"])
    assert lens["kind"] == "message"
    assert f"#{lens['index']}" in lens["source"]
    assert lens["index"] in preview["hidden"]  # recalled because it is not in the prompt
    placed = next(i for i in preview["injections"] if i["key"] == RECALL_KEY)
    assert (placed["position"], placed["depth"], placed["role"]) == ("in_chat", 1, "system")
    assert "Nine crowns" in placed["text"]
    injected = [m["content"] for m in preview["messages"] if m["injected"]]
    assert placed["text"].strip() in injected
    assert preview["messages"][-2]["content"] == placed["text"].strip()  # before the newest


def test_preview_without_a_query_recalls_only_with_the_tier_on(client: TestClient) -> None:
    recapped(client)
    Profiles().set("recall_enabled", False)
    off = client.get(url(CHAT, "/preview")).json()
    assert off["recall"]["pieces"] == []
    assert RECALL_KEY not in [i["key"] for i in off["injections"]]
    Profiles().set("recall_enabled", True)
    on = client.get(url(CHAT, "/preview")).json()
    assert on["recall"]["enabled"] is True
    assert on["recall"]["query"]  # the newest user message, and the reply before it
    keys = [i["key"] for i in on["injections"]]
    assert (RECALL_KEY in keys) == bool(on["recall"]["pieces"])
    for blank in ("", "  "):  # a query given blank is a mistake, not the default
        message = error_of(client.get(url(CHAT, "/preview"), params={"query": blank}), 422)
        assert "the query is empty" in message


def test_preview_follows_the_context_size(client: TestClient) -> None:
    recapped(client)
    wide = client.get(url(CHAT, "/preview"), params={"context_size": 100_000}).json()
    narrow = client.get(url(CHAT, "/preview"), params={"context_size": 2500}).json()
    assert narrow["tokens"]["context_size"] == 2500
    assert narrow["tokens"]["total"] <= 2500
    assert len(narrow["messages"]) < len(wide["messages"])
    assert narrow["dropped"]
    assert not wide["dropped"]
    error_of(client.get(url(CHAT, "/preview"), params={"context_size": 0}), 422, "context_size")


def test_preview_as_text(client: TestClient) -> None:
    recapped(client)
    preview = client.get(url(CHAT, "/preview"), params={"format": "text"}).json()
    assert "messages" not in preview
    assert preview["text"].endswith("Captain Mira Vale:")
    scene = next(i for i in preview["injections"] if i["key"] == "auto_recap_memory_scene")
    assert scene["text"].strip()[:200] in preview["text"]
    error_of(client.get(url(CHAT, "/preview"), params={"format": "xml"}), 422, "format")


def _all_messages(client: TestClient, chat: str = CHAT) -> list[dict[str, Any]]:
    messages: list[dict[str, Any]] = client.get(
        url(chat, "/messages"), params={"limit": 1000}
    ).json()["messages"]
    return messages


# --- errors and keys -----------------------------------------------------------------------------


def test_unknown_routes_and_methods_use_the_error_shape(client: TestClient) -> None:
    assert "/docs" in error_of(client.get("/api/nothing/here"), 404)
    assert "/docs" in error_of(client.put("/api/chats"), 405)


def test_keys_keep_chats_apart(db: Path, tmp_path: Path) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("alice: alice-key-123\nbob: bob-key-4567\n", encoding="utf-8")
    alice = {"Authorization": "Bearer alice-key-123"}
    bob = {"X-Api-Key": "bob-key-4567"}
    with client_for(db, keys_file=keys) as client:
        error_of(client.get("/api/chats"), 401)
        response = client.post(
            "/api/chats", params={"id": CHAT}, content=sample_bytes(), headers=alice
        )
        assert response.status_code == 201
        assert response.json()["chat"]["id"] == CHAT
        assert [c["id"] for c in client.get("/api/chats", headers=alice).json()["chats"]] == [CHAT]
        assert client.get("/api/chats", headers=bob).json() == {"chats": []}
        theirs = client.get(url(CHAT), headers=bob)
        unknown = client.get(url("never imported"), headers=bob)
        assert error_of(theirs, 404, "chat") == error_of(unknown, 404, "chat").replace(
            "never imported", CHAT
        )
        error_of(client.delete(url(CHAT), headers=bob), 404, "chat")
        error_of(client.get(url(CHAT, "/export"), headers=bob), 404, "chat")
        # bob may use the same id for a chat of his own
        mine = client.post("/api/chats", params={"id": CHAT}, content=chat_bytes(10), headers=bob)
        assert mine.status_code == 201
        assert client.get(url(CHAT), headers=alice).json()["messages"] == 199
        assert client.get(url(CHAT), headers=bob).json()["messages"] == 10
        exported = client.get(url(CHAT, "/export"), headers=alice)
        assert exported.content == sample_bytes()


def test_a_message_error_is_reported(client: TestClient) -> None:
    chat = generate_chat(20, seed=5)
    set_data(chat.messages[4], "error", "the LLM timed out")
    import_chat(client, serialize_chat(chat))
    message = client.get(url(CHAT, "/messages/4")).json()
    assert (message["status"], message["error"]) == ("error", "the LLM timed out")


def two_chats_with_waiting_jobs(client: TestClient) -> None:
    """The sample chat twice (CHAT and "other"), each with its pipeline queued, the queue
    paused so that the jobs wait."""
    import_chat(client, sample_bytes())
    import_chat(client, sample_bytes(), "other")
    assert client.post("/api/jobs/pause").status_code == 200
    for chat in (CHAT, "other"):
        assert client.post(url(chat, "/recap")).json()["jobs"] > 0


def test_retrying_a_chats_failed_jobs_leaves_other_chats_alone(client: TestClient) -> None:
    two_chats_with_waiting_jobs(client)
    for chat in (CHAT, "other"):
        assert client.post(url(chat, "/jobs/cancel")).json()["cancelled"] > 0
    # Cancelled jobs are not failed ones: nothing to retry yet.
    assert client.post(url(CHAT, "/jobs/retry")).json() == {"retried": 0}
    queue = client.app.state.registry.queue
    cancelled = queue.list(states=("cancelled",))
    ids = [j.id for j in cancelled]
    queue.store.run(
        lambda db: db.execute(
            f"UPDATE jobs SET state = 'failed', error = 'the LLM server answered 401' "
            f"WHERE id IN ({','.join('?' * len(ids))})",
            ids,
        )
    )
    answer = client.post(url(CHAT, "/jobs/retry")).json()
    assert answer["retried"] == sum(1 for j in cancelled if j.chat_id.endswith(CHAT))
    waiting = client.get("/api/jobs", params={"state": "queued"}).json()["jobs"]
    assert {job["chat"] for job in waiting} == {CHAT}
    failed = client.get("/api/jobs", params={"state": "failed"}).json()["jobs"]
    assert {job["chat"] for job in failed} == {"other"}
    error_of(client.post(url("nobody", "/jobs/retry")), 404, "chat")


def test_cancelling_a_chats_jobs_leaves_other_chats_alone(client: TestClient) -> None:
    two_chats_with_waiting_jobs(client)
    answer = client.post(url(CHAT, "/jobs/cancel")).json()
    assert answer["cancelled"] > 0
    waiting = client.get("/api/jobs", params={"state": "queued"}).json()["jobs"]
    assert waiting
    assert {job["chat"] for job in waiting} == {"other"}
    error_of(client.post(url("nobody", "/jobs/cancel")), 404, "chat")
