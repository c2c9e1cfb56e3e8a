"""Settings kept in PostgreSQL, on a real server: every machine on the database reads the same
ones (a change on one reaches another's open chats and workers), a change made over another
one made meanwhile keeps both, the command line works on them with `--db`, and
`autorecap store copy` moves every owner's settings between the files of a SQLite installation
and the database."""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Iterator
from pathlib import Path

import orjson
import psycopg
import pytest

from autorecap.jobs.queue import JobQueue
from autorecap.jobs.runner import Worker
from autorecap.profiles import Profiles, profiles_of
from autorecap.recap.backends import make_backend
from autorecap.server.proxy.turns import ProxyChats
from autorecap.settings import SettingsError
from autorecap.store import ChatStore, StoreError, open_store
from autorecap.testing import generate_chat
from tests.test_cli import run


@pytest.fixture
def two_machines(postgres_url: str) -> Iterator[tuple[ChatStore, ChatStore]]:
    """Two stores on one database, as two machines have."""
    first, second = open_store(postgres_url), open_store(postgres_url)
    yield first, second
    first.close()
    second.close()


def eventually(check: Callable[[], bool], limit: float = 5.0) -> bool:
    deadline = time.monotonic() + limit
    while not check():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.01)
    return True


def test_settings_saved_on_one_machine_are_read_on_the_other(
    two_machines: tuple[ChatStore, ChatStore], home: Path
) -> None:
    here, there = (profiles_of("", store) for store in two_machines)
    assert here.path is None  # kept in the database, not in a file
    assert there.get("recall_max_tokens") != 321
    here.set("recall_max_tokens", 321)
    here.save_profile("Terse")
    here.bind("Terse", chat="tavern")
    assert eventually(lambda: there.reload() and there.get("recall_max_tokens") == 321)
    assert there.get("recall_max_tokens") == 321
    assert there.profile_names() == ["Default", "Terse"]
    assert there.profile_for("tavern") == "Terse"
    assert not (home / "settings.json").exists()
    # Each owner's own: a key's settings are not the installation's.
    alice = profiles_of("alice", two_machines[1])
    assert alice.get("recall_max_tokens") != 321
    alice.set("recall_max_tokens", 99)
    assert profiles_of("", two_machines[1]).get("recall_max_tokens") == 321
    assert two_machines[0].settings_owners() == ["", "alice"]


def test_a_change_made_over_another_machines_change_keeps_both(
    two_machines: tuple[ChatStore, ChatStore],
) -> None:
    here, there = (profiles_of("", store) for store in two_machines)
    there.get("recall_max_tokens")  # read before the other machine's change
    here.set("recall_max_tokens", 222)
    # As if its notice had not arrived yet: `there` changes its old copy, is refused, reads
    # the settings again and makes its change on them.
    there.place.changed = lambda: False  # type: ignore[method-assign]
    there.set("scene_max_messages", 77)
    fresh = profiles_of("", two_machines[0])
    assert fresh.get("recall_max_tokens") == 222
    assert fresh.get("scene_max_messages") == 77


def test_a_place_that_keeps_changing_is_a_clear_error(
    two_machines: tuple[ChatStore, ChatStore],
) -> None:
    here, there = (profiles_of("", store) for store in two_machines)
    there.get("recall_max_tokens")
    real_write = there.place.write

    def write_after_another(text: str) -> None:
        here.set("recall_max_tokens", here.get("recall_max_tokens") + 1)
        real_write(text)

    there.place.changed = lambda: False  # type: ignore[method-assign]
    there.place.write = write_after_another  # type: ignore[method-assign]
    with pytest.raises(SettingsError, match="kept changing while this change was made"):
        there.set("scene_max_messages", 77)


def test_a_sqlite_installation_keeps_its_settings_in_files(tmp_path: Path, home: Path) -> None:
    store = open_store(str(tmp_path / "chats.db"))
    try:
        profiles = profiles_of("", store)
        assert profiles.path == home / "settings.json"
        profiles.set("recall_max_tokens", 123)
        assert json.loads((home / "settings.json").read_text())["profiles"]["Default"] == {
            "recall_max_tokens": 123
        }
        assert profiles_of("bob", store).path == home / "users" / "bob" / "settings.json"
    finally:
        store.close()


def test_the_command_line_works_on_the_databases_settings(
    postgres_url: str,
    home: Path,
    capsys: pytest.CaptureFixture[str],
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    code, out, err = run(
        capsys, "settings", "set", "recall_max_tokens", "456", "--db", postgres_url
    )
    assert (code, err) == (0, "")
    assert "recall_max_tokens = 456" in out
    assert not (home / "settings.json").exists()
    monkeypatch.setenv("AUTORECAP_DB", postgres_url)
    code, out, _ = run(capsys, "settings", "get", "recall_max_tokens")
    assert (code, out.strip()) == (0, "456")
    code, out, _ = run(capsys, "settings", "profile", "save", "Slow")
    code, out, _ = run(capsys, "settings", "profile", "list")
    assert "Slow" in out
    monkeypatch.delenv("AUTORECAP_DB")
    code, out, _ = run(capsys, "settings", "get", "recall_max_tokens")
    assert out.strip() != "456"  # the files of this machine: untouched


def request(text: str) -> bytes:
    return orjson.dumps({"model": "m", "messages": [{"role": "user", "content": text}]})


def test_a_change_on_one_server_reaches_the_other_servers_open_chats_and_workers(
    postgres_url: str,
) -> None:
    stores = [open_store(postgres_url) for _ in range(3)]
    first, second = (ProxyChats(store, JobQueue(store)) for store in stores[:2])
    try:
        second.finish(second.begin("tavern", request("Hello.")), "Hi.")
        opened = second.session("tavern", create=False)
        assert opened.settings.recall_max_tokens != 654
        worker = Worker(JobQueue(stores[2]), lambda s: make_backend(s, backend="offline"))
        chat = stores[2].load_chat("tavern")
        assert worker.settings_for(chat).recall_max_tokens != 654
        first.profiles_for("").set("recall_max_tokens", 654)  # the API of the first server

        def reached() -> bool:
            second.outside.settings_changed()  # what its watcher thread does every 50 ms
            return opened.settings.recall_max_tokens == 654

        assert eventually(reached)
        assert eventually(lambda: worker.settings_for(chat).recall_max_tokens == 654)
    finally:
        first.close()
        second.close()
        for store in stores:
            store.close()


# --- autorecap store copy ------------------------------------------------------------------------


def test_store_copy_moves_every_owners_settings_and_back(
    tmp_path: Path, postgres_url: str, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = open_store(str(tmp_path / "a.db"))
    try:
        source.import_chat(generate_chat(6, seed=2, chat_id="one"))
        Profiles().set("recall_max_tokens", 111)
        profiles_of("alice", source).set("scene_max_messages", 33)
    finally:
        source.close()
    files = {
        "": (home / "settings.json").read_text(),
        "alice": (home / "users" / "alice" / "settings.json").read_text(),
    }
    code, out, err = run(
        capsys, "store", "copy", "--from", str(tmp_path / "a.db"), "--to", postgres_url
    )
    assert (code, err) == (0, "")
    assert "settings: the installation's, 'alice' (2 copied" in " ".join(out.split())
    postgres = open_store(postgres_url)
    try:
        assert {o: postgres.read_settings(o)[0] for o in ("", "alice")} == files  # type: ignore[index]
        assert profiles_of("alice", postgres).get("scene_max_messages") == 33
    finally:
        postgres.close()
    # And back, into another machine's home: the files come back as they were.
    other_home = tmp_path / "other-home"
    with pytest.MonkeyPatch.context() as env:
        env.setenv("AUTORECAP_HOME", str(other_home))
        code, out, err = run(
            capsys, "store", "copy", "--from", postgres_url, "--to", str(tmp_path / "b.db")
        )
        assert (code, err) == (0, "")
        assert (other_home / "settings.json").read_text() == files[""]
        assert (other_home / "users" / "alice" / "settings.json").read_text() == files["alice"]


def test_store_copy_never_replaces_settings_already_there(
    tmp_path: Path, postgres_url: str, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    postgres = open_store(postgres_url)
    try:
        postgres.import_chat(generate_chat(6, seed=2, chat_id="one"))
        profiles_of("", postgres).set("recall_max_tokens", 111)
    finally:
        postgres.close()
    Profiles().set("recall_max_tokens", 222)  # this machine's own, different
    target = tmp_path / "b.db"
    code, _, err = run(capsys, "store", "copy", "--from", postgres_url, "--to", str(target))
    assert code == 1
    assert "already holds other settings" in err
    assert "--no-settings" in err
    copied = open_store(str(target))
    try:
        assert copied.list_chats() == []  # refused before anything moved
    finally:
        copied.close()
    assert Profiles().get("recall_max_tokens") == 222
    code, out, err = run(
        capsys, "store", "copy", "--from", postgres_url, "--to", str(target), "--no-settings"
    )
    assert (code, err) == (0, "")
    assert "settings:" not in out
    assert Profiles().get("recall_max_tokens") == 222


# --- what a review found ----------------------------------------------------------------------


def test_a_change_read_elsewhere_first_still_reaches_the_open_chats(postgres_url: str) -> None:
    stores = [open_store(postgres_url) for _ in range(2)]
    first, second = (ProxyChats(store, JobQueue(store)) for store in stores)
    try:
        second.finish(second.begin("tavern", request("Hello.")), "Hi.")
        opened = second.session("tavern", create=False)
        heard = stores[1].settings_version()
        first.profiles_for("").set("recall_max_tokens", 654)
        assert eventually(lambda: stores[1].settings_version() != heard)
        # Before the watcher looks, another chat opened there reads the new settings...
        second.finish(second.begin("other", request("Yo.")), "Hey.")
        assert second.session("other", create=False).settings.recall_max_tokens == 654
        # ...which must not keep them from the chat already open.
        second.outside.settings_changed()
        assert opened.settings.recall_max_tokens == 654
    finally:
        first.close()
        second.close()
        for store in stores:
            store.close()


def test_a_change_saved_while_the_listener_reconnects_is_read(postgres_url: str) -> None:
    here_store, there_store = open_store(postgres_url), open_store(postgres_url)
    try:
        here, there = profiles_of("", here_store), profiles_of("", there_store)
        there.get("recall_max_tokens")
        before = there_store.settings_version()
        with psycopg.connect(postgres_url, autocommit=True) as conn:
            pids = [
                row[0]
                for row in conn.execute(
                    "SELECT pid FROM pg_stat_activity WHERE query LIKE 'LISTEN autorecap_settings%'"
                )
            ]
            conn.execute("SELECT pg_terminate_backend(%s)", (max(pids),))  # there's listener
        assert eventually(lambda: there_store.settings_version() != before)
        there.reload()  # reads at the break...
        here.set("recall_max_tokens", 555)  # ...and this is saved before it listens again
        assert eventually(lambda: there.reload() and there.get("recall_max_tokens") == 555, 5)
    finally:
        here_store.close()
        there_store.close()


def test_a_change_made_of_another_change_keeps_the_other_machines(
    two_machines: tuple[ChatStore, ChatStore],
) -> None:
    here, there = (profiles_of("", store) for store in two_machines)
    there.get("chats_enabled")
    here.set_chat_enabled("chat-B", True)
    there.place.changed = lambda: False  # type: ignore[method-assign]
    there.set_chat_enabled("chat-A", True)  # made of `set`: read anew as a whole
    fresh = profiles_of("", two_machines[0])
    assert fresh.get("chats_enabled") == {"chat-A": True, "chat-B": True}


def test_a_change_that_could_not_be_saved_is_not_kept(
    two_machines: tuple[ChatStore, ChatStore], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = two_machines[0]
    profiles = profiles_of("", store)
    before = profiles.get("recall_max_tokens")

    def unreachable(*args: object) -> int:
        raise StoreError("the database is unreachable")

    monkeypatch.setattr(store, "write_settings", unreachable)
    with pytest.raises(StoreError, match="unreachable"):
        profiles.set("recall_max_tokens", 999)
    assert profiles.get("recall_max_tokens") == before
    monkeypatch.undo()
    profiles.set("scene_max_messages", 7)  # a later change saves only itself
    assert profiles_of("", two_machines[1]).get("recall_max_tokens") == before


def test_commands_on_a_stored_chat_read_the_settings_autorecap_db_names(
    postgres_url: str, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    store = open_store(postgres_url)
    store.import_chat(generate_chat(6, seed=2, chat_id="one"))
    store.close()
    monkeypatch.setenv("AUTORECAP_DB", postgres_url)
    assert run(capsys, "settings", "set", "context_size", "3333")[0] == 0
    code, _, err = run(capsys, "inject", "one")
    assert code == 0
    assert "of 3333" in " ".join(err.split())


def test_store_copy_refuses_settings_that_do_not_read(
    tmp_path: Path, postgres_url: str, home: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    source = open_store(str(tmp_path / "a.db"))
    source.import_chat(generate_chat(4, seed=1, chat_id="one"))
    source.close()
    (home / "settings.json").write_text(
        json.dumps({"profiles": {"Default": {"recall_max_tokens": -5}}})
    )
    code, _, err = run(
        capsys, "store", "copy", "--from", str(tmp_path / "a.db"), "--to", postgres_url
    )
    assert code == 1
    said = " ".join(err.split())
    assert "the source's settings of the installation" in said
    assert "recall_max_tokens" in said
    assert "--no-settings" in said
    target = open_store(postgres_url)
    try:
        assert target.list_chats() == []
        assert target.settings_owners() == []
    finally:
        target.close()
