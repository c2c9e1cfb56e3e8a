"""The REST API's scenes and running recap: marking, naming, versions, regeneration."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from fastapi.testclient import TestClient

from autorecap.core.data import set_data
from autorecap.stfiles.jsonl import serialize_chat
from autorecap.testing import generate_chat

from .test_api_chats import (
    CHAT,
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


def scenes_of(client: TestClient) -> list[dict[str, Any]]:
    found: list[dict[str, Any]] = client.get(url(CHAT, "/scenes")).json()["scenes"]
    return found


def test_marking_and_unmarking_scene_breaks(client: TestClient, db: Path) -> None:
    import_chat(client, sample_bytes())
    assert [(s["start"], s["end"], s["closed"]) for s in scenes_of(client)] == [(0, 198, False)]
    marked = client.post(url(CHAT, "/scenes"), json={"index": 24, "name": "The Rusted Anchor"})
    assert marked.status_code == 200
    client.post(url(CHAT, "/scenes"), json={"index": 50})
    found = marked.json()["scenes"]
    assert found[0] == {
        "number": 0,
        "name": "The Rusted Anchor",
        "start": 0,
        "end": 24,
        "break_index": 24,
        "closed": True,
        "visible": True,
        "cause": "user",
        "recap": None,
        "versions": [],
        "selected": None,
    }
    assert found[1]["break_index"] is None
    assert found[1]["cause"] is None  # the open scene
    listed = scenes_of(client)
    assert [(s["start"], s["end"], s["break_index"]) for s in listed] == [
        (0, 24, 24),
        (25, 50, 50),
        (51, 198, None),
    ]
    assert listed[1]["name"] == "Scene 2 (25-50)"
    assert client.get(url(CHAT, "/messages/24")).json()["scene_break"]["name"] == (
        "The Rusted Anchor"
    )
    # A break marked by hand gets its scene's recap, as one found does.
    run_jobs(client)
    assert all(s["recap"] for s in scenes_of(client)[:2])
    client.close()
    with client_for(db) as again:
        assert [s["end"] for s in scenes_of(again)] == [24, 50, 198]
        left = again.delete(url(CHAT, "/scenes/24"))
        assert left.status_code == 200
        assert [s["end"] for s in left.json()["scenes"]] == [50, 198]
        assert again.get(url(CHAT, "/messages/24")).json()["scene_break"] is None
    with client_for(db) as third:
        assert [s["end"] for s in scenes_of(third)] == [50, 198]


def test_scene_marks_are_validated(client: TestClient) -> None:
    import_chat(client, sample_bytes())
    scenes = url(CHAT, "/scenes")
    error_of(client.post(scenes, json={"index": 199}), 404, "index")
    error_of(client.post(scenes, json={"index": -1}), 404, "index")
    error_of(client.post(scenes, json={}), 422, "index")
    error_of(client.post(scenes, json={"index": "x"}), 422, "index")
    error_of(client.post(scenes, json={"index": 3, "title": "x"}), 422, "title")
    error_of(client.delete(url(CHAT, "/scenes/3")), 404, "index")
    error_of(client.delete(url(CHAT, "/scenes/500")), 404, "index")
    assert len(scenes_of(client)) == 1


def test_naming_a_scene_and_choosing_its_recap(client: TestClient, db: Path) -> None:
    recapped(client)
    first = scenes_of(client)[0]
    end = first["break_index"]
    assert len(first["versions"]) == 1
    assert first["selected"] == 0
    edited = client.patch(url(CHAT, f"/scenes/{end}"), json={"recap": "Tomas hires Mira."})
    assert edited.status_code == 200
    scene = edited.json()
    assert (scene["recap"], scene["selected"]) == ("Tomas hires Mira.", 1)
    assert scene["versions"] == [first["recap"], "Tomas hires Mira."]
    renamed = client.patch(url(CHAT, f"/scenes/{end}"), json={"name": "Hiring", "selected": 0})
    assert (renamed.json()["name"], renamed.json()["recap"]) == ("Hiring", first["recap"])
    client.close()
    with client_for(db) as again:
        scene = scenes_of(again)[0]
        assert (scene["name"], scene["selected"], len(scene["versions"])) == ("Hiring", 0, 2)
        message = again.get(url(CHAT, f"/messages/{end}")).json()
        assert message["scene_break"]["name"] == "Hiring"
        assert message["scene_break"]["versions"] == 2


def test_scene_patches_are_validated(client: TestClient) -> None:
    recapped(client)
    end = scenes_of(client)[0]["break_index"]
    path = url(CHAT, f"/scenes/{end}")
    assert "0 to 0" in error_of(client.patch(path, json={"selected": 1}), 404, "selected")
    error_of(client.patch(path, json={"selected": -1}), 404, "selected")
    error_of(client.patch(path, json={}), 400, "body")
    error_of(client.patch(path, json={"selected": 0, "recap": "x"}), 400, "recap")
    error_of(client.patch(path, json={"recap": "  "}), 422, "recap")
    error_of(client.patch(path, json={"name": 5}), 422, "name")
    error_of(client.patch(url(CHAT, "/scenes/3"), json={"name": "x"}), 404, "index")
    error_of(client.patch(url(CHAT, "/scenes/900"), json={"name": "x"}), 404, "index")
    assert len(scenes_of(client)[0]["versions"]) == 1


def test_regenerating_a_scene_recap(client: TestClient) -> None:
    recapped(client)
    end = scenes_of(client)[0]["break_index"]
    client.patch(url(CHAT, f"/scenes/{end}"), json={"recap": "By hand."})
    response = client.post(url(CHAT, f"/scenes/{end}/regenerate"))
    assert response.status_code == 200
    jobs = response.json()["jobs"]
    app: Any = client.app
    assert [app.state.queue.get(j).kind for j in jobs] == ["scene_recap", "running_recap"]
    run_jobs(client)
    assert [app.state.queue.get(j).state for j in jobs] == ["done", "done"]
    scene = scenes_of(client)[0]
    assert len(scene["versions"]) == 3
    assert scene["selected"] == 2
    assert scene["recap"] != "By hand."
    error_of(client.post(url(CHAT, "/scenes/3/regenerate")), 404, "index")


# --- the running recap ---------------------------------------------------------------------------


def test_running_recap_versions(client: TestClient, db: Path) -> None:
    recapped(client)
    running = client.get(url(CHAT, "/running")).json()
    numbers = [v["version"] for v in running["versions"]]
    assert numbers == sorted(numbers, reverse=True)
    assert running["selected"] == numbers[0]
    newest, oldest = running["versions"][0], running["versions"][-1]
    breaks = [s["break_index"] for s in scenes_of(client) if s["closed"]]
    assert oldest["scenes"] == breaks[:1]
    assert newest["scenes"] == [b for b in breaks if b <= newest["new_scene_index"]]
    assert newest["content"]
    assert newest["created_at"] > 1_000_000_000
    assert newest["exclude_latest"] == newest["excluded_count"]
    chosen = client.patch(url(CHAT, "/running"), json={"selected": numbers[-1]}).json()
    assert chosen["selected"] == numbers[-1]
    preview = client.get(url(CHAT, "/preview")).json()
    texts = [i["text"] for i in preview["injections"]]
    assert any(oldest["content"] in text for text in texts)
    assert not any(newest["content"] in text for text in texts)
    client.close()
    with client_for(db) as again:
        assert again.get(url(CHAT, "/running")).json()["selected"] == numbers[-1]


def test_editing_and_deleting_running_recap_versions(client: TestClient, db: Path) -> None:
    recapped(client)
    numbers = [v["version"] for v in client.get(url(CHAT, "/running")).json()["versions"]]
    edited = client.patch(url(CHAT, "/running"), json={"content": "Everything so far."}).json()
    assert edited["selected"] == numbers[0] + 1
    assert edited["versions"][0]["content"] == "Everything so far."
    left = client.delete(url(CHAT, f"/running/{numbers[0] + 1}"))
    assert left.status_code == 200
    assert left.json()["selected"] == numbers[0]  # the newest left takes over
    assert [v["version"] for v in left.json()["versions"]] == numbers
    client.delete(url(CHAT, f"/running/{numbers[-1]}"))
    client.close()
    with client_for(db) as again:
        running = again.get(url(CHAT, "/running")).json()
        assert [v["version"] for v in running["versions"]] == numbers[:-1]
        assert again.get(url(CHAT)).json()["running_versions"] == len(numbers) - 1


def test_running_recap_changes_are_validated(client: TestClient) -> None:
    import_chat(client, sample_bytes())
    path = url(CHAT, "/running")
    assert client.get(path).json() == {"selected": None, "versions": []}
    error_of(client.patch(path, json={"content": "x"}), 409, "content")
    error_of(client.patch(path, json={"selected": 0}), 404, "selected")
    error_of(client.delete(url(CHAT, "/running/0")), 404, "version")
    recapped(client, "recapped")
    path = url("recapped", "/running")
    newest = client.get(path).json()["selected"]
    error_of(client.patch(path, json={"selected": newest + 1}), 404, "selected")
    error_of(client.patch(path, json={}), 400, "body")
    error_of(client.patch(path, json={"selected": 0, "content": "x"}), 400, "body")
    error_of(client.patch(path, json={"content": " "}), 422, "content")
    error_of(client.patch(path, json={"selected": "new"}), 422, "selected")
    error_of(client.delete(url("recapped", f"/running/{newest + 1}")), 404, "version")
    error_of(client.delete(url("recapped", "/running/latest")), 422, "version")
    assert client.get(path).json()["selected"] == newest


def test_each_scene_says_why_it_ends_where_it_does(client: TestClient) -> None:
    """`cause`: found by the offline cues, closed at `scene_max_messages` with no break in
    sight, or marked by hand; none for a break SillyTavern or an older autorecap made."""
    chat = generate_chat(200, seed=3, scene_length=(90, 120))
    set_data(chat.messages[5], "scene_break", True)  # from before causes were kept
    import_chat(client, serialize_chat(chat))
    assert client.patch("/api/settings", json={"scene_max_messages": 30}).status_code == 200
    assert client.post(url(CHAT, "/recap")).status_code == 200
    assert run_jobs(client).failed == 0
    client.post(url(CHAT, "/scenes"), json={"index": 197})
    causes = [s["cause"] for s in scenes_of(client) if s["closed"]]
    assert causes[0] is None
    assert causes[-1] == "user"
    assert "length" in causes
    assert set(causes[1:-1]) <= {"cues", "length"}
    for scene in scenes_of(client)[1:-1]:
        assert scene["end"] - scene["start"] + 1 <= 30
    message = client.get(url(CHAT, f"/messages/{scenes_of(client)[1]['end']}")).json()
    assert message["scene_break"]["cause"] in {"cues", "length"}


def test_hiding_and_showing_a_scene_break(client: TestClient, db: Path) -> None:
    recapped(client)
    assert client.patch("/api/settings", json={"auto_hide_scene_count": 3}).status_code == 200
    ends = [s["break_index"] for s in scenes_of(client) if s["closed"]]
    assert len(ends) >= 4

    def auto_hidden() -> list[int]:
        page = client.get(url(CHAT, "/messages"), params={"limit": 200}).json()["messages"]
        return [m["index"] for m in page if m["auto_hidden"]]

    # Auto-hide keeps the last three scenes whole: it hides up to the third break from the end.
    before = auto_hidden()
    assert before[-1] == ends[-3]
    hidden = client.patch(url(CHAT, f"/scenes/{ends[-1]}"), json={"visible": False})
    assert hidden.status_code == 200
    assert hidden.json()["visible"] is False
    after = auto_hidden()  # the hidden break no longer counts: a scene earlier
    assert after[-1] == ends[-4]
    assert set(after) < set(before)
    assert client.get(url(CHAT, f"/messages/{ends[-1]}")).json()["scene_break"]["visible"] is False
    assert [s["break_index"] for s in scenes_of(client) if s["closed"]] == ends  # still a scene
    client.close()
    with client_for(db) as again:
        assert [s["visible"] for s in scenes_of(again) if s["closed"]][-2:] == [True, False]
        shown = again.patch(url(CHAT, f"/scenes/{ends[-1]}"), json={"visible": True})
        assert shown.json()["visible"] is True
        page = again.get(url(CHAT, "/messages"), params={"limit": 200}).json()["messages"]
        assert [m["index"] for m in page if m["auto_hidden"]] == before
        path = url(CHAT, f"/scenes/{ends[-1]}")
        error_of(again.patch(path, json={"visible": "maybe"}), 422, "visible")
        error_of(again.patch(url(CHAT, "/scenes/3"), json={"visible": False}), 404, "index")


def test_a_scene_recap_edited_by_hand_reaches_the_running_recap(client: TestClient) -> None:
    # The running recap folds each scene once: an older scene's edit never reached what is
    # injected, and recapping again changed nothing (found by a newcomer test).
    recapped(client)
    before = client.get(url(CHAT, "/running")).json()
    first = scenes_of(client)[0]
    edit = "Tomas hires Mira for forty-one crowns at the Rusted Anchor."
    response = client.patch(url(CHAT, f"/scenes/{first['break_index']}"), json={"recap": edit})
    assert response.status_code == 200
    assert run_jobs(client).done >= 1
    after = client.get(url(CHAT, "/running")).json()
    newest = after["versions"][0]
    assert len(after["versions"]) == len(before["versions"]) + 1  # the old ones stay
    assert after["selected"] == newest["version"]
    assert edit in newest["content"]
    assert first["recap"] not in newest["content"]
    assert newest["scenes"] == before["versions"][0]["scenes"]  # every scene, made again
    preview = client.get(url(CHAT, "/preview")).json()
    assert any(edit in injection["text"] for injection in preview["injections"])
    # Nothing changed since: the next run adds no version.
    assert client.post(url(CHAT, "/recap")).status_code in (200, 202)
    run_jobs(client)
    assert len(client.get(url(CHAT, "/running")).json()["versions"]) == len(after["versions"])
