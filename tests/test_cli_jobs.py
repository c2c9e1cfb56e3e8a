"""`autorecap jobs`, `autorecap worker` and `recap --no-wait`, through the real entry point."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from autorecap.core import running
from autorecap.core.data import get_data, get_memory
from autorecap.jobs import JobQueue
from autorecap.jobs.handlers import enqueue_pipeline
from autorecap.jobs.refusals import REFUSALS_TO_STOP
from autorecap.profiles import Profiles, owner_settings_file
from autorecap.settings import Settings
from autorecap.stfiles.jsonl import read_chat, write_chat
from autorecap.store import SQLiteStore
from autorecap.testing import generate
from tests.recap.conftest import LLMServer
from tests.test_cli import run
from tests.test_pipeline import PROXY_VARIABLES

REPO = Path(__file__).resolve().parents[1]
ALL_STATES = "queued, running, done, failed, cancelled"


@pytest.fixture(autouse=True)
def _restore_signal_handlers(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """`worker` installs SIGTERM/SIGINT handlers in this process: put the old ones back. (And
    a wide console, so that table cells are not wrapped.)"""
    monkeypatch.setenv("COLUMNS", "200")
    saved = {signum: signal.getsignal(signum) for signum in (signal.SIGTERM, signal.SIGINT)}
    yield
    for signum, handler in saved.items():
        signal.signal(signum, handler)


@pytest.fixture
def llm_server(monkeypatch: pytest.MonkeyPatch) -> Iterator[LLMServer]:
    for name in PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")
    server = LLMServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


def words(text: str) -> str:
    """Rich wraps lines at 80 columns: compare text with whitespace collapsed."""
    return " ".join(text.split())


def store_chat(n: int, chat_id: str, seed: int = 1) -> list[int]:
    """Store a generated chat in this test's AUTORECAP_HOME; return its message ids."""
    store = SQLiteStore()
    store.import_chat(generate(n, seed=seed, chat_id=chat_id).chat)
    ids = [m.id for m in store.load_chat(chat_id).messages]
    store.close()
    assert all(i is not None for i in ids)
    return [int(i) for i in ids if i is not None]


def queue() -> JobQueue:
    return JobQueue(SQLiteStore())


def wait_until(condition: Callable[[], bool], timeout: float) -> bool:
    """Poll `condition` until it holds or `timeout` seconds pass (no duration is asserted)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.02)
    return condition()


# --- jobs list -------------------------------------------------------------------------------


def test_jobs_lists_counts_and_rows(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, "jobs")
    assert code == 0
    assert out.strip() == "0 queued, 0 running, 0 done, 0 failed, 0 cancelled"
    ids = store_chat(3, "tiny")
    code, out, err = run(capsys, "recap", "tiny", "--no-wait")
    assert code == 0, err
    assert "queued 4 job(s) for tiny" in words(out)
    code, out, _ = run(capsys, "jobs")
    assert code == 0
    assert out.splitlines()[0] == "4 queued, 0 running, 0 done, 0 failed, 0 cancelled"
    for message_id in ids:
        assert f"message_recap tiny (message id {message_id})" in out
    assert "detect_scenes tiny" in out
    assert out.count(" queued ") == 4
    assert out.count("0/6") == 4  # tries: none yet of max_retries + 1
    assert run(capsys, "jobs", "list")[1] == out
    code, out, _ = run(capsys, "jobs", "list", "--state", "failed")
    assert code == 0
    assert out.splitlines() == ["4 queued, 0 running, 0 done, 0 failed, 0 cancelled"]
    code, out, _ = run(capsys, "jobs", "list", "--chat", "other")
    assert out.strip() == "0 queued, 0 running, 0 done, 0 failed, 0 cancelled"


def test_jobs_list_rejects_an_unknown_state(capsys: pytest.CaptureFixture[str]) -> None:
    code, out, err = run(capsys, "jobs", "list", "--state", "bogus")
    assert code == 1
    assert out == ""
    assert err.strip() == f"error: unknown state 'bogus': use one of {ALL_STATES}"
    assert "Traceback" not in err


# --- retry and cancel ------------------------------------------------------------------------


def test_a_refusing_llm_costs_three_calls_and_every_failed_job_retries_at_once(
    capsys: pytest.CaptureFixture[str], llm_server: LLMServer
) -> None:
    store_chat(200, "long")
    assert run(capsys, "settings", "set", "llm_own_recap_tokens", "0")[0] == 0  # all asked
    assert run(capsys, "recap", "long", "--no-wait")[0] == 0
    for _ in range(20):
        llm_server.error(401, {"error": {"message": "invalid api key", "type": "auth"}})
    code, out, err = run(
        capsys,
        "worker",
        "--once",
        "--concurrency",
        "1",  # with more, the calls already made when the third refusal came back go on too
        "--backend",
        "openai",
        "--base-url",
        llm_server.url,
    )
    assert len(llm_server.requests) == REFUSALS_TO_STOP  # not one per message or batch
    assert "not sent: the LLM refused this chat's last 3 calls" in words(err)
    assert "autorecap jobs retry --failed" in words(err)
    failed = queue().list(states=("failed",))
    assert len(failed) > REFUSALS_TO_STOP

    code, out, err = run(capsys, "jobs", "retry")
    assert code != 0
    assert "give a job id, or --failed" in words(err)
    code, out, err = run(capsys, "jobs", "retry", "--failed", "--chat", "lnog")
    assert code != 0
    assert "no chat 'lnog' in the store" in words(err)
    code, out, err = run(capsys, "jobs", "retry", "--failed", "--chat", "long")
    assert code == 0, err
    assert out.strip() == f"{len(failed)} failed jobs of chat 'long' queued again"
    code, out, err = run(capsys, "worker", "--once")  # fixed: the offline engine this time
    assert code == 0, err
    counts = queue().counts()
    assert (counts["failed"], counts["queued"]) == (0, 0)
    assert all(get_memory(m) for m in SQLiteStore().load_chat("long").messages)


def test_retry_a_failed_job(capsys: pytest.CaptureFixture[str], llm_server: LLMServer) -> None:
    assert run(capsys, "settings", "set", "max_retries", "0")[0] == 0
    [message_id] = store_chat(1, "one")
    assert run(capsys, "recap", "one", "--no-wait")[0] == 0
    llm_server.error(400, {"error": {"message": "the prompt is too long", "type": "invalid"}})
    _, out, err = run(
        capsys, "worker", "--once", "--backend", "openai", "--base-url", llm_server.url
    )
    assert "2 job(s) done, 0 to retry, 1 failed" in words(out)
    assert (
        f"failed: message_recap one (message id {message_id}): the LLM server answered 400 "
        "(the prompt is too long)" in words(err)
    )
    assert len(llm_server.requests) == 1
    [failed] = queue().list(states=("failed",))
    assert (failed.kind, failed.target, failed.attempts) == ("message_recap", message_id, 1)

    code, out, _ = run(capsys, "jobs", "list", "--state", "failed")
    assert code == 0
    assert out.splitlines()[0] == "0 queued, 0 running, 2 done, 1 failed, 0 cancelled"
    assert f"message_recap one (message id {message_id})" in out
    assert "the LLM server answered 400" in out
    assert "running_recap" not in out

    code, out, err = run(capsys, "jobs", "retry", str(failed.id))
    assert code == 0, err
    assert out.strip() == f"job {failed.id} queued again"
    code, _, err = run(capsys, "jobs", "retry", str(failed.id))
    assert code == 1
    assert f"job {failed.id} is queued: only failed or cancelled jobs retry" in err

    code, out, err = run(capsys, "worker", "--once")  # the offline engine this time
    assert code == 0, err
    assert "1 job(s) done, 0 to retry, 0 failed" in words(out)
    assert queue().counts() == {"queued": 0, "running": 0, "done": 3, "failed": 0, "cancelled": 0}
    message = SQLiteStore().load_chat("one").messages[0]
    assert get_memory(message)
    assert get_data(message, "error") is None
    assert len(llm_server.requests) == 1


def test_cancel_a_queued_job(capsys: pytest.CaptureFixture[str]) -> None:
    ids = store_chat(3, "tiny")
    assert run(capsys, "recap", "tiny", "--no-wait")[0] == 0
    first = queue().list()[0]
    assert (first.kind, first.target) == ("message_recap", ids[0])
    code, out, err = run(capsys, "jobs", "cancel", str(first.id))
    assert code == 0, err
    assert out.strip() == f"job {first.id}: cancelled"
    code, _, err = run(capsys, "jobs", "cancel", str(first.id))
    assert code == 1
    assert f"error: job {first.id} is already cancelled" in err
    code, out, _ = run(capsys, "jobs", "list", "--state", "cancelled")
    assert out.splitlines()[0] == "3 queued, 0 running, 0 done, 0 failed, 1 cancelled"
    assert f"message_recap tiny (message id {ids[0]})" in out
    assert f"(message id {ids[1]})" not in out
    code, _, err = run(capsys, "worker", "--once")
    assert code == 0, err
    assert queue().get(first.id).state == "cancelled"
    messages = SQLiteStore().load_chat("tiny").messages
    assert [bool(get_memory(m)) for m in messages] == [False, True, True]


@pytest.mark.parametrize("action", ["retry", "cancel"])
def test_unknown_job_ids(capsys: pytest.CaptureFixture[str], action: str) -> None:
    code, out, err = run(capsys, "jobs", action, "999")
    assert code == 1
    assert out == ""
    assert err.strip() == "error: no job 999: `autorecap jobs list` shows the jobs"


# --- pause and resume ------------------------------------------------------------------------


@contextlib.contextmanager
def cli_process(home: Path, *args: str) -> Iterator[subprocess.Popen[str]]:
    """`autorecap ARGS...` in a child process; killed (if still running) and its pipes closed
    when the block ends."""
    env = dict(os.environ, AUTORECAP_HOME=str(home), PYTHONPATH=str(REPO / "src"))
    process = subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from autorecap.cli import main; main(sys.argv[1:])",
            *args,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=env,
    )
    try:
        yield process
    finally:
        process.kill()
        process.communicate(timeout=30)


def test_pause_then_worker_once_runs_nothing_and_resume_lets_it_run(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    """BUG (the last assertion): `worker --once` on a paused queue with jobs never returns:
    `Worker._loop` only stops when nothing is queued, and nothing is claimed while paused."""
    store_chat(3, "tiny")
    assert run(capsys, "recap", "tiny", "--no-wait")[0] == 0
    code, out, _ = run(capsys, "jobs", "pause")
    assert (code, out.strip()) == (0, "queue paused")
    code, out, _ = run(capsys, "jobs")
    assert out.splitlines()[0] == "4 queued, 0 running, 0 done, 0 failed, 0 cancelled  (paused)"
    with cli_process(home, "worker", "--once") as child:
        assert child.stderr is not None
        started = child.stderr.readline()
        assert started.startswith("worker "), started
        returned_while_paused = wait_until(lambda: child.poll() is not None, timeout=3)
        jobs = queue().list()
        assert [j.state for j in jobs] == ["queued"] * 4  # it ran nothing
        assert [j.attempts for j in jobs] == [0] * 4
        code, out, _ = run(capsys, "jobs", "resume")
        assert (code, out.strip()) == (0, "queue resumed")
        if not returned_while_paused:  # still waiting: now it runs the jobs and stops
            child.communicate(timeout=60)
            assert child.returncode == 0
    if returned_while_paused:
        code, out, err = run(capsys, "worker", "--once")
        assert code == 0, err
    assert queue().counts() == {"queued": 0, "running": 0, "done": 5, "failed": 0, "cancelled": 0}
    assert all(get_memory(m) for m in SQLiteStore().load_chat("tiny").messages)
    assert returned_while_paused, "`worker --once` did not return on a paused queue"


# --- recap --no-wait -------------------------------------------------------------------------


def test_recap_no_wait_needs_a_stored_chat(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    path = tmp_path / "story.jsonl"
    write_chat(generate(5, seed=1, chat_id="story").chat, path)
    before = path.read_bytes()
    code, out, err = run(capsys, "recap", str(path), "--no-wait")
    assert (code, out) == (1, "")
    assert "Traceback" not in err
    assert (
        "error: --no-wait needs a stored chat (a worker finds it in the store): "
        "`autorecap import FILE` first" in words(err)
    )
    assert path.read_bytes() == before
    assert queue().counts()["queued"] == 0


def test_recap_no_wait_then_worker_completes_the_recap(
    capsys: pytest.CaptureFixture[str], tmp_path: Path
) -> None:
    store_chat(60, "story", seed=1)
    code, out, err = run(capsys, "recap", "story", "--no-wait")
    assert code == 0, err
    assert "queued 61 job(s) for story; `autorecap worker` runs them" in words(out)
    exported = tmp_path / "before.jsonl"
    assert run(capsys, "export", "story", "-o", str(exported))[0] == 0
    assert not any(get_memory(m) for m in read_chat(exported).messages)  # queued only
    code, out, _ = run(capsys, "jobs")
    assert out.splitlines()[0] == "61 queued, 0 running, 0 done, 0 failed, 0 cancelled"

    code, out, err = run(capsys, "worker", "--once")
    assert code == 0, err
    assert "64 job(s) done, 0 to retry, 0 failed, 0 unchanged (no LLM call)" in words(out)
    code, out, _ = run(capsys, "jobs", "list", "--state", "queued", "--state", "failed")
    assert out.splitlines() == ["0 queued, 0 running, 64 done, 0 failed, 0 cancelled"]

    exported = tmp_path / "after.jsonl"
    code, _, err = run(capsys, "export", "story", "-o", str(exported))
    assert code == 0, err
    chat = read_chat(exported)
    assert all(get_memory(m) for m in chat.messages)
    versions = running.versions(chat)
    assert len(versions) == 1
    current = running.current(chat)
    assert current is not None
    assert current["content"]
    storage = chat.metadata["auto_recap_running_scene_recaps"]
    assert storage["current_version"] == versions[-1]["version"]


# --- worker --keys-file ----------------------------------------------------------------------


def test_worker_with_the_servers_keys_file_recaps_each_keys_chats_with_its_settings(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    """With API keys on, `alice/...` is alice's chat and takes alice's settings file; a
    worker beside `serve --keys-file --no-worker` does the same when given the keys file."""
    keys = home / "keys.txt"
    keys.write_text("alice: sk-alice-1\nbob: sk-bob-2\n", encoding="utf-8")
    Profiles(owner_settings_file("")).set("include_user_messages", False)  # the installation's
    Profiles(owner_settings_file("bob")).set("include_user_messages", False)
    ids = ("alice/story", "bob/story", "from-before-keys")
    for chat_id in ids:
        store_chat(8, chat_id, seed=3)
        enqueue_pipeline(queue(), SQLiteStore().load_chat(chat_id), Settings())
    code, _, err = run(capsys, "worker", "--once", "--keys-file", str(keys))
    assert code == 0, err
    alice, bob, older = (SQLiteStore().load_chat(chat_id).messages for chat_id in ids)
    assert {m.is_user for m in bob} == {True, False}
    assert all(get_memory(m) for m in alice)  # alice has no settings file: the defaults
    assert [bool(get_memory(m)) for m in bob] == [not m.is_user for m in bob]  # bob's own
    assert [bool(get_memory(m)) for m in older] == [not m.is_user for m in older]


def test_worker_with_a_keys_file_it_cannot_read_says_so(
    capsys: pytest.CaptureFixture[str], home: Path
) -> None:
    code, out, err = run(capsys, "worker", "--once", "--keys-file", str(home / "nope.txt"))
    assert (code, out) == (1, "")
    assert "Traceback" not in err
    assert f"cannot read the keys file {home / 'nope.txt'}" in words(err)
