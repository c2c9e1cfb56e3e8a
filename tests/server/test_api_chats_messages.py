"""The REST API's messages: pages, one message, recap edits, exclusion, regeneration."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from autorecap.core.data import INCLUDED, get_data, set_data
from autorecap.core.model import Message
from autorecap.core.slots import SHORT_KEY
from autorecap.profiles import Profiles
from autorecap.server.api import chats as api_chats
from autorecap.server.api.views import SceneNames
from autorecap.stfiles.jsonl import serialize_chat
from autorecap.testing import generate_chat

from .test_api_chats import (
    CHAT,
    chat_bytes,
    client,
    client_for,
    db,
    error_of,
    import_chat,
    recapped,
    run_jobs,
    sample_bytes,
    url,
)

__all__ = ["client", "db"]  # fixtures


def test_a_page_of_messages(client: TestClient) -> None:
    import_chat(client, sample_bytes())
    page = client.get(url(CHAT, "/messages"), params={"start": 10, "limit": 5}).json()
    assert page["total"] == 199
    assert page["start"] == 10
    assert [m["index"] for m in page["messages"]] == [10, 11, 12, 13, 14]
    first = page["messages"][0]
    assert set(first) >= {
        "index",
        "name",
        "is_user",
        "is_system",
        "hidden",
        "auto_hidden",
        "text",
        "send_date",
        "swipe_id",
        "swipes",
        "recap",
        "status",
        "error",
        "exclude",
        "edited",
        "scene_break",
    }
    assert (first["recap"], first["status"], first["scene_break"]) == (None, "none", None)
    default = client.get(url(CHAT, "/messages")).json()
    assert len(default["messages"]) == 199  # the default page (200) holds the whole chat
    tail = client.get(url(CHAT, "/messages"), params={"start": 195, "limit": 50}).json()
    assert [m["index"] for m in tail["messages"]] == [195, 196, 197, 198]
    past = client.get(url(CHAT, "/messages"), params={"start": 500}).json()
    assert (past["total"], past["messages"]) == (199, [])
    one = client.get(url(CHAT, "/messages/12")).json()
    assert one == page["messages"][2]


def test_page_parameters_are_validated(client: TestClient) -> None:
    import_chat(client, sample_bytes())
    messages = url(CHAT, "/messages")
    assert "1000" in error_of(client.get(messages, params={"limit": 1001}), 422, "limit")
    error_of(client.get(messages, params={"start": -1}), 422, "start")
    error_of(client.get(messages, params={"start": "ten"}), 422, "start")
    assert len(client.get(messages, params={"limit": 1000}).json()["messages"]) == 199


def test_unknown_message_indexes_are_404(client: TestClient) -> None:
    import_chat(client, sample_bytes())
    for index in (199, -1, 5000):
        assert "199 message(s)" in error_of(
            client.get(url(CHAT, f"/messages/{index}")), 404, "index"
        )
        error_of(
            client.patch(url(CHAT, f"/messages/{index}"), json={"exclude": True}), 404, "index"
        )
        error_of(client.post(url(CHAT, f"/messages/{index}/regenerate")), 404, "index")
    error_of(client.get(url(CHAT, "/messages/first")), 422, "index")


def test_statuses_follow_the_inclusion_flags(client: TestClient) -> None:
    chat = generate_chat(300, seed=7, with_recaps=True)
    set_data(chat.messages[20], "exclude", True)
    import_chat(client, serialize_chat(chat))
    messages = client.get(url(CHAT, "/messages"), params={"limit": 1000}).json()["messages"]
    statuses = {m["status"] for m in messages}
    assert {"included", "excluded", "none"} <= statuses
    # included messages are the newest recaps that fit; everything older with a recap is not
    included = [m["index"] for m in messages if m["status"] == "included"]
    assert included == sorted(included)
    older = [m for m in messages if m["index"] < included[0] and m["recap"]]
    assert older
    assert all(m["status"] == "excluded" for m in older)
    assert (messages[20]["status"], messages[20]["exclude"]) == ("excluded", True)
    hidden = [m for m in messages if m["hidden"]]
    assert hidden
    assert all(m["is_system"] for m in hidden)
    swiped = [m for m in messages if m["swipes"] > 1]
    assert swiped
    assert all(0 <= m["swipe_id"] < m["swipes"] for m in swiped)


def test_editing_a_recap(client: TestClient, db: Path) -> None:
    import_chat(client, chat_bytes(40, with_recaps=True))
    response = client.patch(url(CHAT, "/messages/38"), json={"recap": "Mira swears an oath."})
    assert response.status_code == 200
    edited = response.json()
    assert (edited["recap"], edited["edited"], edited["status"]) == (
        "Mira swears an oath.",
        True,
        "included",
    )
    assert client.get(url(CHAT, "/messages/38")).json() == edited
    client.close()
    with client_for(db) as again:
        assert again.get(url(CHAT, "/messages/38")).json()["recap"] == "Mira swears an oath."
        # an edit survives a recap of the whole chat
        again.post(url(CHAT, "/recap"))
        run_jobs(again)
        assert again.get(url(CHAT, "/messages/38")).json()["recap"] == "Mira swears an oath."


def test_excluding_and_including_a_message(client: TestClient, db: Path) -> None:
    Profiles().set("message_recap_injection_enabled", True)
    import_chat(client, chat_bytes(40, with_recaps=True))
    before = client.get(url(CHAT, "/messages/39")).json()
    assert before["status"] == "included"
    assert before["recap"] in _short_term(client)
    out = client.patch(url(CHAT, "/messages/39"), json={"exclude": True}).json()
    assert (out["exclude"], out["status"]) == (True, "excluded")
    assert before["recap"] not in _short_term(client)
    client.close()
    with client_for(db) as again:
        assert again.get(url(CHAT, "/messages/39")).json()["status"] == "excluded"
        back = again.patch(url(CHAT, "/messages/39"), json={"exclude": False}).json()
        assert (back["exclude"], back["status"]) == (False, "included")


def _short_term(client: TestClient) -> str:
    injections = client.get(url(CHAT, "/preview")).json()["injections"]
    return "".join(i["text"] for i in injections if i["key"] == SHORT_KEY)


def test_message_patches_are_validated(client: TestClient) -> None:
    import_chat(client, sample_bytes())
    path = url(CHAT, "/messages/3")
    error_of(client.patch(path, json={}), 400, "body")
    error_of(client.patch(path, json={"recap": 5}), 422, "recap")
    error_of(client.patch(path, json={"recap": None}), 422, "recap")
    assert "the recap is empty" in error_of(client.patch(path, json={"recap": "  "}), 422, "recap")
    error_of(client.patch(path, json={"exclude": "sometimes"}), 422, "exclude")
    for loose in ("yes", 1, "true"):  # a boolean is true or false, as docs/API.md says
        error_of(client.patch(path, json={"remember": loose}), 422, "remember")
    error_of(client.patch(path, json={"memory": "x"}), 422, "memory")
    error_of(client.patch(path, json=[1, 2]), 422)
    message = client.get(path).json()
    assert (message["recap"], message["exclude"], message["edited"]) == (None, False, False)


def test_regenerating_a_message_recap(client: TestClient, db: Path) -> None:
    recapped(client)
    original = client.get(url(CHAT, "/messages/9")).json()["recap"]
    client.patch(url(CHAT, "/messages/9"), json={"recap": "Hand-written."})
    response = client.post(url(CHAT, "/messages/9/regenerate"))
    assert response.status_code == 200
    job = response.json()["job"]
    app: Any = client.app
    assert app.state.queue.get(job).kind == "message_recap"
    assert app.state.queue.get(job).state == "queued"
    assert run_jobs(client).done == 1
    again = client.get(url(CHAT, "/messages/9")).json()
    assert (again["recap"], again["edited"]) == (original, False)
    assert app.state.queue.get(job).state == "done"


def test_regenerating_a_message_that_gets_no_recap_is_refused(client: TestClient) -> None:
    import_chat(client, chat_bytes(20, with_recaps=True))
    client.patch(url(CHAT, "/messages/5"), json={"exclude": True})
    recap = client.get(url(CHAT, "/messages/5")).json()["recap"]
    error_of(client.post(url(CHAT, "/messages/5/regenerate")), 409, "index")
    assert client.get(url(CHAT, "/messages/5")).json()["recap"] == recap  # nothing lost
    app: Any = client.app
    assert app.state.queue.counts(CHAT)["queued"] == 0


def test_a_page_of_a_long_chat_serialises_only_the_page(
    client: TestClient, monkeypatch: pytest.MonkeyPatch
) -> None:
    import_chat(client, serialize_chat(generate_chat(10_000, seed=11, with_recaps=True)))
    serialised: list[int] = []
    real = api_chats.message_json

    def counting(messages: Sequence[Message], index: int, names: SceneNames) -> dict[str, Any]:
        serialised.append(index)
        return real(messages, index, names)

    monkeypatch.setattr(api_chats, "message_json", counting)
    page = client.get(url(CHAT, "/messages"), params={"start": 9800, "limit": 200}).json()
    assert page["total"] == 10_000
    assert serialised == list(range(9800, 10_000))
    assert [m["index"] for m in page["messages"]] == serialised
    assert page["messages"][-1]["status"] == "included"


def test_scene_breaks_show_on_their_messages(client: TestClient) -> None:
    chat = generate_chat(60, seed=2)
    set_data(chat.messages[14], "scene_break", True)
    set_data(chat.messages[30], "scene_break", True)
    set_data(chat.messages[30], "scene_break_name", "The storm")
    set_data(chat.messages[30], "scene_break_visible", False)
    import_chat(client, serialize_chat(chat))
    page = client.get(url(CHAT, "/messages"), params={"start": 30, "limit": 1}).json()
    assert page["messages"][0]["scene_break"] == {
        "name": "The storm",
        "visible": False,
        "cause": None,
        "recap": None,
        "versions": 0,
        "selected": None,
    }
    unnamed = client.get(url(CHAT, "/messages/14")).json()["scene_break"]
    assert unnamed["name"] == "Scene 1 (0-14)"
    assert get_data(chat.messages[14], "include") != INCLUDED  # generated without recaps


def test_an_edit_begun_from_a_recap_changed_since_is_refused(client: TestClient) -> None:
    recapped(client)
    path = url(CHAT, "/messages/9")
    seen = client.get(path).json()["recap"]
    assert client.patch(path, json={"recap": "Edited in tab A."}).status_code == 200
    late = client.patch(path, json={"recap": "Edited in tab B.", "was": seen})
    assert "changed elsewhere" in error_of(late, 409, "was")
    assert client.get(path).json()["recap"] == "Edited in tab A."
    fresh = client.patch(path, json={"recap": "Edited in tab B.", "was": "Edited in tab A."})
    assert fresh.json()["recap"] == "Edited in tab B."
