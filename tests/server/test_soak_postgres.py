"""Two `autorecap serve` and two `autorecap worker` processes on one PostgreSQL, under load.

50 simulated users chat through the proxy, each request going to the other server than the
one before (round-robin), while the workers make the recaps through an LLM on loopback that
takes its time. One chat gets the same request on both servers at once, and one worker is
killed with SIGKILL while it holds a job. At the end: no message lost or doubled, every job
done exactly once (the killed worker's taken over when its lease ran out), and every chat's
memory made and present in both servers.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import httpx
import psycopg
import pytest

from autorecap.core import running
from autorecap.core.data import get_memory
from autorecap.profiles import profiles_of
from autorecap.store import open_store
from autorecap.testing.llm import PlausibleLLM, send_json

REPO = Path(__file__).resolve().parents[2]
USERS = 50
TURNS = 5
OPENING = 8
"""Messages each chat starts with (a conversation the frontend already had)."""
LEASE_S = 3
DEADLINE_S = 240.0
SYSTEM = {"role": "system", "content": "You are Mira, captain of the Heron, talking with Tomas."}
PLACES = ["the quay", "the lighthouse", "the market", "the chart room", "the orchard", "the inn"]


def opening(user: int) -> list[dict[str, str]]:
    lines = []
    for k in range(OPENING):
        place = PLACES[(user + k) % len(PLACES)]
        if k % 2 == 0:
            lines.append(
                {"role": "user", "content": f"Tomas ({user}) asks about {place}, line {k}."}
            )
        else:
            lines.append(
                {"role": "assistant", "content": f"Mira ({user}) tells of {place}, line {k}."}
            )
    return lines


def question(user: int, turn: int) -> str:
    return f"User {user}, turn {turn}: shall we sail past {PLACES[(user * 3 + turn) % 6]}?"


def reply_to(text: str) -> str:
    return f"Reply to [{text}]"


class ChatUpstream:
    """The model behind the proxies: answers every chat completion at once with a reply
    made from the last user message, so that each reply is known and unique."""

    def __init__(self) -> None:
        self.prompts: dict[str, list[str]] = {}
        """The contents sent upstream, by the last user message they answer."""
        self._lock = threading.Lock()
        upstream = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                messages = body["messages"]
                last = next(m["content"] for m in reversed(messages) if m["role"] == "user")
                with upstream._lock:
                    upstream.prompts[last] = [str(m.get("content")) for m in messages]
                data = json.dumps(
                    {
                        "id": "soak",
                        "object": "chat.completion",
                        "model": body.get("model", "m"),
                        "choices": [
                            {
                                "index": 0,
                                "message": {"role": "assistant", "content": reply_to(last)},
                                "finish_reason": "stop",
                            }
                        ],
                    }
                ).encode()
                send_json(self, data)

            def log_message(self, *args: object) -> None:
                return

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self.thread = threading.Thread(target=self.httpd.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


@dataclass
class Fleet:
    servers: list[str]
    """The servers' origins."""
    workers: list[subprocess.Popen[str]]
    processes: list[subprocess.Popen[str]]


def launch(home: Path, *args: str) -> subprocess.Popen[str]:
    """`autorecap ARGS` in a process of its own; what it prints goes to a log in `home`."""
    env = dict(
        os.environ,
        AUTORECAP_HOME=str(home),
        PYTHONPATH=str(REPO / "src"),
        SOAK_KEY="unused",
    )
    log = (home / f"{args[0]}-{time.monotonic_ns()}.log").open("w")
    try:
        return subprocess.Popen(
            [sys.executable, "-c", _MAIN, *args],
            stdout=log,
            stderr=subprocess.STDOUT,
            text=True,
            env=env,
        )
    finally:
        log.close()  # the child has its own copy


_MAIN = "import sys; from autorecap.cli import main; main(sys.argv[1:])"


def logs(home: Path) -> str:
    return "\n".join(f"--- {p.name}\n{p.read_text()[-4000:]}" for p in sorted(home.glob("*.log")))


def wait_for(condition: Callable[[], bool], what: str, limit: float = DEADLINE_S) -> None:
    deadline = time.monotonic() + limit
    while not condition():
        assert time.monotonic() < deadline, f"not within {limit:.0f} s: {what}"
        time.sleep(0.05)


@pytest.fixture
def fleet(
    postgres_url: str, home: Path, free_tcp_port_factory: Callable[[], int]
) -> Iterator[tuple[Fleet, ChatUpstream, PlausibleLLM]]:
    settings_store = open_store(postgres_url)  # where every process reads its settings
    profiles_of("", settings_store).set_many(
        {
            "scene_max_messages": 8,
            "auto_scene_break_minimum_scene_length": 2,
            "running_scene_recap_exclude_latest": 0,
        }
    )
    settings_store.close()
    upstream = ChatUpstream()
    llm = PlausibleLLM(delay_s=0.05)
    llm.__enter__()
    processes: list[subprocess.Popen[str]] = []
    try:
        servers = []
        for _ in range(2):
            port = free_tcp_port_factory()
            processes.append(
                launch(
                    home,
                    "serve",
                    "--db",
                    postgres_url,
                    "--no-worker",
                    "--upstream",
                    upstream.url,
                    "--port",
                    str(port),
                )
            )
            servers.append(f"http://127.0.0.1:{port}")
        workers = [
            launch(
                home,
                "worker",
                "--db",
                postgres_url,
                "--backend",
                "openai",
                "--base-url",
                llm.url,
                "--api-key-env",
                "SOAK_KEY",
                "--lease",
                str(LEASE_S),
            )
            for _ in range(2)
        ]
        processes += workers
        for origin in servers:
            wait_for(lambda origin=origin: _up(origin), f"{origin} answers", 30)
        yield Fleet(servers, workers, processes), upstream, llm
    finally:
        for process in processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in processes:
            try:
                process.wait(timeout=20)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait(timeout=5)
        llm.__exit__(None, None, None)
        upstream.close()
        print(logs(home))  # shown when the test failed


def _up(origin: str) -> bool:
    with contextlib.suppress(httpx.HTTPError):
        return httpx.get(origin + "/api/chats", timeout=2).status_code == 200
    return False


def ask(client: httpx.Client, origin: str, chat: str, messages: list[dict[str, str]]) -> str:
    response = client.post(
        f"{origin}/c/{chat}/v1/chat/completions", json={"model": "m", "messages": messages}
    )
    assert response.status_code == 200, response.text
    return str(response.json()["choices"][0]["message"]["content"])


def jobs_by_state(url: str) -> dict[str, int]:
    with psycopg.connect(url) as conn:
        return dict(conn.execute("SELECT state, count(*) FROM jobs GROUP BY state").fetchall())


def test_two_servers_and_two_workers_on_one_postgresql(
    postgres_url: str, fleet: tuple[Fleet, ChatUpstream, PlausibleLLM]
) -> None:
    crew, upstream, _ = fleet
    expected: dict[str, list[str]] = {}
    killed: list[str] = []
    victim = crew.workers[0]

    def kill_a_worker_mid_job() -> None:
        """SIGKILL the first worker once it holds a job (its lease then runs out)."""
        name = f"{socket.gethostname()}:{victim.pid}"
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline:
            with psycopg.connect(postgres_url) as conn:
                held = conn.execute(
                    "SELECT count(*) FROM jobs WHERE state = 'running' AND worker = %s", (name,)
                ).fetchone()
            if held and held[0]:
                victim.send_signal(signal.SIGKILL)
                victim.wait(10)
                killed.append(name)
                return
            time.sleep(0.01)

    def user(number: int) -> None:
        chat = f"user-{number}"
        history = [SYSTEM, *opening(number)]
        with httpx.Client(timeout=30) as client:
            for turn in range(TURNS):
                text = question(number, turn)
                history.append({"role": "user", "content": text})
                origin = crew.servers[(number + turn) % 2]
                answer = ask(client, origin, chat, history)
                assert answer == reply_to(text)
                history.append({"role": "assistant", "content": answer})
        expected[chat] = [m["content"] for m in history[1:]]

    killer = threading.Thread(target=kill_a_worker_mid_job)
    killer.start()
    with ThreadPoolExecutor(16) as pool:
        list(pool.map(user, range(USERS)))

    # One chat, the same request on both servers at once (a client that retried elsewhere).
    shared = [SYSTEM, *opening(99), {"role": "user", "content": question(99, 0)}]
    with httpx.Client(timeout=30) as client:
        start = threading.Barrier(2)
        answers: list[str] = []

        def both(origin: str) -> None:
            start.wait()
            answers.append(ask(client, origin, "shared", shared))

        pair = [threading.Thread(target=both, args=(origin,)) for origin in crew.servers]
        for thread in pair:
            thread.start()
        for thread in pair:
            thread.join(30)
        assert answers == [reply_to(question(99, 0))] * 2
        follow = [*shared, {"role": "assistant", "content": answers[0]}]
        follow.append({"role": "user", "content": question(99, 1)})
        assert ask(client, crew.servers[0], "shared", follow) == reply_to(question(99, 1))
        follow.append({"role": "assistant", "content": reply_to(question(99, 1))})
    expected["shared"] = [m["content"] for m in follow[1:]]

    killer.join(DEADLINE_S)
    assert killed, "no worker was caught holding a job"
    store = open_store(postgres_url)
    try:
        # A server saves a turn after the client has its answer: the last turns' saves (and
        # the jobs they queue) may still be on their way.
        deadline = time.monotonic() + DEADLINE_S
        while time.monotonic() < deadline and any(
            [m.text for m in store.load_chat(c).messages] != texts
            for c, texts in expected.items()
            if store.has_chat(c)
        ):
            time.sleep(0.1)
        wait_for(
            lambda: set(jobs_by_state(postgres_url)) == {"done"},
            "every job done (the killed worker's taken over after its lease)",
        )
        # No message lost or doubled.
        assert sorted(info.id for info in store.list_chats()) == sorted(expected)
        for chat_id, texts in expected.items():
            stored = store.load_chat(chat_id)
            assert [m.text for m in stored.messages] == texts, chat_id
            bare = [(i, m.id, m.text) for i, m in enumerate(stored.messages) if not get_memory(m)]
            if bare:
                with psycopg.connect(postgres_url) as conn:
                    jobs = conn.execute(
                        "SELECT id, target, state, attempts FROM jobs WHERE chat_id = %s "
                        "AND kind = 'message_recap' ORDER BY id",
                        (chat_id,),
                    ).fetchall()
                    rows = conn.execute(
                        "SELECT id, pos, rev FROM messages WHERE chat_id = %s ORDER BY pos",
                        (chat_id,),
                    ).fetchall()
                pytest.fail(f"{chat_id}: messages with no recap {bare}; jobs {jobs}; rows {rows}")
            current = running.current(stored)
            assert current is not None, f"{chat_id}: no running recap"
            assert current["content"], f"{chat_id}: an empty running recap"
            versions = stored.metadata["auto_recap_running_scene_recaps"]["versions"]
            folded = [v["new_scene_index"] for v in versions]
            assert folded == sorted(set(folded)), f"{chat_id}: a scene folded in twice"
        # Every job done exactly once: one row per job, each done; the killed worker's job
        # was taken over (a second attempt), its effect written once (above).
        with psycopg.connect(postgres_url) as conn:
            taken_over = conn.execute("SELECT count(*) FROM jobs WHERE attempts > 1").fetchone()
            doubles = conn.execute(
                "SELECT count(*) FROM (SELECT kind, chat_id, target FROM jobs "
                "WHERE kind = 'message_recap' GROUP BY kind, chat_id, target "
                "HAVING count(*) > 1) AS d"
            ).fetchone()
        assert taken_over == (taken_over[0],)
        assert taken_over[0] >= 1
        assert doubles == (0,), "a message's recap was queued twice"
        # Every chat's memory reached both servers.
        with httpx.Client(timeout=30) as client:
            for chat_id in expected:
                recap = running.current(store.load_chat(chat_id))
                assert recap is not None
                for origin in crew.servers:

                    def shows(
                        origin: str = origin,
                        chat_id: str = chat_id,
                        text: str = str(recap["content"]),
                    ) -> bool:
                        preview = client.get(f"{origin}/api/chats/{chat_id}/preview").json()
                        # in an injection's text as such: a recap of two scenes or more holds a
                        # line break, which the JSON of the whole preview writes as "\\n"
                        return any(text in i["text"] for i in preview["injections"])

                    wait_for(shows, f"{origin} injects the running recap of {chat_id}", 20)
    finally:
        store.close()
    for process in crew.processes:
        if process is not victim:
            assert process.poll() is None, "a process died: its log is printed below"
    assert upstream.prompts  # the proxies did call the model
