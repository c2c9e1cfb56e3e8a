"""`autorecap store copy`: an installation moved from SQLite to PostgreSQL and back, row for
row (message ids, revisions, the job queue), each chat exporting byte for byte the same, and
the copy working on as the original did."""

from __future__ import annotations

from pathlib import Path

import pytest

from autorecap import get_memory, read_chat, set_data
from autorecap.core.model import Chat
from autorecap.jobs.queue import JobQueue
from autorecap.stfiles.jsonl import parse_chat
from autorecap.store import ChatStore, StoreError, open_store
from autorecap.store.copy import copy_store
from autorecap.testing import generate_chat
from tests.conftest import fixture_files
from tests.test_cli import run

HEADER = b'{"chat_metadata":{},"user_name":"unused","character_name":"unused"}'


def fill(store: ChatStore) -> dict[str, list[int | None]]:
    """Chats of every kind (SillyTavern's files, one with a line kept beside its messages, one
    edited, recapped and reshaped after its import) and a queue with a job done, one waiting
    for it, and the queue paused. Returns each chat's message ids."""
    for path in fixture_files()[:4]:
        store.import_chat(read_chat(path))
    kept = parse_chat(HEADER + b'\r\n{"mes":"a"}\r\n{bad\r\n', chat_id="k", lenient=True)
    store.import_chat(kept)
    store.import_chat(generate_chat(30, seed=4, chat_id="edited"))
    chat = store.load_chat("edited")
    set_data(chat.messages[3], "memory", "Mira hid the astrolabe under the galley floor.")
    del chat.messages[5]
    chat.messages.insert(0, chat.adopt({"name": "Narrator", "mes": "A new beginning."}))
    chat.metadata["note"] = "kept"
    store.save(chat, changed=[chat.messages[4]], header=True, structure=True)
    queue = JobQueue(store)
    first = queue.enqueue("message_recap", "edited", chat.messages[1].id)
    queue.enqueue("detect_scenes", "edited", depends_on=[first])
    done = queue.claim()
    assert done is not None
    queue.complete(done, input_hash="abc")
    queue.pause()
    return {i.id: [m.id for m in store.load_chat(i.id).messages] for i in store.list_chats()}


def test_sqlite_to_postgresql_and_back_row_for_row(tmp_path: Path, postgres_url: str) -> None:
    sqlite = open_store(str(tmp_path / "from.db"))
    postgres = open_store(postgres_url)
    back = open_store(str(tmp_path / "back.db"))
    try:
        ids = fill(sqlite)
        there = copy_store(sqlite, postgres)
        assert (there.chats, there.jobs, there.mismatched) == (len(ids), 2, [])
        again = copy_store(postgres, back)
        assert again.mismatched == []
        jobs_before = [j.__dict__ for j in JobQueue(sqlite).list()]
        for store in (postgres, back):
            for chat_id, message_ids in ids.items():
                copied = store.load_chat(chat_id)
                original = sqlite.load_chat(chat_id)
                assert [m.id for m in copied.messages] == message_ids
                assert copied.revs == original.revs
                assert store.export_chat(chat_id) == sqlite.export_chat(chat_id)
            assert [j.__dict__ for j in JobQueue(store).list()] == jobs_before
            assert JobQueue(store).paused
            assert store.search("edited", "astrolabe") != []
            # It works on: new ids and revisions come after the copied ones.
            chat = store.load_chat("edited")
            top_id = max(i for i in ids["edited"] if i is not None)
            top_rev = max(m._rev or 0 for m in chat.messages)
            chat.append({"name": "Mira", "mes": "After the move."})
            set_data(chat.messages[2], "memory", "A recap made after the move.")
            store.save(chat, changed=[chat.messages[2]], structure=True)
            read_again = store.load_chat("edited")
            newest = read_again.messages[-1].id
            assert newest is not None
            assert newest > top_id
            assert (read_again.messages[2]._rev or 0) > top_rev
            assert get_memory(read_again.messages[2]) == "A recap made after the move."
            queue = JobQueue(store)
            queue.resume()
            assert queue.enqueue("running_recap", "edited") > max(j["id"] for j in jobs_before)
    finally:
        for store in (sqlite, postgres, back):
            store.close()


def test_a_target_that_is_not_empty_is_refused(tmp_path: Path) -> None:
    source = open_store(str(tmp_path / "a.db"))
    target = open_store(str(tmp_path / "b.db"))
    try:
        source.import_chat(generate_chat(4, seed=1, chat_id="one"))
        target.import_chat(Chat(chat_id="already here"))
        with pytest.raises(StoreError, match="the target store is not empty"):
            copy_store(source, target)
    finally:
        source.close()
        target.close()


def test_the_command_copies_and_says_what(
    tmp_path: Path, postgres_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    source = open_store(str(tmp_path / "a.db"))
    try:
        source.import_chat(generate_chat(12, seed=2, chat_id="one"))
        source.import_chat(generate_chat(8, seed=3, chat_id="two"))
    finally:
        source.close()
    code, out, _ = run(
        capsys, "store", "copy", "--from", f"sqlite:///{tmp_path / 'a.db'}", "--to", postgres_url
    )
    said = " ".join(out.split())
    assert code == 0
    assert "copied 2 chat(s), 20 message(s) and 0 job(s)" in said
    assert "byte for byte the same" in said
    code, _, err = run(
        capsys, "store", "copy", "--from", str(tmp_path / "a.db"), "--to", postgres_url
    )
    assert code == 1
    assert "not empty" in err
