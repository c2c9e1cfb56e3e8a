"""Races and edge cases of the server found in review (each test failed before its fix): the
app in process (`TestClient`) or served by uvicorn on loopback with the scripted upstream."""

from __future__ import annotations

import logging
import socket
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from autorecap import sample_chat_path
from autorecap.core import scenes
from autorecap.core.model import Chat
from autorecap.server.app import ServerConfig, create_app
from autorecap.server.proxy.turns import ProxyChats
from autorecap.stfiles.jsonl import read_chat, serialize_chat
from autorecap.store.sqlite import SQLiteStore

from .conftest import StartProxy, Upstream

SAMPLE = sample_chat_path().read_bytes()
HEADER = b'{"user_name": "Tomas", "character_name": "Mira", "chat_metadata": {}}\n'
HELLO = {"model": "m", "messages": [{"role": "user", "content": "Hello there, captain."}]}
DEADLINE_S = 15.0


def wait_until(check: Callable[[], Any], what: str, timeout: float = DEADLINE_S) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


@pytest.fixture
def client(tmp_path: Path) -> Iterator[TestClient]:
    config = ServerConfig(upstream="http://127.0.0.1:9/v1", db=tmp_path / "x.db", worker=False)
    with TestClient(create_app(config), raise_server_exceptions=False) as client:
        yield client


def assert_error_shape(response: httpx.Response, status: int) -> None:
    assert response.status_code == status, response.text
    assert response.json()["error"]["code"] == status


def in_thread(work: Callable[[], Any]) -> tuple[threading.Thread, dict[str, Any]]:
    out: dict[str, Any] = {}

    def run() -> None:
        try:
            out["value"] = work()
        except Exception as error:  # the test asserts on it
            out["error"] = error

    thread = threading.Thread(target=run, daemon=True)
    thread.start()
    return thread, out


# --- error handling ------------------------------------------------------------------------------


def test_a_job_id_too_large_for_sqlite_is_a_404_not_a_500(client: TestClient) -> None:
    # Cause: api_admin._own_job -> JobQueue.get: sqlite3's OverflowError is not caught.
    for action in ("retry", "cancel"):
        response = client.post(f"/api/jobs/{10**23}/{action}")
        assert_error_shape(response, 404)


def test_an_empty_import_id_is_a_422_naming_the_field(client: TestClient) -> None:
    # Cause: api_chats._import calls Scope.internal("") (a 404 "cannot be empty") before its
    # own empty-id check; docs/API.md promises a 422 for an empty id.
    response = client.post("/api/chats?id=", content=SAMPLE)
    assert_error_shape(response, 422)
    assert response.json()["error"].get("field") == "id"


def test_a_lone_surrogate_in_a_chat_does_not_break_the_api(client: TestClient) -> None:
    # Cause: api_views.chat_summary/message_json hand FastAPI strings with lone surrogates
    # (valid JSON escapes, kept by the store); its JSON encoder refuses them: a 500, and one such
    # chat makes GET /api/chats fail for the whole key.
    named = HEADER + b'{"name": "Mira \\ud83d", "is_user": false, "mes": "Aboard."}\n'
    response = client.post("/api/chats?id=odd-name", content=named)
    assert response.status_code == 201, response.text
    assert client.get("/api/chats").status_code == 200
    text = HEADER + b'{"name": "Mira", "is_user": false, "mes": "Cut emoji \\ud83d"}\n'
    assert client.post("/api/chats?id=odd-text", content=text).status_code == 201
    assert client.get("/api/chats/odd-text/messages").status_code == 200


# --- concurrency ---------------------------------------------------------------------------------


def test_concurrent_memory_switches_of_different_chats_are_all_kept(
    tmp_path: Path, client: TestClient
) -> None:
    # Cause: Session.set_enabled -> Profiles.set_chat_enabled reads, changes and writes the
    # shared settings file with no lock (api_admin._changing's lock is not taken), and
    # Profiles.reload from other requests swaps its data meanwhile: lost updates, all 200s.
    count = 16
    registry: ProxyChats = client.app.state.registry  # type: ignore[attr-defined]
    for number in range(count):
        registry.store.import_chat(Chat(chat_id=f"c{number}"), chat_id=f"c{number}")
        assert client.get(f"/api/chats/c{number}").status_code == 200
    start = threading.Barrier(count)

    def switch_off(number: int) -> int:
        start.wait(5)
        return client.patch(f"/api/chats/c{number}/memory", json={"chat": False}).status_code

    threads = [in_thread(lambda n=n: switch_off(n)) for n in range(count)]
    for thread, _ in threads:
        thread.join(DEADLINE_S)
    assert [out.get("value") for _, out in threads] == [200] * count
    switches = client.get("/api/settings").json()["values"]["chats_enabled"]
    assert switches == {f"c{number}": False for number in range(count)}


def test_a_save_of_another_chat_does_not_take_the_new_message_ids(tmp_path: Path) -> None:
    # Cause: SQLiteStore.save resets the instance attribute `self._new_ids` before taking the
    # store's lock: a save of chat B starting while chat A's transaction is open empties A's
    # list, A's new message never gets its id, and A's next save inserts it a second time.
    store = SQLiteStore(tmp_path / "x.db")
    try:
        for name in ("a", "b"):
            store.import_chat(Chat(chat_id=name), chat_id=name)
        a, b = store.load_chat("a"), store.load_chat("b")
        a.append({"name": "Tomas", "is_user": True, "mes": "Message of chat a."})
        b.append({"name": "Tomas", "is_user": True, "mes": "Message of chat b."})
        inside = threading.Event()

        def slow_commit(db: Any) -> None:  # as JobQueue.finish, in the same transaction
            inside.set()
            time.sleep(0.3)

        first, _ = in_thread(lambda: store.save(a, structure=True, also=slow_commit))
        assert inside.wait(5)
        second, _ = in_thread(lambda: store.save(b, structure=True))
        first.join(5)
        second.join(5)
        assert a.messages[0].id is not None, "chat a's new message lost its store id"
        store.save(a, structure=True)
        assert [m.text for m in store.load_chat("a").messages] == ["Message of chat a."]
    finally:
        store.close()


def test_a_reply_is_not_recorded_into_a_chat_replaced_meanwhile(
    upstream: Upstream, start_proxy: StartProxy, http: httpx.Client
) -> None:
    # Cause: ProxyChats.record looks the chat up again by id: after an import with
    # replace=true (api_chats._import -> registry.drop) it loads the new chat and appends the
    # old conversation's reply to it.
    proxy = start_proxy()
    url = proxy.chat_url("x") + "/chat/completions"
    hold = upstream.hold(lambda request: True, reply="A reply to the old conversation.")
    thread, out = in_thread(lambda: http.post(url, json=HELLO))
    hold.first()
    replaced = http.post(proxy.origin + "/api/chats?id=x&replace=true", content=SAMPLE)
    assert replaced.status_code == 201, replaced.text
    hold.release()
    thread.join(DEADLINE_S)
    assert out["value"].status_code == 200
    assert proxy.stored("x").messages[-1].text != "A reply to the old conversation."
    assert len(proxy.stored("x").messages) == len(read_chat(sample_chat_path()).messages)


@pytest.mark.parametrize("stream", [False, True], ids=["json", "stream"])
def test_deleting_a_chat_during_a_request_still_relays_the_reply(
    upstream: Upstream, start_proxy: StartProxy, http: httpx.Client, stream: bool
) -> None:
    # Cause: app.answer's done() calls ProxyChats.record, which raises UnknownChatError for the
    # deleted chat: the JSON answer becomes a 404 naming CLI commands, the stream is cut off.
    proxy = start_proxy()
    url = proxy.chat_url("gone") + "/chat/completions"
    if stream:
        upstream.stream(["Fair ", "winds."], delay=0.5)

        def ask() -> Any:
            with http.stream("POST", url, json={**HELLO, "stream": True}) as response:
                return response.status_code, b"".join(response.iter_raw())

        thread, out = in_thread(ask)
        assert upstream.stream_started.wait(5)
    else:
        hold = upstream.hold(lambda request: True, reply="Fair winds.")
        thread, out = in_thread(lambda: http.post(url, json=HELLO))
        hold.first()
    assert http.delete(proxy.origin + "/api/chats/gone").status_code == 204
    if not stream:
        hold.release()
    thread.join(DEADLINE_S)
    assert "error" not in out, out.get("error")
    if stream:
        status, body = out["value"]
        assert status == 200
        assert b"[DONE]" in body
    else:
        assert out["value"].status_code == 200, out["value"].text
        assert "Fair winds." in out["value"].text


def test_a_reply_never_blocks_the_event_loop_on_a_busy_chat_lock(
    upstream: Upstream, start_proxy: StartProxy, http: httpx.Client
) -> None:
    # Cause: app.answer's done() runs ProxyChats.record on the event loop, which waits for the
    # chat's lock (held by a recap job or an API call): every other request, of every key,
    # waits with it.
    proxy = start_proxy()
    registry: ProxyChats = proxy.server.config.app.state.registry
    hold = upstream.hold(lambda request: True, reply="Late reply.")
    url = proxy.chat_url("busy") + "/chat/completions"
    thread, _ = in_thread(lambda: http.post(url, json=HELLO))
    hold.first()
    lock = registry.chat_lock("busy")
    lock.acquire()  # what an offline recap job of this chat holds while it works
    try:
        hold.release()
        hold.held[0].answered.wait(5)
        time.sleep(0.3)  # the reply reaches the proxy, which records it
        try:
            other = httpx.get(proxy.url + "/models", timeout=2)
        except httpx.TimeoutException:
            other = None
    finally:
        lock.release()
    thread.join(DEADLINE_S)
    assert other is not None, "GET /v1/models waited for another chat's lock"
    assert other.status_code == 200


def test_the_chat_id_the_proxy_reports_names_the_same_chat_when_sent_back(
    upstream: Upstream, start_proxy: StartProxy, http: httpx.Client
) -> None:
    # Cause: app.answer percent-encodes the X-Autorecap-Chat it answers with, but app._header_text
    # does not decode a percent-encoded X-Autorecap-Chat: echoing it back makes a second chat.
    proxy = start_proxy()
    url = proxy.url + "/chat/completions"
    first = http.post(url, json=HELLO, headers={"X-Autorecap-Chat": "Мира".encode()})
    reported = first.headers["x-autorecap-chat"]
    history = [*HELLO["messages"], {"role": "assistant", "content": "Reply 1."}]
    turn = {"model": "m", "messages": [*history, {"role": "user", "content": "And now?"}]}
    assert http.post(url, json=turn, headers={"X-Autorecap-Chat": reported}).status_code == 200
    assert proxy.chat_ids() == ["Мира"]


# --- the recap worker ----------------------------------------------------------------------------

IS_MESSAGE_RECAP = "Write the note for"
IS_RUNNING_RECAP = "running memory"


ONE_PER_CALL = {"llm_batch_tokens": 0, "llm_own_recap_tokens": 0}
"""One message per recap call, so that a held call is one message's."""
MUST_CONDENSE = {"running_scene_recap_max_tokens": 50}
"""With `long_recap`s, the running recap needs an LLM call (a line that fits is appended)."""


def long_recap(text: str) -> str:
    return text + " " + " ".join(f"Crate {n} was stowed below." for n in range(12))


def asking(fragment: str) -> Callable[[Any], bool]:
    return lambda request: any(fragment in content for content in request.contents)


def jobs(http: httpx.Client, origin: str, state: str = "") -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = http.get(origin + "/api/jobs" + state).json()["jobs"]
    return found


def test_cancelling_a_running_job_cancels_it(
    upstream: Upstream, start_proxy: StartProxy, http: httpx.Client
) -> None:
    # Cause: jobs/runner.py never calls JobQueue.cancel_requested: a running job told to cancel
    # ("cancelling") runs on, stores its recap and ends "done".
    proxy = start_proxy(worker=True, recap_backend="upstream")
    assert http.patch(proxy.origin + "/api/settings", json=ONE_PER_CALL).status_code == 200
    hold = upstream.hold(asking(IS_MESSAGE_RECAP), reply="A recap nobody wants any more.")
    turn = {"model": "m", "messages": [{"role": "user", "content": "Mira hides the ledger."}]}
    assert http.post(proxy.chat_url("x") + "/chat/completions", json=turn).status_code == 200
    hold.first()
    running = wait_until(lambda: jobs(http, proxy.origin, "?state=running"), "a running job")
    cancelled = http.post(proxy.origin + f"/api/jobs/{running[0]['id']}/cancel")
    assert cancelled.json()["result"] == "cancelling"
    hold.release()
    wait_until(lambda: not jobs(http, proxy.origin, "?state=running"), "the job to stop")
    job = next(j for j in jobs(http, proxy.origin) if j["id"] == running[0]["id"])
    assert job["state"] == "cancelled"
    message = http.get(proxy.origin + "/api/chats/x/messages/0").json()
    assert message["recap"] != "A recap nobody wants any more."


def test_a_replaced_chat_does_not_get_the_old_chats_running_recap(
    upstream: Upstream, start_proxy: StartProxy, http: httpx.Client
) -> None:
    # Cause: runner._on_chat merges the snapshot into `worker.chat(job.chat_id)`, looked up again
    # by id: after a replace that is the new chat (Snapshot.merge never checks), and the job,
    # cancelled by the replace, is not stopped (see above).
    chat = read_chat(sample_chat_path())
    for end in (9, 19):
        scenes.mark_break(chat.messages[end], f"Scene ending at {end}")
        scenes.add_recap_version(
            chat.messages[end], long_recap(f"Old scene {end}."), scene_hash="x"
        )
    proxy = start_proxy(worker=True, recap_backend="upstream")
    settings = {"running_scene_recap_exclude_latest": 0, **MUST_CONDENSE}
    assert http.patch(proxy.origin + "/api/settings", json=settings).status_code == 200
    hold = upstream.hold(asking(IS_RUNNING_RECAP), reply="OLD RUNNING RECAP")
    imported = http.post(proxy.origin + "/api/chats?id=x", content=serialize_chat(chat))
    assert imported.status_code == 201
    assert http.post(proxy.origin + "/api/chats/x/scenes/19/regenerate").status_code == 200
    hold.first()
    replaced = http.post(proxy.origin + "/api/chats?id=x&replace=true", content=SAMPLE)
    assert replaced.status_code == 201
    hold.release()
    wait_until(lambda: not jobs(http, proxy.origin, "?state=queued,running"), "the jobs to end")
    assert http.get(proxy.origin + "/api/chats/x/running").json()["versions"] == []


def test_the_upstream_recap_backend_uses_the_owners_running_recap_prompt(
    upstream: Upstream, start_proxy: StartProxy, http: httpx.Client
) -> None:
    # Cause: app.create_app's backend_for passes only message_recap_prompt (and the model) to
    # OpenAICompatBackend: the scene, running and scene-break prompts, the prefill, temperature,
    # max tokens, timeout and retries a key sets are ignored with --recap-backend upstream.
    chat = read_chat(sample_chat_path())
    scenes.mark_break(chat.messages[9], "The Rusted Anchor")
    scenes.add_recap_version(chat.messages[9], long_recap("Mira hires Tomas."), scene_hash="x")
    proxy = start_proxy(worker=True, recap_backend="upstream")
    prompt = "OWNER RUNNING PROMPT.\n{{previous}}\n{{scene}}"
    settings = {
        "running_recap_prompt": prompt,
        "running_scene_recap_exclude_latest": 0,
        **MUST_CONDENSE,
    }
    assert http.patch(proxy.origin + "/api/settings", json=settings).status_code == 200
    scene_hold = upstream.hold(asking("Recap the scene"), reply=long_recap("Mira hires Tomas."))
    imported = http.post(proxy.origin + "/api/chats?id=x", content=serialize_chat(chat))
    assert imported.status_code == 201
    assert http.post(proxy.origin + "/api/chats/x/scenes/9/regenerate").status_code == 200
    scene_hold.first()
    scene_hold.release()
    wait_until(
        lambda: http.get(proxy.origin + "/api/chats/x/running").json()["versions"],
        "a running recap",
    )
    sent = [" ".join(request.contents) for request in upstream.chat_requests]
    assert any("OWNER RUNNING PROMPT." in text for text in sent)


def test_a_deleted_chats_switch_and_binding_do_not_pass_to_a_new_chat_of_that_id(
    client: TestClient,
) -> None:
    data = sample_chat_path().read_bytes()
    assert client.post("/api/chats?id=again", content=data).status_code == 201
    assert client.patch("/api/chats/again/memory", json={"chat": False}).status_code == 200
    assert client.post("/api/profiles", json={"name": "Terse"}).status_code == 201
    bound = client.put("/api/profiles/Terse/bindings", json={"chat": "again"})
    assert bound.status_code == 200
    assert client.delete("/api/chats/again").status_code == 204
    assert client.post("/api/chats?id=again", content=data).status_code == 201
    assert client.get("/api/chats/again/memory").json()["chat"] is None
    assert "again" not in client.get("/api/settings").json()["bindings"]["chat"]


def test_an_unreachable_upstream_is_named_without_its_credentials(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    """Neither a user:password nor a query string (a key may be in either) is shown."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    upstream = f"http://agent:hunter2-secret@127.0.0.1:{port}/v1?key=sk-query-secret"
    app = create_app(ServerConfig(upstream=upstream, db=tmp_path / "x.db", worker=False))
    with TestClient(app) as client, caplog.at_level(logging.INFO):
        body = {"model": "m", "messages": [{"role": "user", "content": "Hello?"}]}
        answer = client.post("/v1/chat/completions", json=body)
        assert answer.status_code == 502
        assert f"127.0.0.1:{port}" in answer.json()["error"]["message"]
    for secret in ("hunter2-secret", "sk-query-secret"):
        assert secret not in answer.text
        assert secret not in caplog.text


def test_upstream_recaps_ask_for_the_clients_model_with_the_clients_key(
    upstream: Upstream, start_proxy: StartProxy, http: httpx.Client
) -> None:
    # With no --api-key-env and no llm_model, a recap asked of the upstream named no model
    # and carried no key: OpenAI and its like refuse every one (found by a newcomer test).
    proxy = start_proxy(worker=True, recap_backend="upstream")
    hidden = (  # long enough to be recapped by the upstream, not its own recap
        "Mira hides the ledger under the loose floorboard in the galley, then tells Tomas "
        "that the harbourmaster's clerk must never learn where it went."
    )
    turn = {"model": "m-7", "messages": [{"role": "user", "content": hidden}]}
    sent = http.post(
        proxy.chat_url("x") + "/chat/completions",
        json=turn,
        headers={"Authorization": "Bearer sk-client-42"},
    )
    assert sent.status_code == 200
    recap = wait_until(
        lambda: next((r for r in upstream.chat_requests if asking(IS_MESSAGE_RECAP)(r)), None),
        "a message recap asked of the upstream",
    )
    assert recap.json["model"] == "m-7"
    assert recap.headers["authorization"] == "Bearer sk-client-42"
    wait_until(lambda: not jobs(http, proxy.origin, "?state=queued,running"), "the jobs to end")
    assert b"sk-client-42" not in Path(proxy.db).read_bytes()
