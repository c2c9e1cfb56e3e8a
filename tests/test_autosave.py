"""open_chat(): debounced saves (seed 004), flush, close, exit, and crashes of real processes."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import sys
import textwrap
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from autorecap import AutorecapError, get_data, read_chat, set_data, write_chat
from autorecap.autosave import OpenChat, flush_all, open_chat
from autorecap.store import SQLiteStore
from autorecap.testing import generate_chat

REPO = Path(__file__).resolve().parents[1]


def wait_until(condition: Callable[[], bool], timeout: float = 10.0) -> bool:
    """Poll `condition` until it holds or `timeout` seconds pass (no duration is asserted)."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if condition():
            return True
        time.sleep(0.01)
    return condition()


@pytest.fixture
def chat_file(tmp_path: Path) -> Path:
    path = tmp_path / "story.jsonl"
    write_chat(generate_chat(50, seed=1, chat_id="story"), path)
    return path


@pytest.fixture
def stored(home: Path) -> SQLiteStore:
    store = SQLiteStore()
    store.import_chat(generate_chat(50, seed=2, chat_id="stored"))
    return store


def memory_on_disk(path: Path, index: int) -> object:
    return get_data(read_chat(path).messages[index], "memory")


# seed 004: "Multiple writes are batched into a single backend save operation"
def test_writes_are_batched_into_one_debounced_save(chat_file: Path) -> None:
    chat = open_chat(chat_file, debounce_ms=200)
    for i in range(5):
        set_data(chat.messages[i], "memory", f"recap {i}")
    assert chat.dirty
    assert memory_on_disk(chat_file, 0) != "recap 0"  # not saved before the debounce fires
    assert wait_until(lambda: not chat.dirty)
    assert chat.saves == 1
    assert [memory_on_disk(chat_file, i) for i in range(5)] == [f"recap {i}" for i in range(5)]
    chat.close()


def test_each_write_restarts_the_debounce(chat_file: Path) -> None:
    chat = open_chat(chat_file, debounce_ms=300)
    for i in range(6):
        set_data(chat.messages[0], "memory", f"burst {i}")
        time.sleep(0.1)  # shorter than the debounce: the timer keeps restarting
    assert chat.saves == 0
    assert wait_until(lambda: chat.saves == 1)
    assert memory_on_disk(chat_file, 0) == "burst 5"
    chat.close()


def test_flush_saves_at_once_and_close_stops_autosaving(chat_file: Path) -> None:
    chat = open_chat(chat_file, debounce_ms=60_000)
    set_data(chat.messages[3], "memory", "flushed")
    assert chat.flush() == 1
    assert memory_on_disk(chat_file, 3) == "flushed"
    assert chat.flush() == 0  # nothing pending
    chat.close()
    set_data(chat.messages[3], "memory", "after close")
    assert memory_on_disk(chat_file, 3) == "flushed"


def test_context_manager_saves_on_exit_including_direct_edits(chat_file: Path) -> None:
    with open_chat(chat_file, debounce_ms=60_000) as chat:
        chat.messages[0]["mes"] = "edited directly, not through the data API"
        set_data(chat.messages[1], "memory", "through the API")
    fresh = read_chat(chat_file)
    assert fresh.messages[0]["mes"] == "edited directly, not through the data API"
    assert get_data(fresh.messages[1], "memory") == "through the API"


def test_stored_chat_saves_only_changed_rows(stored: SQLiteStore) -> None:
    chat = open_chat("stored", store=stored, debounce_ms=60_000)
    rev_before = stored._db.execute("SELECT max(rev) FROM messages").fetchone()[0]
    set_data(chat.messages[7], "memory", "one row")
    assert chat.flush() == 1
    # One message row written (its recall index row follows it by trigger).
    written = stored._db.execute("SELECT count(*) FROM messages WHERE rev > ?", (rev_before,))
    assert written.fetchone()[0] == 1
    chat.messages.append(chat.chat.adopt({"name": "Tomas", "is_user": True, "mes": "hi"}))
    chat.touch()
    assert chat.flush() >= 1
    chat.close()
    again = stored.load_chat("stored")
    assert get_data(again.messages[7], "memory") == "one row"
    assert again.messages[-1]["mes"] == "hi"
    assert again.messages[-1].id is not None


def test_open_chat_finds_stored_chats_in_autorecap_home(stored: SQLiteStore) -> None:
    with open_chat("stored", debounce_ms=0) as chat:  # 0: every write saves at once
        set_data(chat.messages[0], "memory", "saved immediately")
        assert not chat.dirty
    assert get_data(SQLiteStore().load_chat("stored").messages[0], "memory") == (
        "saved immediately"
    )


def test_open_chat_unknown_target_is_a_clear_error(home: Path) -> None:
    with pytest.raises(AutorecapError, match="'nothing-here' is neither a chat file nor a stored"):
        open_chat("nothing-here")


def test_flush_all_saves_every_open_chat(chat_file: Path, stored: SQLiteStore) -> None:
    one = open_chat(chat_file, debounce_ms=60_000)
    two = open_chat("stored", store=stored, debounce_ms=60_000)
    set_data(one.messages[0], "memory", "one")
    set_data(two.messages[0], "memory", "two")
    assert flush_all() == []
    assert memory_on_disk(chat_file, 0) == "one"
    assert get_data(stored.load_chat("stored").messages[0], "memory") == "two"
    one.close()
    two.close()


def test_a_failed_save_keeps_changes_pending(
    chat_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    chat = open_chat(chat_file, debounce_ms=60_000)
    set_data(chat.messages[0], "memory", "retry me")

    def full_disk(*args: object) -> None:
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(os, "replace", full_disk)
    with pytest.raises(AutorecapError, match="No space left"):
        chat.flush()
    assert chat.dirty
    monkeypatch.undo()
    assert chat.flush() == 1
    assert memory_on_disk(chat_file, 0) == "retry me"
    chat.close()


def test_open_chat_is_an_open_chat_of_the_file(chat_file: Path) -> None:
    chat = open_chat(chat_file)
    assert isinstance(chat, OpenChat)
    assert chat.id == "story"
    assert chat.metadata is chat.chat.metadata
    assert "story.jsonl" in repr(chat)
    chat.close()


# --- real processes ------------------------------------------------------------------------


@contextlib.contextmanager
def child(code: str, home: Path) -> Iterator[subprocess.Popen[str]]:
    """Run `code` in a new Python process with this test's AUTORECAP_HOME; it is killed (if
    still running) and its pipes closed when the block ends."""
    env = dict(os.environ, AUTORECAP_HOME=str(home), PYTHONPATH=str(REPO / "src"))
    process = subprocess.Popen(
        [sys.executable, "-c", textwrap.dedent(code)],
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


def wait_for_line(process: subprocess.Popen[str], expected: str) -> None:
    assert process.stdout is not None
    line = process.stdout.readline().strip()
    assert line == expected, (
        f"child said {line!r}; stderr: {process.stderr.read() if process.stderr else ''}"
    )


@pytest.mark.parametrize("target", ["file", "store"])
def test_sigkill_right_after_flush_loses_nothing(
    target: str, chat_file: Path, stored: SQLiteStore, home: Path
) -> None:
    name = str(chat_file) if target == "file" else "stored"
    with child(
        f"""
        import sys, time
        from autorecap import set_data
        from autorecap.autosave import open_chat
        chat = open_chat({name!r}, debounce_ms=60_000)
        for i in range(10):
            set_data(chat.messages[i], "memory", f"survives {{i}}")
        chat.flush()
        print("FLUSHED", flush=True)
        time.sleep(60)
        """,
        home,
    ) as process:
        wait_for_line(process, "FLUSHED")
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGKILL
    reopened = read_chat(chat_file) if target == "file" else SQLiteStore().load_chat("stored")
    assert [get_data(reopened.messages[i], "memory") for i in range(10)] == [
        f"survives {i}" for i in range(10)
    ]


@pytest.mark.parametrize("target", ["file", "store"])
def test_sigterm_before_the_debounce_fired_loses_nothing(
    target: str, chat_file: Path, stored: SQLiteStore, home: Path
) -> None:
    name = str(chat_file) if target == "file" else "stored"
    with child(
        f"""
        import time
        from autorecap import set_data
        from autorecap.autosave import install_signal_handlers, open_chat
        install_signal_handlers()  # what the CLI and the server do
        chat = open_chat({name!r}, debounce_ms=60_000)
        set_data(chat.messages[5], "memory", "pending when SIGTERM came")
        print("WRITTEN", flush=True)
        time.sleep(60)
        """,
        home,
    ) as process:
        wait_for_line(process, "WRITTEN")
        process.send_signal(signal.SIGTERM)
        process.wait(timeout=30)
    assert process.returncode == -signal.SIGTERM  # the default action still ends the process
    reopened = read_chat(chat_file) if target == "file" else SQLiteStore().load_chat("stored")
    assert get_data(reopened.messages[5], "memory") == "pending when SIGTERM came"


def test_interpreter_exit_flushes(chat_file: Path, home: Path) -> None:
    with child(
        f"""
        from autorecap import set_data
        from autorecap.autosave import open_chat
        chat = open_chat({str(chat_file)!r}, debounce_ms=60_000)
        set_data(chat.messages[2], "memory", "saved at exit")
        """,
        home,
    ) as process:
        assert process.wait(timeout=30) == 0
    assert memory_on_disk(chat_file, 2) == "saved at exit"


@pytest.mark.parametrize("delay", [0.02, 0.09, 0.17, 0.26, 0.4])
def test_a_process_killed_mid_write_leaves_a_whole_file(
    tmp_path: Path, home: Path, delay: float
) -> None:
    path = tmp_path / "big.jsonl"
    write_chat(generate_chat(3000, seed=9, chat_id="big"), path)
    original = path.read_bytes()
    with child(
        f"""
        from autorecap import read_chat, set_data, write_chat
        chat = read_chat({str(path)!r})
        print("READY", flush=True)
        i = 0
        while True:
            i += 1
            for message in chat.messages[::50]:
                set_data(message, "memory", f"round {{i}}")
            write_chat(chat)
        """,
        home,
    ) as process:
        wait_for_line(process, "READY")
        time.sleep(delay)
        process.send_signal(signal.SIGKILL)
        process.wait(timeout=30)
    chat = read_chat(path)  # it parses: never a torn file
    rounds = {get_data(m, "memory") for m in chat.messages[::50]}
    if path.read_bytes() != original:  # killed after at least one complete write
        assert len(rounds) == 1  # one whole version, not a mix of two
        assert next(iter(rounds)).startswith("round ")
    assert len(chat.messages) == 3000
