"""Access control (`autorecap serve --keys-file`): a key sees and changes only its own chats,
jobs and settings, on every route of the API and the proxy.

The isolation test enumerates the app's routes: every route under /api, /v1 and /c/ must have
probes in `PROBES` (a request key A makes against key B's chat, job or profile), so a route
added later fails `test_every_route_has_isolation_probes` until it is added to the table.
"""

from __future__ import annotations

import json
import re
import socket
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute
from fastapi.testclient import TestClient

from autorecap import sample_chat_path
from autorecap.cli import main
from autorecap.core import running, scenes
from autorecap.core.data import set_data
from autorecap.profiles import Profiles
from autorecap.server.app import ServerConfig, create_app
from autorecap.server.proxy.matching import client_messages, fingerprint
from autorecap.server.proxy.turns import ProxyChats
from autorecap.stfiles.jsonl import read_chat
from autorecap.store.sqlite import SQLiteStore

from .conftest import Upstream

KEYS = {"alice": "alice-key-0123456789", "bob": "bob-key-0123456789"}
MARK = "BOB-ONLY-7f3a"
"""A text only Bob's data holds: it must never reach Alice."""
SYSTEM = {"role": "system", "content": "You are Mira, captain of the Heron."}
OPENING = [SYSTEM, {"role": "user", "content": "Where are we headed, captain?"}]
SCENE_END = 9
BOB_PROFILE = "BobsProfile"
SCOPED = ("/api", "/v1", "/c/")


def key_header(name: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {KEYS[name]}"}


def route_key(method: str, path: str) -> tuple[str, str]:
    """`("GET", "/api/chats/{}")`: a route with its parameter names left out."""
    return method, re.sub(r"\{[^}]*\}", "{}", path)


def registered_routes(app: FastAPI) -> set[tuple[str, str]]:
    """Every (method, path) of an APIRoute under /api, /v1 and /c/. FastAPI releases that keep
    included routers apart (`_IncludedRouter`) are walked with `iter_route_contexts`."""
    try:
        from fastapi.routing import iter_route_contexts
    except ImportError:  # older FastAPI: `app.routes` is already flat
        entries: list[Any] = list(app.routes)
    else:
        entries = list(iter_route_contexts(app.routes))
    found = set()
    for entry in entries:
        original = getattr(entry, "original_route", entry)
        path = getattr(entry, "path", None)
        if not isinstance(original, APIRoute) or not path or not path.startswith(SCOPED):
            continue
        for method in getattr(entry, "methods", None) or ():
            if method != "HEAD":
                found.add(route_key(method, path))
    return found


# --- the world: Bob's chat, jobs and profile; Alice has a chat of her own -----------------------


@dataclass
class World:
    client: TestClient
    upstream: Upstream
    home: Path
    bob_failed_job: int
    bob_queued_job: int
    bob_fp_chat: str
    looked: bool = False

    @property
    def registry(self) -> ProxyChats:
        registry: ProxyChats = self.client.app.state.registry  # type: ignore[attr-defined]
        return registry

    def ids(self, url: str) -> str:
        return url.format(failed=self.bob_failed_job, queued=self.bob_queued_job, scene=SCENE_END)


def bob_chat() -> Any:
    """The sample chat with Bob's own recaps, a scene and a running recap."""
    chat = read_chat(sample_chat_path())
    set_data(chat.messages[0], "memory", f"{MARK} message recap")
    scenes.mark_break(chat.messages[SCENE_END], "The Rusted Anchor")
    scenes.add_recap_version(chat.messages[SCENE_END], f"{MARK} scene recap", scene_hash="x")
    running.add_version(
        chat,
        f"{MARK} running recap",
        scene_count=1,
        excluded_count=0,
        prev_scene_index=-1,
        new_scene_index=SCENE_END,
        now_ms=1_700_000_000_000,
    )
    return chat


def seed(db: Path, home: Path) -> str:
    """Bob's chats (`mira`, and one under the fingerprint of `OPENING`), his profile bound to
    `mira`, and Alice's chat `own`. Returns the fingerprint."""
    store = SQLiteStore(db)
    try:
        store.import_chat(bob_chat(), chat_id="bob/mira")
        fp = fingerprint(client_messages({"messages": OPENING}))
        store.import_chat(bob_chat(), chat_id=f"bob/{fp}")
        store.import_chat(read_chat(sample_chat_path()), chat_id="alice/own")
    finally:
        store.close()
    profiles = Profiles(home / "users" / "bob" / "settings.json")
    profiles.save_profile(BOB_PROFILE)
    profiles.set("message_recap_prompt", f"{MARK} prompt", BOB_PROFILE)
    profiles.bind(BOB_PROFILE, chat="bob/mira")
    return fp


@pytest.fixture
def keys_file(tmp_path: Path) -> Path:
    path = tmp_path / "keys.txt"
    path.write_text("# who may use this server\n" + "".join(f"{n}: {k}\n" for n, k in KEYS.items()))
    return path


@pytest.fixture
def world(tmp_path: Path, home: Path, upstream: Upstream, keys_file: Path) -> Iterator[World]:
    db = tmp_path / "x.db"
    fp = seed(db, home)
    config = ServerConfig(upstream=upstream.url, db=db, worker=False, keys_file=keys_file)
    with TestClient(create_app(config)) as client:
        registry: ProxyChats = client.app.state.registry  # type: ignore[attr-defined]
        queue = registry.queue
        target = registry.store.load_chat("bob/mira").messages[3].id
        failed = queue.enqueue("message_recap", "bob/mira", target, priority=9, max_retries=0)
        claimed = queue.claim()
        assert claimed is not None
        queue.fail(claimed, f"{MARK} error")
        queued = queue.enqueue("running_recap", "bob/mira")
        yield World(client, upstream, home, failed, queued, fp)


def bob_state(world: World) -> dict[str, Any]:
    """Everything of Bob's, as Bob sees it through the API and as it is stored (the first look
    opens Bob's chats, which saves them once: the state is taken after that)."""
    if not world.looked:
        _bob_state(world)
        world.looked = True
    return _bob_state(world)


def _bob_state(world: World) -> dict[str, Any]:
    client = world.client
    bob = key_header("bob")
    seen = {
        url: client.get(url, headers=bob).json()
        for url in (
            "/api/chats",
            "/api/chats/mira",
            "/api/chats/mira/messages?limit=1000",
            "/api/chats/mira/scenes",
            "/api/chats/mira/running",
            "/api/chats/mira/memory",
            f"/api/chats/{world.bob_fp_chat}",
            "/api/settings",
            "/api/settings?chat=mira",
            "/api/jobs",
        )
    }
    registry = world.registry
    store = registry.store
    bob_chats = sorted(info.id for info in store.list_chats() if info.id.startswith("bob/"))
    settings_files = {
        path: path.read_bytes() if path.exists() else None
        for path in (world.home / "settings.json", world.home / "users" / "bob" / "settings.json")
    }
    return {
        "api": seen,
        "chats": bob_chats,
        "exported": {chat_id: store.export_chat(chat_id) for chat_id in bob_chats},
        "jobs": registry.queue.list(chat_prefix="bob/"),
        "paused": registry.queue.paused,
        "files": settings_files,
    }


# --- the table ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class Probe:
    """One request Alice makes at Bob's things. `url` may hold {failed}, {queued} (Bob's job
    ids) and {scene} (the message ending Bob's scene). `allowed`: the statuses it may get
    (404 when it names something of Bob's; 2xx when it acts on Alice's own things)."""

    method: str
    url: str
    json: Any = None
    content: bytes | None = None
    headers: dict[str, str] = field(default_factory=dict)
    allowed: tuple[int, ...] = (404,)
    check: Callable[[Any], None] | None = None
    """Checks Alice's 2xx answer (that it lists nothing of Bob's)."""
    routed: bool = True
    """False for a URL no route takes (an encoded '/' in a chat id): a 404 before any key."""


def _only_alices_chats(body: Any) -> None:
    assert [chat["id"] for chat in body["chats"]] == ["own"]


def _no_jobs(body: Any) -> None:
    assert body["jobs"] == []
    assert sum(body["counts"].values()) == 0


def _alices_settings(body: Any) -> None:
    assert BOB_PROFILE not in body["profiles"]
    assert body["bindings"] == {"chat": {}, "character": {}}


SAMPLE = sample_chat_path().read_bytes()
CHAT = {"model": "m", "messages": [*OPENING, {"role": "assistant", "content": "North."}]}
CHAT_C = "/c/mira/v1/chat/completions"

PROBES: dict[tuple[str, str], list[Probe]] = {
    # --- chats (api_chats.py) ---
    ("GET", "/api/chats"): [Probe("GET", "/api/chats", allowed=(200,), check=_only_alices_chats)],
    ("POST", "/api/chats"): [
        # Alice may import a chat under the id Bob uses: it is hers, Bob's is untouched.
        Probe("POST", "/api/chats?id=mira", content=SAMPLE, allowed=(201,)),
        Probe("POST", "/api/chats?id=mira&replace=true", content=SAMPLE, allowed=(201,)),
        Probe(
            "POST", "/api/chats?id=bob/mira&replace=true", content=SAMPLE, allowed=(400, 404, 422)
        ),
    ],
    ("GET", "/api/chats/{}"): [
        Probe("GET", "/api/chats/mira"),
        Probe("GET", "/api/chats/bob%2Fmira", routed=False),
    ],
    ("GET", "/api/chats/{}/export"): [Probe("GET", "/api/chats/mira/export")],
    ("DELETE", "/api/chats/{}"): [
        Probe("DELETE", "/api/chats/mira"),
        Probe("DELETE", "/api/chats/bob%2Fmira", routed=False),
    ],
    ("POST", "/api/chats/{}/recap"): [Probe("POST", "/api/chats/mira/recap?force=true")],
    ("POST", "/api/chats/{}/jobs/cancel"): [
        Probe("POST", "/api/chats/mira/jobs/cancel"),
        Probe("POST", "/api/chats/bob%2Fmira/jobs/cancel", routed=False),
    ],
    ("POST", "/api/chats/{}/jobs/retry"): [
        Probe("POST", "/api/chats/mira/jobs/retry"),
        Probe("POST", "/api/chats/bob%2Fmira/jobs/retry", routed=False),
    ],
    ("GET", "/api/chats/{}/messages"): [Probe("GET", "/api/chats/mira/messages")],
    ("GET", "/api/chats/{}/messages/{}"): [Probe("GET", "/api/chats/mira/messages/0")],
    ("PATCH", "/api/chats/{}/messages/{}"): [
        Probe("PATCH", "/api/chats/mira/messages/0", json={"recap": "Alice was here"}),
        Probe("PATCH", "/api/chats/mira/messages/0", json={"exclude": True}),
    ],
    ("POST", "/api/chats/{}/messages/{}/regenerate"): [
        Probe("POST", "/api/chats/mira/messages/0/regenerate")
    ],
    ("GET", "/api/chats/{}/memory"): [Probe("GET", "/api/chats/mira/memory")],
    ("PATCH", "/api/chats/{}/memory"): [
        Probe("PATCH", "/api/chats/mira/memory", json={"chat": False})
    ],
    ("GET", "/api/chats/{}/preview"): [
        Probe("GET", "/api/chats/mira/preview"),
        Probe("GET", "/api/chats/mira/preview?format=text"),
        Probe("GET", "/api/chats/mira/preview?query=Osric"),
    ],
    ("GET", "/api/chats/{}/combined"): [Probe("GET", "/api/chats/mira/combined")],
    ("PATCH", "/api/chats/{}/combined"): [
        Probe("PATCH", "/api/chats/mira/combined", json={"selected": 0})
    ],
    # --- scenes and the running recap (api_scenes.py) ---
    ("GET", "/api/chats/{}/scenes"): [Probe("GET", "/api/chats/mira/scenes")],
    ("POST", "/api/chats/{}/scenes"): [
        Probe("POST", "/api/chats/mira/scenes", json={"index": 20, "name": "Alice's"})
    ],
    ("DELETE", "/api/chats/{}/scenes/{}"): [Probe("DELETE", "/api/chats/mira/scenes/{scene}")],
    ("PATCH", "/api/chats/{}/scenes/{}"): [
        Probe("PATCH", "/api/chats/mira/scenes/{scene}", json={"name": "Alice's"}),
        Probe("PATCH", "/api/chats/mira/scenes/{scene}", json={"recap": "Alice's recap"}),
    ],
    ("POST", "/api/chats/{}/scenes/{}/regenerate"): [
        Probe("POST", "/api/chats/mira/scenes/{scene}/regenerate")
    ],
    ("GET", "/api/chats/{}/running"): [Probe("GET", "/api/chats/mira/running")],
    ("PATCH", "/api/chats/{}/running"): [
        Probe("PATCH", "/api/chats/mira/running", json={"content": "Alice's recap"}),
        Probe("PATCH", "/api/chats/mira/running", json={"selected": 0}),
    ],
    ("DELETE", "/api/chats/{}/running/{}"): [Probe("DELETE", "/api/chats/mira/running/0")],
    # --- settings and profiles (api_admin.py): Alice changes only her own ---
    ("GET", "/api/settings"): [
        Probe("GET", "/api/settings", allowed=(200,), check=_alices_settings),
        Probe("GET", "/api/settings?chat=mira"),
        Probe("GET", f"/api/settings?profile={BOB_PROFILE}"),
    ],
    ("PATCH", "/api/settings"): [
        Probe("PATCH", "/api/settings", json={"context_size": 1024}, allowed=(200,)),
        Probe("PATCH", f"/api/settings?profile={BOB_PROFILE}", json={"context_size": 1024}),
        Probe(
            "PATCH",
            "/api/settings",
            json={"chats_enabled": {"mira": False}, "use_global_toggle_state": True},
            allowed=(200,),
        ),
    ],
    ("DELETE", "/api/settings/{}"): [
        Probe("DELETE", "/api/settings/message_recap_prompt", allowed=(200,)),
        Probe("DELETE", f"/api/settings/message_recap_prompt?profile={BOB_PROFILE}"),
    ],
    ("POST", "/api/profiles"): [
        Probe("POST", "/api/profiles", json={"name": "Copy", "source": BOB_PROFILE}),
        Probe("POST", "/api/profiles", json={"name": BOB_PROFILE}, allowed=(201,)),
    ],
    ("POST", "/api/profiles/{}/load"): [Probe("POST", f"/api/profiles/{BOB_PROFILE}/load")],
    ("DELETE", "/api/profiles/{}"): [Probe("DELETE", f"/api/profiles/{BOB_PROFILE}")],
    ("PUT", "/api/profiles/{}/bindings"): [
        Probe("PUT", f"/api/profiles/{BOB_PROFILE}/bindings", json={"chat": "mira"}),
        Probe("PUT", "/api/profiles/Default/bindings", json={"chat": "mira"}, allowed=(200,)),
    ],
    ("DELETE", "/api/profiles/{}/bindings"): [
        Probe("DELETE", f"/api/profiles/{BOB_PROFILE}/bindings", json={"chat": "mira"}),
        Probe("DELETE", "/api/profiles/Default/bindings", json={"chat": "mira"}, allowed=(200,)),
    ],
    ("PATCH", "/api/memory"): [
        Probe(
            "PATCH",
            "/api/memory",
            json={"use_global_toggle_state": True, "global_toggle_state": False},
            allowed=(200,),
        )
    ],
    # --- jobs (api_admin.py) ---
    ("GET", "/api/jobs"): [
        Probe("GET", "/api/jobs", allowed=(200,), check=_no_jobs),
        Probe("GET", "/api/jobs?chat=mira&state=queued,failed", allowed=(200,), check=_no_jobs),
    ],
    ("POST", "/api/jobs/pause"): [Probe("POST", "/api/jobs/pause", allowed=(403,))],
    ("POST", "/api/jobs/resume"): [Probe("POST", "/api/jobs/resume", allowed=(403,))],
    ("POST", "/api/jobs/{}/retry"): [Probe("POST", "/api/jobs/{failed}/retry")],
    ("POST", "/api/jobs/{}/cancel"): [Probe("POST", "/api/jobs/{queued}/cancel")],
    # --- the proxy: Bob's chat id or opening gives Alice a chat of her own ---
    ("POST", "/v1/chat/completions"): [
        Probe("POST", "/v1/chat/completions", json=CHAT, allowed=(200,)),
        Probe("POST", "/v1/chat/completions", json={**CHAT, "stream": True}, allowed=(200,)),
        Probe(
            "POST",
            "/v1/chat/completions",
            json=CHAT,
            headers={"X-Autorecap-Chat": "mira"},
            allowed=(200,),
        ),
    ],
    ("POST", "/c/{}/v1/chat/completions"): [
        Probe("POST", CHAT_C, json=CHAT, allowed=(200,)),
        Probe("POST", CHAT_C, json={**CHAT, "stream": True}, allowed=(200,)),
        Probe("POST", "/c/bob%2Fmira/v1/chat/completions", json=CHAT, routed=False),
    ],
    ("POST", "/v1/completions"): [
        Probe("POST", "/v1/completions", json={"model": "m", "prompt": "Hi"}, allowed=(200,))
    ],
    ("POST", "/c/{}/v1/completions"): [
        Probe("POST", "/c/mira/v1/completions", json={"model": "m", "prompt": "Hi"}, allowed=(200,))
    ],
    ("GET", "/v1/models"): [Probe("GET", "/v1/models", allowed=(200,))],
    ("GET", "/c/{}/v1/models"): [Probe("GET", "/c/mira/v1/models", allowed=(200,))],
}

CASES = [
    pytest.param(route, number, probe, id=f"{route[0]} {route[1]} #{number}")
    for route, probes in PROBES.items()
    for number, probe in enumerate(probes)
]


def send(client: TestClient, world: World, probe: Probe, headers: dict[str, str]) -> Any:
    return client.request(
        probe.method,
        world.ids(probe.url),
        json=probe.json,
        content=probe.content,
        headers={**probe.headers, **headers},
    )


def assert_error(response: httpx.Response, status: int) -> str:
    assert response.status_code == status, response.text
    body = response.json()
    assert list(body) == ["error"]
    assert body["error"]["type"] == "autorecap_error"
    assert body["error"]["code"] == status
    return str(body["error"]["message"])


@pytest.fixture(scope="module")
def routes(tmp_path_factory: pytest.TempPathFactory) -> set[tuple[str, str]]:
    folder = tmp_path_factory.mktemp("routes")
    config = ServerConfig(upstream="http://127.0.0.1:9/v1", db=folder / "x.db", worker=False)
    with TestClient(create_app(config)) as client:
        return registered_routes(client.app)  # type: ignore[arg-type]


def test_every_route_has_isolation_probes(routes: set[tuple[str, str]]) -> None:
    """A route under /api, /v1 or /c/ that `PROBES` does not cover fails here: add probes for
    it (what key A would try against key B's things)."""
    missing = sorted(routes - set(PROBES))
    assert not missing, f"routes with no isolation probe in PROBES: {missing}"
    assert len(routes) >= 40


def test_the_table_names_no_route_that_is_gone(routes: set[tuple[str, str]]) -> None:
    assert sorted(set(PROBES) - routes) == []


@pytest.mark.parametrize(("route", "number", "probe"), CASES)
def test_a_key_never_sees_or_changes_another_keys_things(
    world: World, routes: set[tuple[str, str]], route: tuple[str, str], number: int, probe: Probe
) -> None:
    assert route in routes, f"{route} is not registered: take it out of PROBES"
    before = bob_state(world)
    asked = len(world.upstream.chat_requests)
    response = send(world.client, world, probe, key_header("alice"))
    assert response.status_code in probe.allowed, response.text
    assert MARK not in response.text
    if response.status_code >= 400:
        assert_error(response, response.status_code)
    elif probe.check is not None:
        probe.check(response.json())
    # Nothing of Bob's went upstream on Alice's behalf (his memory is never injected for her).
    for request in world.upstream.chat_requests[asked:]:
        assert MARK not in request.raw.decode("utf-8", "replace")
    assert bob_state(world) == before


def test_no_key_or_an_unknown_key_is_a_401(world: World, routes: set[tuple[str, str]]) -> None:
    """Every probe of the table without a key, and with keys the server does not know: 401 in
    the one error shape, before anything is read, changed or sent upstream. (One world for all:
    a refused request changes nothing.)"""
    before = bob_state(world)
    tried = 0
    for route, probes in PROBES.items():
        if route not in routes:
            continue
        for probe in probes:
            where = f"{probe.method} {probe.url}"
            if not probe.routed:
                message = assert_error(send(world.client, world, probe, {}), 404)
                assert "no route" in message, where
                continue
            message = assert_error(send(world.client, world, probe, {}), 401)
            assert "needs an API key" in message, where
            for wrong in (
                {"Authorization": "Bearer sk-not-a-key-at-all"},
                {"X-Api-Key": "nope-nope-nope"},
            ):
                message = assert_error(send(world.client, world, probe, wrong), 401)
                assert "not in the server's keys file" in message, where
                assert "sk-not-a-key" not in message, where
            tried += 1
    assert tried >= 40
    assert world.upstream.requests == []
    assert bob_state(world) == before
    assert [
        info.id for info in world.registry.store.list_chats() if info.id.startswith("alice/")
    ] == ["alice/own"]


def test_x_api_key_works_like_a_bearer_key(world: World) -> None:
    response = world.client.get("/api/chats", headers={"X-Api-Key": KEYS["alice"]})
    assert response.status_code == 200, response.text
    assert [chat["id"] for chat in response.json()["chats"]] == ["own"]


# --- two keys, one chat id ----------------------------------------------------------------------


def test_two_keys_with_the_same_chat_id_get_two_chats(world: World) -> None:
    client, upstream = world.client, world.upstream
    for name in ("alice", "bob"):
        history = [SYSTEM, {"role": "user", "content": f"{name} speaks first."}]
        response = client.post(
            "/c/same/v1/chat/completions",
            json={"model": "m", "messages": history},
            headers=key_header(name),
        )
        assert response.status_code == 200, response.text
        assert response.headers["x-autorecap-chat"] == "same"
    store = world.registry.store
    ids = {info.id for info in store.list_chats()}
    assert {"alice/same", "bob/same"} <= ids
    alice = [m.text for m in world.registry.chat("alice/same").messages]
    bob = [m.text for m in world.registry.chat("bob/same").messages]
    assert alice[0] == "alice speaks first."
    assert bob[0] == "bob speaks first."
    assert "alice" not in " ".join(upstream.chat_requests[-1].contents)
    # Each lists its own chat under the same id.
    for name in ("alice", "bob"):
        listed = client.get("/api/chats", headers=key_header(name)).json()["chats"]
        assert "same" in [chat["id"] for chat in listed]
        texts = client.get("/api/chats/same/messages", headers=key_header(name)).json()
        assert texts["messages"][0]["text"] == f"{name} speaks first."


def test_two_keys_with_the_same_opening_get_two_chats(world: World) -> None:
    """The same fingerprinted opening through /v1/chat/completions: one chat per key. Bob has
    a chat with this opening and a memory; Alice's request carries none of it."""
    client, upstream = world.client, world.upstream
    first = [*OPENING]
    response = client.post(
        "/v1/chat/completions", json={"model": "m", "messages": first}, headers=key_header("alice")
    )
    assert response.status_code == 200, response.text
    fp = world.bob_fp_chat
    assert response.headers["x-autorecap-chat"] == fp
    assert MARK not in upstream.chat_requests[-1].raw.decode()
    assert world.registry.store.has_chat(f"alice/{fp}")
    alice = world.registry.chat(f"alice/{fp}")
    assert [m.text for m in alice.messages] == [OPENING[1]["content"], "Reply 1."]
    # Bob's chat with that opening is his alone, and his memory goes with his requests.
    bob_before = world.registry.store.export_chat(f"bob/{fp}")
    response = client.post(
        "/v1/chat/completions",
        json={"model": "m", "messages": first},
        headers=key_header("alice"),
    )
    assert response.status_code == 200
    assert world.registry.store.export_chat(f"bob/{fp}") == bob_before


# --- the command line --------------------------------------------------------------------------


def run_serve(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, *args: str
) -> tuple[int, str, Any]:
    """`autorecap serve ARGS` with uvicorn's Server.run replaced: (exit code, stderr, the
    app). It is handed the socket serve bound, still open, on the port asked for."""
    import uvicorn

    served: list[Any] = []

    def run(server: uvicorn.Server, sockets: list[socket.socket]) -> None:
        (listener,) = sockets
        assert listener.fileno() != -1
        assert str(listener.getsockname()[1]) == port
        served.append(server.config.app)
        server.started = True

    monkeypatch.setattr(uvicorn.Server, "run", run)
    with socket.socket() as probe:  # a port free now: serve checks it can listen there
        probe.bind(("127.0.0.1", 0))
        port = str(probe.getsockname()[1])
    try:
        main(["serve", "--upstream", "http://127.0.0.1:9/v1", "--port", port, *args])
        code = 0
    except SystemExit as exit_:
        code = exit_.code if isinstance(exit_.code, int) else 1
    return code, capsys.readouterr().err, served[0] if served else None


def test_serve_with_a_keys_file_says_access_control_is_on(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    keys_file: Path,
    tmp_path: Path,
) -> None:
    code, err, app = run_serve(
        capsys, monkeypatch, "--keys-file", str(keys_file), "--db", str(tmp_path / "x.db")
    )
    assert code == 0, err
    assert "access control: on, 2 key(s)" in " ".join(err.split())
    for key in KEYS.values():
        assert key not in err
    with TestClient(app) as client:
        assert client.get("/api/chats").status_code == 401
        assert client.get("/api/chats", headers=key_header("bob")).status_code == 200


def test_serve_without_keys_says_access_control_is_off(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    code, err, _ = run_serve(capsys, monkeypatch, "--db", str(tmp_path / "x.db"))
    assert code == 0, err
    assert "access control: off" in err
    code, err, _ = run_serve(
        capsys, monkeypatch, "--db", str(tmp_path / "x.db"), "--host", "0.0.0.0"
    )
    assert code == 0, err
    assert "anyone who can reach" in " ".join(err.split())


def test_serve_on_a_port_in_use_says_so_before_anything_starts(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = str(taken.getsockname()[1])
        code, err, app = run_serve(
            capsys, monkeypatch, "--db", str(tmp_path / "x.db"), "--port", port
        )
    assert code == 1
    assert app is None
    assert f"port {port} on 127.0.0.1 is in use" in err
    assert "pick another port with --port" in err
    assert "autorecap proxy on" not in err  # no banner for a server that never started
    assert not (tmp_path / "x.db").exists()


@pytest.mark.parametrize(
    ("text", "words"),
    [
        (None, "cannot read the keys file"),
        ("", "has no keys"),
        ("alice: short\n", "at least 8 characters"),
        ("al ice: alice-key-0123456789\n", "may use only letters"),
        ("..: alice-key-0123456789\n", "may not start with '.'"),
        ("a: alice-key-0123456789\na: other-key-0123456789\n", "repeated"),
    ],
)
def test_serve_with_a_bad_keys_file_is_a_clear_error(
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
    tmp_path: Path,
    text: str | None,
    words: str,
) -> None:
    path = tmp_path / "keys.txt"
    if text is not None:
        path.write_text(text)
    code, err, app = run_serve(
        capsys, monkeypatch, "--keys-file", str(path), "--db", str(tmp_path / "x.db")
    )
    assert code == 1
    assert app is None
    assert words in " ".join(err.split())
    assert "Traceback" not in err
    assert "0123456789" not in err


def test_the_keys_file_format(tmp_path: Path) -> None:
    from autorecap.server.access import KeyRing

    path = tmp_path / "keys.txt"
    path.write_text(
        "# comment\n\nalice: alice-key-0123456789  # trailing comment\nbare-key-0123456789\n"
    )
    ring = KeyRing.from_file(path)
    assert len(ring) == 2
    assert ring.scope_for("alice-key-0123456789").owner == "alice"
    assert ring.scope_for("bare-key-0123456789").owner.startswith("key-")
    assert json.dumps(ring.__dict__, default=str).count("alice-key") == 0
