"""The REST API's settings, profiles, global memory switch and job routes (docs/API.md), in
process: `TestClient(create_app(...))` on a temp database and the test's own AUTORECAP_HOME."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi.testclient import TestClient

from autorecap import sample_chat_path
from autorecap.jobs.queue import JobQueue
from autorecap.profiles import Profiles
from autorecap.server.app import ServerConfig, create_app
from autorecap.server.proxy.turns import ProxyChats
from autorecap.settings import SETTING_NAMES, Settings
from autorecap.stfiles.jsonl import read_chat
from autorecap.store.sqlite import SQLiteStore

NOWHERE = "http://127.0.0.1:9/v1"  # the admin routes never call the upstream
KEYS = {"alice": "alice-key-0123456789", "bob": "bob-key-0123456789"}

Start = Callable[..., TestClient]


@pytest.fixture
def db(tmp_path: Path) -> Path:
    """A database holding the sample chat as `mira` (and as `alice/mira` for keyed tests)."""
    path = tmp_path / "x.db"
    store = SQLiteStore(path)
    try:
        store.import_chat(read_chat(sample_chat_path()), chat_id="mira")
        store.import_chat(read_chat(sample_chat_path()), chat_id="alice/mira")
    finally:
        store.close()
    return path


@pytest.fixture
def start(tmp_path: Path, db: Path) -> Iterator[Start]:
    """`start(keys=False)`: a fresh app on the same database and settings files."""
    with ExitStack() as stack:

        def make(*, keys: bool = False) -> TestClient:
            keys_file = None
            if keys:
                keys_file = tmp_path / "keys.txt"
                keys_file.write_text("".join(f"{n}: {k}\n" for n, k in KEYS.items()))
            config = ServerConfig(upstream=NOWHERE, db=db, worker=False, keys_file=keys_file)
            return stack.enter_context(TestClient(create_app(config)))

        yield make


@pytest.fixture
def client(start: Start) -> TestClient:
    return start()


def registry_of(client: TestClient) -> ProxyChats:
    registry: ProxyChats = client.app.state.registry  # type: ignore[attr-defined]
    return registry


def queue_of(client: TestClient) -> JobQueue:
    return registry_of(client).queue


def ok(response: httpx.Response, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def error_of(response: httpx.Response, status: int, field: str | None = None) -> str:
    """The message of an error in the one error shape (docs/API.md, Errors)."""
    assert response.status_code == status, response.text
    body = response.json()
    assert list(body) == ["error"]
    error = body["error"]
    assert error["type"] == "autorecap_error"
    assert error["code"] == status
    assert error.get("field") == field
    assert error["message"]
    return str(error["message"])


def as_alice() -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS['alice']}"}


# --- GET /api/settings -------------------------------------------------------------------------


def test_settings_show_every_value_the_schema_and_the_profiles(client: TestClient) -> None:
    body = ok(client.get("/api/settings"))
    assert body["profile"] == "Default"
    assert body["values"] == Settings().model_dump(mode="json")
    assert set(body["values"]) == set(SETTING_NAMES)
    assert set(body["schema"]["properties"]) == set(SETTING_NAMES)
    assert body["profiles"] == ["Default"]
    assert body["active_profile"] == "Default"
    assert body["bindings"] == {"chat": {}, "character": {}}
    assert "chats_enabled" in body["global_keys"]


def test_settings_of_a_chat_follow_its_bound_profile(client: TestClient) -> None:
    ok(client.post("/api/profiles", json={"name": "Terse"}), 201)
    ok(client.patch("/api/settings?profile=Terse", json={"scene_recap_max_tokens": 80}))
    ok(client.put("/api/profiles/Terse/bindings", json={"chat": "mira"}))
    body = ok(client.get("/api/settings", params={"chat": "mira"}))
    assert body["chat"] == "mira"
    assert body["profile"] == "Terse"
    assert body["values"]["scene_recap_max_tokens"] == 80
    # Without the chat, the active profile, which Terse did not change.
    assert ok(client.get("/api/settings"))["values"]["scene_recap_max_tokens"] == 250


def test_settings_of_an_unknown_chat_or_profile_are_404(client: TestClient) -> None:
    message = error_of(client.get("/api/settings", params={"chat": "nope"}), 404, "chat")
    assert "no chat 'nope'" in message
    message = error_of(client.get("/api/settings", params={"profile": "Nope"}), 404)
    assert "no profile named 'Nope'" in message
    assert "Default" in message


# --- PATCH /api/settings -----------------------------------------------------------------------


def test_a_settings_patch_is_saved_and_open_sessions_use_it(
    client: TestClient, start: Start
) -> None:
    registry = registry_of(client)
    ok(client.get("/api/settings", params={"chat": "mira"}))  # opens the chat's session
    session = registry.session("mira")
    assert session.settings.context_size == 8192
    body = ok(
        client.patch(
            "/api/settings",
            json={"context_size": 4096, "message_recap_context_type": "absolute"},
        )
    )
    assert body["profile"] == "Default"
    assert body["values"]["context_size"] == 4096
    assert body["values"]["message_recap_context_type"] == "absolute"
    # The open session reads the change at once: the next request or recap uses it.
    assert session.settings.context_size == 4096
    assert session.settings.message_recap_context_type == "absolute"
    # A later GET, the settings file (what the CLI reads) and a fresh app agree.
    assert ok(client.get("/api/settings"))["values"]["context_size"] == 4096
    assert Profiles().get("context_size") == 4096
    fresh = start()
    assert ok(fresh.get("/api/settings"))["values"]["context_size"] == 4096


def test_a_settings_patch_with_one_bad_value_saves_nothing(client: TestClient) -> None:
    response = client.patch(
        "/api/settings", json={"context_size": 4096, "tokenizer": "gpt2", "llm_retries": 1}
    )
    message = error_of(response, 422, "tokenizer")
    assert "one of: cl100k, o200k, llama3, qwen3, bytes" in message
    assert "'gpt2'" in message
    values = ok(client.get("/api/settings"))["values"]
    assert values["context_size"] == 8192
    assert values["llm_retries"] == 3
    assert not Profiles().path.exists() or Profiles().profile_values("Default") == {}


@pytest.mark.parametrize(
    ("values", "field", "words"),
    [
        ({"context_sise": 4096}, "context_sise", "did you mean 'context_size'"),
        ({"context_size": 10}, "context_size", "a whole number from 256 to 10000000"),
        ({"context_size": "4096"}, "context_size", "a whole number"),
        ({"include_user_messages": "yes"}, "include_user_messages", "true or false"),
        ({"running_scene_recap_position": 7}, "running_scene_recap_position", "one of: -1, 0"),
        ({"chats_enabled": ["mira"]}, "chats_enabled", "a JSON object"),
    ],
)
def test_a_bad_setting_names_itself_and_what_it_accepts(
    client: TestClient, values: dict[str, Any], field: str, words: str
) -> None:
    assert words in error_of(client.patch("/api/settings", json=values), 422, field)
    assert ok(client.get("/api/settings"))["values"] == Settings().model_dump(mode="json")


def test_a_settings_patch_that_is_not_an_object_is_refused(client: TestClient) -> None:
    error_of(client.patch("/api/settings", json=["context_size"]), 422)
    response = client.patch(
        "/api/settings", content=b"{not json", headers={"Content-Type": "application/json"}
    )
    assert response.status_code in (400, 422)
    error_of(response, response.status_code)


def test_a_settings_patch_of_another_profile_leaves_the_active_one(client: TestClient) -> None:
    ok(client.post("/api/profiles", json={"name": "Long"}), 201)
    body = ok(client.patch("/api/settings?profile=Long", json={"context_size": 32768}))
    assert body["profile"] == "Long"
    assert body["values"]["context_size"] == 32768
    assert ok(client.get("/api/settings"))["values"]["context_size"] == 8192
    long = ok(client.get("/api/settings", params={"profile": "Long"}))
    assert long["values"]["context_size"] == 32768
    error_of(client.patch("/api/settings?profile=Nope", json={"context_size": 512}), 404)


def test_a_global_setting_is_the_same_in_every_profile(client: TestClient) -> None:
    ok(client.post("/api/profiles", json={"name": "Other"}), 201)
    ok(client.patch("/api/settings?profile=Other", json={"chats_enabled": {"mira": False}}))
    assert ok(client.get("/api/settings"))["values"]["chats_enabled"] == {"mira": False}
    assert registry_of(client).session("mira").enabled is False


# --- DELETE /api/settings/{key} ----------------------------------------------------------------


def test_a_reset_puts_one_setting_back_to_its_default(client: TestClient, start: Start) -> None:
    ok(client.patch("/api/settings", json={"context_size": 4096, "llm_retries": 1}))
    body = ok(client.delete("/api/settings/context_size"))
    assert body["values"]["context_size"] == 8192
    assert body["values"]["llm_retries"] == 1
    assert ok(start().get("/api/settings"))["values"]["context_size"] == 8192


def test_a_reset_of_an_unknown_setting_or_profile_is_refused(client: TestClient) -> None:
    assert "unknown setting" in error_of(client.delete("/api/settings/nope"), 422, "nope")
    error_of(client.delete("/api/settings/context_size?profile=Nope"), 404)


# --- profiles ----------------------------------------------------------------------------------


def test_profiles_are_saved_loaded_and_deleted(client: TestClient, start: Start) -> None:
    ok(client.patch("/api/settings", json={"llm_retries": 7}))
    body = ok(client.post("/api/profiles", json={"name": "Careful"}), 201)
    assert body["profiles"] == ["Default", "Careful"]
    assert body["active_profile"] == "Default"
    # A copy of the active profile.
    careful = ok(client.get("/api/settings", params={"profile": "Careful"}))
    assert careful["values"]["llm_retries"] == 7
    ok(client.patch("/api/settings?profile=Careful", json={"llm_retries": 9}))
    # Loading it makes it the active one, and open sessions switch to it.
    ok(client.get("/api/settings", params={"chat": "mira"}))
    session = registry_of(client).session("mira")
    assert ok(client.post("/api/profiles/Careful/load"))["active_profile"] == "Careful"
    assert session.settings.llm_retries == 9
    assert ok(start().get("/api/settings"))["active_profile"] == "Careful"
    # Deleting the active profile falls back to Default.
    body = ok(client.delete("/api/profiles/Careful"))
    assert body["profiles"] == ["Default"]
    assert body["active_profile"] == "Default"
    assert session.settings.llm_retries == 7


def test_a_profile_from_a_source(client: TestClient) -> None:
    ok(client.post("/api/profiles", json={"name": "A"}), 201)
    ok(client.patch("/api/settings?profile=A", json={"context_size": 2048}))
    ok(client.post("/api/profiles", json={"name": "B", "source": "A"}), 201)
    b = ok(client.get("/api/settings", params={"profile": "B"}))
    assert b["values"]["context_size"] == 2048


def test_profile_errors(client: TestClient) -> None:
    error_of(client.post("/api/profiles", json={"name": "X", "source": "Nope"}), 404)
    blank = client.post("/api/profiles", json={"name": "  "})
    assert "profile name" in error_of(blank, 422, "name")
    error_of(client.post("/api/profiles", json={}), 422, "name")
    error_of(client.post("/api/profiles", json={"name": "X", "colour": "red"}), 422, "colour")
    error_of(client.post("/api/profiles/Nope/load"), 404)
    error_of(client.delete("/api/profiles/Nope"), 404)
    assert "fallback" in error_of(client.delete("/api/profiles/Default"), 409)
    assert ok(client.get("/api/settings"))["profiles"] == ["Default"]


def test_bindings(client: TestClient, start: Start) -> None:
    ok(client.post("/api/profiles", json={"name": "Terse"}), 201)
    ok(client.patch("/api/settings?profile=Terse", json={"message_recap_max_tokens": 20}))
    ok(client.get("/api/settings", params={"chat": "mira"}))
    session = registry_of(client).session("mira")
    assert session.settings.message_recap_max_tokens == 80
    character = session.character_key
    assert character
    body = ok(
        client.put("/api/profiles/Terse/bindings", json={"chat": "mira", "character": character})
    )
    assert body["bindings"] == {"chat": {"mira": "Terse"}, "character": {character: "Terse"}}
    assert session.settings.message_recap_max_tokens == 20
    assert ok(start().get("/api/settings"))["bindings"]["chat"] == {"mira": "Terse"}
    # Unbinding from another profile leaves the binding alone.
    ok(client.post("/api/profiles", json={"name": "Other"}), 201)
    body = ok(client.request("DELETE", "/api/profiles/Other/bindings", json={"chat": "mira"}))
    assert body["bindings"]["chat"] == {"mira": "Terse"}
    body = ok(client.request("DELETE", "/api/profiles/Terse/bindings", json={"chat": "mira"}))
    assert body["bindings"] == {"chat": {}, "character": {character: "Terse"}}
    assert session.settings.message_recap_max_tokens == 20  # still bound by its character
    body = ok(
        client.request("DELETE", "/api/profiles/Terse/bindings", json={"character": character})
    )
    assert body["bindings"] == {"chat": {}, "character": {}}
    assert session.settings.message_recap_max_tokens == 80


def test_binding_errors(client: TestClient) -> None:
    error_of(client.put("/api/profiles/Nope/bindings", json={"chat": "mira"}), 404)
    error_of(client.request("DELETE", "/api/profiles/Nope/bindings", json={"chat": "mira"}), 404)
    error_of(client.put("/api/profiles/Default/bindings", json={}), 422, "chat")
    error_of(client.put("/api/profiles/Default/bindings", json={"chat": 3}), 422, "chat")


# --- PATCH /api/memory -------------------------------------------------------------------------


def test_the_global_switch_turns_memory_off_everywhere(client: TestClient, start: Start) -> None:
    ok(client.get("/api/settings", params={"chat": "mira"}))
    session = registry_of(client).session("mira")
    assert session.enabled is True
    body = ok(
        client.patch(
            "/api/memory", json={"use_global_toggle_state": True, "global_toggle_state": False}
        )
    )
    assert body == {"global": {"use_global_toggle_state": True, "global_toggle_state": False}}
    assert session.enabled is False
    values = ok(start().get("/api/settings"))["values"]
    assert values["use_global_toggle_state"] is True
    assert values["global_toggle_state"] is False
    # One key at a time; back to each chat's own switch.
    body = ok(client.patch("/api/memory", json={"use_global_toggle_state": False}))
    assert body == {"global": {"use_global_toggle_state": False, "global_toggle_state": False}}
    assert session.enabled is True


def test_the_global_switch_takes_booleans_only(client: TestClient) -> None:
    error_of(client.patch("/api/memory", json={"global_toggle_state": "off"}), 422,
             "global_toggle_state")  # fmt: skip
    error_of(client.patch("/api/memory", json={"chat": False}), 422, "chat")
    assert ok(client.get("/api/settings"))["values"]["global_toggle_state"] is True


# --- jobs --------------------------------------------------------------------------------------


def message_ids(client: TestClient, chat_id: str) -> list[int]:
    chat = registry_of(client).store.load_chat(chat_id)
    return [m.id for m in chat.messages if m.id is not None]


@pytest.fixture
def jobs(client: TestClient) -> dict[str, int]:
    """A failed, a done, a queued job of `mira`, and a queued job of another chat."""
    queue = queue_of(client)
    ids = message_ids(client, "mira")
    failed = queue.enqueue("message_recap", "mira", ids[3], priority=9, max_retries=0)
    claimed = queue.claim()
    assert claimed is not None
    assert claimed.id == failed
    queue.fail(claimed, "the LLM server answered 500")
    done = queue.enqueue("message_recap", "mira", ids[4], priority=8)
    claimed = queue.claim()
    assert claimed is not None
    queue.complete(claimed)
    queued = queue.enqueue("running_recap", "mira")
    other = queue.enqueue("detect_scenes", "elsewhere")
    return {"failed": failed, "done": done, "queued": queued, "other": other}


def test_the_job_list_newest_first_with_counts(client: TestClient, jobs: dict[str, int]) -> None:
    body = ok(client.get("/api/jobs"))
    assert [job["id"] for job in body["jobs"]] == sorted(jobs.values(), reverse=True)
    assert body["counts"] == {"queued": 2, "running": 0, "done": 1, "failed": 1, "cancelled": 0}
    assert body["paused"] is False
    failed = next(job for job in body["jobs"] if job["id"] == jobs["failed"])
    assert failed["kind"] == "message_recap"
    assert failed["chat"] == "mira"
    assert failed["target_index"] == 3
    assert failed["state"] == "failed"
    assert failed["attempts"] == 1
    assert failed["error"] == "the LLM server answered 500"
    for key in ("progress", "note", "created_at", "updated_at"):
        assert key in failed
    running = next(job for job in body["jobs"] if job["id"] == jobs["queued"])
    assert running["target_index"] is None


def test_the_job_list_filters(client: TestClient, jobs: dict[str, int]) -> None:
    mine = ok(client.get("/api/jobs", params={"chat": "mira"}))
    assert {job["id"] for job in mine["jobs"]} == {jobs["failed"], jobs["done"], jobs["queued"]}
    assert mine["counts"]["queued"] == 1
    some = ok(client.get("/api/jobs", params={"state": "failed,done"}))
    assert {job["id"] for job in some["jobs"]} == {jobs["failed"], jobs["done"]}
    both = ok(client.get("/api/jobs", params={"chat": "mira", "state": "queued"}))
    assert [job["id"] for job in both["jobs"]] == [jobs["queued"]]
    assert ok(client.get("/api/jobs", params={"chat": "nope"}))["jobs"] == []
    assert "unknown job state 'stuck'" in error_of(
        client.get("/api/jobs", params={"state": "queued,stuck"}), 422, "state"
    )


def test_the_job_list_shows_at_most_500(client: TestClient) -> None:
    queue = queue_of(client)
    for target in range(510):
        queue.enqueue("message_recap", "mira", 100_000 + target)
    body = ok(client.get("/api/jobs"))
    assert len(body["jobs"]) == 500
    assert body["counts"]["queued"] == 510


def test_retry_and_cancel(client: TestClient, start: Start, jobs: dict[str, int]) -> None:
    body = ok(client.post(f"/api/jobs/{jobs['failed']}/retry"))
    assert body["job"]["id"] == jobs["failed"]
    assert body["job"]["state"] == "queued"
    assert body["job"]["attempts"] == 0
    assert body["job"]["error"] is None
    body = ok(client.post(f"/api/jobs/{jobs['queued']}/cancel"))
    assert body["result"] == "cancelled"
    assert body["job"]["state"] == "cancelled"
    # A cancelled job can be retried too.
    assert ok(client.post(f"/api/jobs/{jobs['queued']}/retry"))["job"]["state"] == "queued"
    # A running job is cancelled when it next checks.
    claimed = queue_of(client).claim()
    assert claimed is not None
    body = ok(client.post(f"/api/jobs/{claimed.id}/cancel"))
    assert body["result"] == "cancelling"
    assert queue_of(client).cancel_requested(claimed)
    states = {job["id"]: job["state"] for job in ok(start().get("/api/jobs"))["jobs"]}
    assert states[jobs["failed"]] in ("queued", "running")
    assert states[jobs["done"]] == "done"


def test_retry_and_cancel_errors(client: TestClient, jobs: dict[str, int]) -> None:
    assert "only failed or cancelled" in error_of(
        client.post(f"/api/jobs/{jobs['done']}/retry"), 409
    )
    assert "already done" in error_of(client.post(f"/api/jobs/{jobs['done']}/cancel"), 409)
    error_of(client.post("/api/jobs/999999/retry"), 404)
    error_of(client.post("/api/jobs/999999/cancel"), 404)
    error_of(client.post("/api/jobs/abc/retry"), 422, "job_id")


def test_pause_and_resume(client: TestClient, start: Start, jobs: dict[str, int]) -> None:
    assert ok(client.post("/api/jobs/pause")) == {"paused": True}
    assert ok(client.get("/api/jobs"))["paused"] is True
    assert queue_of(client).claim() is None
    assert ok(start().get("/api/jobs"))["paused"] is True
    assert ok(client.post("/api/jobs/resume")) == {"paused": False}
    assert queue_of(client).claim() is not None


# --- with API keys -----------------------------------------------------------------------------


def test_with_keys_no_key_pauses_the_whole_queue(start: Start) -> None:
    client = start(keys=True)
    assert "every key" in error_of(client.post("/api/jobs/pause", headers=as_alice()), 403)
    error_of(client.post("/api/jobs/resume", headers=as_alice()), 403)
    assert ok(client.get("/api/jobs", headers=as_alice()))["paused"] is False


def test_with_keys_settings_are_the_owners_and_chat_ids_are_theirs(
    start: Start, home: Path
) -> None:
    client = start(keys=True)
    ok(client.get("/api/settings", params={"chat": "mira"}, headers=as_alice()))
    session = registry_of(client).session("alice/mira")
    body = ok(
        client.patch("/api/settings", json={"chats_enabled": {"mira": False}}, headers=as_alice())
    )
    assert body["values"]["chats_enabled"] == {"mira": False}
    assert session.enabled is False
    stored = json.loads((home / "users" / "alice" / "settings.json").read_text())
    assert stored["global"]["chats_enabled"] == {"alice/mira": False}
    # The installation's own settings (what the keyless server and the CLI use) did not change.
    assert Profiles().get("chats_enabled") == {}
    ok(client.put("/api/profiles/Default/bindings", json={"chat": "mira"}, headers=as_alice()))
    bindings = ok(client.get("/api/settings", headers=as_alice()))["bindings"]
    assert bindings["chat"] == {"mira": "Default"}
    message = error_of(
        client.patch(
            "/api/settings", json={"chats_enabled": {"bob/mira": False}}, headers=as_alice()
        ),
        422,
        "chats_enabled",
    )
    assert "no '/'" in message
