"""`autorecap serve --no-worker` with `autorecap worker` in a process of its own, on the same
database: the worker makes the recaps of the proxy's chats, the proxy reads them in and puts
them into the next request, and neither undoes the other's saves."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

import openai
import pytest
from fastapi.testclient import TestClient

from autorecap.core import running
from autorecap.core.data import get_data, get_memory
from autorecap.core.slots import SCENE_KEY
from autorecap.server.proxy.turns import ProxyChats
from autorecap.testing import generate_chat

from .conftest import StartProxy, Upstream
from .test_access import run_serve

REPO = Path(__file__).resolve().parents[2]
CHAT = "two-processes"
SYSTEM = {"role": "system", "content": "You are Mira, captain of the Heron."}
DEADLINE_S = 60.0


def turns(count: int) -> list[dict[str, str]]:
    """A generated role-play with scenes the offline engine finds (so a running recap)."""
    chat = generate_chat(count, seed=11)
    return [
        {"role": "user" if m.is_user else "assistant", "content": m.text} for m in chat.messages
    ]


def wait_for(condition: Callable[[], bool], what: str) -> None:
    deadline = time.monotonic() + DEADLINE_S
    while not condition():
        assert time.monotonic() < deadline, f"not within {DEADLINE_S:.0f} s: {what}"
        time.sleep(0.05)


def test_recaps_made_by_a_worker_process_reach_the_proxys_requests(
    start_proxy: StartProxy, upstream: Upstream, db_path: Path, home: Path
) -> None:
    proxy = start_proxy(worker=False)
    registry: ProxyChats = proxy.server.config.app.state.registry
    client = openai.OpenAI(base_url=proxy.chat_url(CHAT), api_key="test", max_retries=0, timeout=20)
    history = [SYSTEM, *turns(60)]
    first = client.chat.completions.create(model="m", messages=history)  # type: ignore[arg-type]
    history.append({"role": "assistant", "content": first.choices[0].message.content or ""})
    proxy.settled()
    assert registry.queue.counts(CHAT)["queued"] > 0
    env = dict(os.environ, AUTORECAP_HOME=str(home), PYTHONPATH=str(REPO / "src"))
    worker = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from autorecap.cli import main; main(sys.argv[1:])",
            "worker",
            "--db",
            str(db_path),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        counts = registry.queue.counts
        wait_for(
            lambda: counts(CHAT)["queued"] == 0 and counts(CHAT)["running"] == 0,
            "the worker process ran the proxy's jobs",
        )
        stored = proxy.stored(CHAT)
        assert running.current(stored) is not None, "the worker made no running recap"
        chat = registry.chat(CHAT)
        # The proxy read in what the worker saved: every recap, and the running recap.
        wait_for(
            lambda: (
                [get_memory(m) for m in chat.messages] == [get_memory(m) for m in stored.messages]
                and running.current(chat) == running.current(stored)
            ),
            "the proxy read the worker's recaps in",
        )
        assert any(get_memory(m) for m in chat.messages)
        session = registry.session(CHAT)
        wait_for(lambda: not session.stale, "the memory was refreshed after reading them in")
        assert any(get_data(m, "include") for m in chat.messages)
        memory = session.slots.value(SCENE_KEY)
        current = running.current(chat)
        assert current is not None
        assert current["content"] in memory

        # The next turn carries the memory, and saving it keeps the worker's recaps.
        reply = client.chat.completions.create(
            model="m",
            messages=[*history, {"role": "user", "content": "Where to now, captain?"}],  # type: ignore[list-item]
        )
        assert reply.choices[0].message.content
        sent = upstream.chat_requests[-1].contents
        assert any(memory in content for content in sent)
        after = proxy.stored(CHAT)
        assert len(after.messages) == len(stored.messages) + 2  # the question, the answer
        for before_message, after_message in zip(stored.messages, after.messages, strict=False):
            assert get_memory(after_message) == get_memory(before_message)
        assert running.current(after) == running.current(stored)
    finally:
        worker.send_signal(signal.SIGTERM)
        try:
            out, errors = worker.communicate(timeout=30)
        except subprocess.TimeoutExpired:
            worker.kill()
            out, errors = worker.communicate(timeout=10)
        client.close()
    assert worker.returncode == 0, errors
    assert "0 to retry, 0 failed" in out, out + errors


def test_serve_no_worker_runs_no_worker_but_reads_other_processes_in(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    db = tmp_path / "x.db"
    code, err, app = run_serve(capsys, monkeypatch, "--db", str(db), "--no-worker")
    assert code == 0, err
    assert f"run `autorecap worker --db {db}` beside it" in " ".join(err.split())
    with TestClient(app):
        names = {thread.name for thread in threading.enumerate()}
        assert "autorecap-server-worker" not in names
        assert "autorecap-watch" in names
    code, err, app = run_serve(capsys, monkeypatch, "--db", str(db))
    assert code == 0, err
    assert "autorecap worker" not in err
    with TestClient(app):
        assert "autorecap-server-worker" in {thread.name for thread in threading.enumerate()}
