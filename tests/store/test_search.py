"""The store's recall index (`store.search`), on SQLite (FTS5) and PostgreSQL (tsvector): what it
finds, kept in step with every save by triggers, chat by chat; and the in-memory index of a
chat outside the store."""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from autorecap import Chat, ChatStore, SQLiteStore, open_store, set_data
from autorecap.core.scenes import add_recap_version, mark_break
from autorecap.store.migrations import MIGRATIONS, schema_version
from autorecap.store.search import MemoryIndex, match_expression

TEXTS = (
    "Tomas coiled the ropes on the foredeck.",
    "Mira hid the brass astrolabe under the galley floorboards.",
    "The wind turned cold over the harbour.",
    "They argued about the price of coal.",
)


def message(text: str, *, hidden: bool = True, user: bool = False) -> dict[str, Any]:
    return {
        "name": "Tomas" if user else "Captain Mira",
        "is_user": user,
        "is_system": hidden,
        "send_date": "2023-05-08T10:00:00.000Z",
        "mes": text,
        "extra": {},
    }


def make_chat(chat_id: str, texts: tuple[str, ...] | list[str] = TEXTS) -> Chat:
    return Chat([message(text, user=i % 2 == 0) for i, text in enumerate(texts)], chat_id=chat_id)


@pytest.fixture
def store(db_url: str) -> Iterator[ChatStore]:
    """The store, on SQLite (FTS5, BM25) and on PostgreSQL (tsvector, ts_rank)."""
    opened = open_store(db_url)
    yield opened
    opened.close()


def index_rows(store: ChatStore) -> int:
    """How many messages the recall index holds (on PostgreSQL, a column of the messages)."""
    sql = (
        "SELECT count(*) FROM recall_index"
        if store.dialect == "sqlite"
        else "SELECT count(*) FROM messages WHERE recall IS NOT NULL"
    )
    return int(store.run(lambda db: db.execute(sql).fetchone()[0]))


def stored(store: ChatStore, chat_id: str = "c", texts: tuple[str, ...] = TEXTS) -> Chat:
    """Import a chat and read it back (its messages then carry their store ids)."""
    store.import_chat(make_chat(chat_id, texts))
    return store.load_chat(chat_id)


def found(store: ChatStore, chat_id: str, query: str) -> list[int]:
    return [message_id for message_id, _ in store.search(chat_id, query)]


def test_an_imported_message_is_found_by_a_rare_word_of_its_text(store: ChatStore) -> None:
    chat = stored(store)
    hits = store.search("c", "astrolabe")
    assert [message_id for message_id, _ in hits] == [chat.messages[1].id]
    assert hits[0][1] > 0
    assert found(store, "c", "Where did she put the ASTROLABE?") == [chat.messages[1].id]


def test_the_best_match_comes_first(store: ChatStore) -> None:
    chat = stored(
        store,
        texts=(
            "The brass fittings shone.",
            "The brass astrolabe and the brass compass, both brass.",
            "Nothing of note.",
        ),
    )
    hits = store.search("c", "brass astrolabe")
    assert hits[0][0] == chat.messages[1].id
    assert set(found(store, "c", "brass astrolabe")) == {m.id for m in chat.messages[:2]}
    scores = [score for _, score in hits]
    assert scores == sorted(scores, reverse=True)


def test_a_word_few_messages_hold_outweighs_one_that_many_hold(store: ChatStore) -> None:
    """ "Sefa" is in most messages, "cistern" in one: of two messages that each say one of them
    once in as many words, the one with "cistern" answers "Sefa at the cistern" first; so does
    one that says it once before one that says "Sefa" three times in fewer words."""
    chat = stored(
        store,
        texts=(
            "Sefa! Sefa, wait! Sefa!",
            "Sefa lay down by the door.",
            "The cistern lay down by the door.",
            *(f"Sefa counted the camels again, {i} of them." for i in range(8)),
        ),
    )
    hits = [message_id for message_id, _ in store.search("c", "Sefa at the cistern")]
    assert hits[0] == chat.messages[2].id


def test_a_code_few_messages_hold_ranks_the_messages_that_hold_it_first(
    store: ChatStore,
) -> None:
    """A code searched as a phrase ("14-02-27") counts only in messages that hold it whole:
    the two that do come before those that say the name, however often."""
    chat = stored(
        store,
        texts=(
            "Sefa said the code was 14-02-27.",
            "Sefa! Sefa, wait! Sefa!",
            *(f"Sefa counted the camels, {i} of them." for i in range(3)),
            "The code 14-02-27 opened it.",
        ),
    )
    first_two = found(store, "c", "Sefa 14-02-27")[:2]
    assert sorted(first_two) == sorted([chat.messages[0].id, chat.messages[5].id])


def test_an_irregular_verb_finds_its_other_forms_without_crowding_out_the_words_asked(
    store: ChatStore,
) -> None:
    chat = stored(
        store,
        texts=(
            "She paid eleven silver marks for it.",
            "She tucked the silver key into the lining of the captain's old coat.",
            "Nothing of note.",
        ),
    )
    # "pay" and "paid" are not one stem.
    assert found(store, "c", "What did she pay?") == [chat.messages[0].id]
    # The forms of "hide" and "stole" are looked for besides the six words asked, not instead.
    asked = "Where did Mara hide the silver key she stole from the captain?"
    assert chat.messages[1].id in found(store, "c", asked)


def test_limit_caps_the_hits(store: ChatStore) -> None:
    stored(store, texts=tuple(f"The kestrel flew past mark {i}." for i in range(10)))
    assert len(store.search("c", "kestrel")) == 10
    assert len(store.search("c", "kestrel", limit=3)) == 3


def test_a_message_is_found_by_a_word_only_in_its_recap(store: ChatStore) -> None:
    chat = stored(store)
    target = chat.messages[2]
    assert found(store, "c", "quartermaster") == []
    set_data(target, "memory", "Mira named Tomas quartermaster.")
    store.save(chat, changed=[target])
    assert found(store, "c", "quartermaster") == [target.id]
    assert found(store, "c", "harbour") == [target.id]  # its text is still indexed too


def test_a_recap_read_from_the_legacy_namespace_is_found(store: ChatStore) -> None:
    chat = make_chat("c")
    chat.messages[0]["extra"] = {"auto_summarize_memory": {"memory": "An old recap of okapis."}}
    store.import_chat(chat)
    assert found(store, "c", "okapis") == [store.load_chat("c").messages[0].id]


def test_a_message_is_found_by_a_word_only_in_its_scene_recap(store: ChatStore) -> None:
    chat = stored(store)
    end = chat.messages[3]
    mark_break(end)
    add_recap_version(end, "The crew crossed the Saltmarsh at night.", scene_hash="h")
    store.save(chat, changed=[end])
    assert found(store, "c", "saltmarsh") == [end.id]


def test_an_edited_message_is_found_by_its_new_word_and_not_its_old_one(
    store: ChatStore,
) -> None:
    chat = stored(store)
    target = chat.messages[1]
    target["mes"] = "Mira hid the silver sextant under the galley floorboards."
    store.save(chat, changed=[target])
    assert found(store, "c", "sextant") == [target.id]
    assert found(store, "c", "astrolabe") == []
    # And back: the row as imported is indexed again.
    target["mes"] = TEXTS[1]
    store.save(chat, changed=[target])
    assert found(store, "c", "astrolabe") == [target.id]
    assert found(store, "c", "sextant") == []


def test_a_deleted_message_is_not_found(store: ChatStore) -> None:
    chat = stored(store)
    gone, kept = chat.messages[1], chat.messages[2]
    del chat.messages[1]
    store.save(chat, structure=True)
    assert found(store, "c", "astrolabe") == []
    assert found(store, "c", "harbour") == [kept.id]
    assert gone.id not in found(store, "c", "galley floorboards brass")


def test_an_appended_message_is_found_once_saved(store: ChatStore) -> None:
    chat = stored(store)
    added = chat.append(message("A zeppelin drifted over the docks."))
    store.save(chat, structure=True)
    assert added.id is not None
    assert found(store, "c", "zeppelin") == [added.id]


def test_a_deleted_or_replaced_chat_leaves_nothing_in_the_index(store: ChatStore) -> None:
    stored(store, "gone")
    stored(store, "other")
    store.delete_chat("gone")
    assert found(store, "gone", "astrolabe") == []
    assert len(found(store, "other", "astrolabe")) == 1
    store.import_chat(make_chat("other", ["A quiet night at anchor."]), replace=True)
    assert found(store, "other", "astrolabe") == []
    assert found(store, "other", "anchor") == [store.load_chat("other").messages[0].id]
    assert index_rows(store) == 1


CHAT_IDS = [
    "a",
    "ab",
    "chat_1",
    "chat-1",
    "chats/2026/mira",
    "Captain Mira - 2026-03-02@18h11m40s",
    "with  two spaces ",
    "Мира",
    "Мира 2",
    "quote \" and ' here",
]


def test_chats_are_kept_apart(store: ChatStore) -> None:
    """The same words in every chat: a search of one never returns another's messages (ids
    that are prefixes of others, punctuation, spaces and non-ASCII included)."""
    ids = {chat_id: [m.id for m in stored(store, chat_id).messages] for chat_id in CHAT_IDS}
    for chat_id in CHAT_IDS:
        assert sorted(found(store, chat_id, "astrolabe harbour")) == ids[chat_id][1:3], chat_id
        assert found(store, chat_id, "coal") == [ids[chat_id][3]], chat_id
    assert found(store, "not stored", "astrolabe") == []


def test_a_word_that_spells_the_chat_key_matches_only_messages_that_hold_it(
    store: ChatStore,
) -> None:
    chat = stored(store, "A", ("We loaded the C41 film.", "Nothing here.", "Nor here."))
    assert found(store, "A", "Is the C41 film developed?") == [chat.messages[0].id]


@pytest.mark.parametrize("code", ["14-02-27", "C-2209", "7:45", "v2.3"])
def test_a_code_is_found_as_a_phrase(store: ChatStore, code: str) -> None:
    parts = code.replace("-", " ").replace(":", " ").replace(".", " ").split()
    chat = stored(
        store,
        texts=(
            f"The code was {code}, she said.",
            f"Numbers everywhere: {' and '.join(reversed(parts))}.",
            "Nothing to see.",
        ),
    )
    assert found(store, "c", f"What was the code {code} again?") == [chat.messages[0].id]
    assert found(store, "c", code) == [chat.messages[0].id]


@pytest.mark.parametrize(
    "query",
    ["", "   ", "what was it that you said to me?", "Do you remember? Tell me again!", "?!"],
)
def test_a_query_of_only_common_words_finds_nothing(store: ChatStore, query: str) -> None:
    stored(store, texts=("What was it that you said to me? Do you remember?", *TEXTS))
    assert store.search("c", query) == []


@pytest.mark.parametrize(
    "query",
    [
        '"astrolabe',
        'astrolabe"',
        '"the astrolabe"',
        'the "brass" astrolabe"""',
        "astrolabe) OR (coal",
        "NEAR(astrolabe coal)",
        "astrolabe* -coal ^brass",
        "chat : astrolabe",
        "{text}: astrolabe",
    ],
)
def test_query_syntax_characters_do_not_break_the_search(store: ChatStore, query: str) -> None:
    chat = stored(store)
    assert chat.messages[1].id in found(store, "c", query)


@pytest.mark.parametrize("query", ['"', '""', "'", "*", "(", ")", "-", ":", "^"])
def test_a_query_of_syntax_characters_alone_finds_nothing(store: ChatStore, query: str) -> None:
    stored(store)
    assert store.search("c", query) == []


def test_match_expression_quotes_every_word() -> None:
    expression = match_expression(['say "hi"', "14-02-27", "or"])
    assert expression == '"say ""hi""" OR "14-02-27" OR "or"'
    db = sqlite3.connect(":memory:")
    db.execute("CREATE VIRTUAL TABLE t USING fts5(x)")
    db.executemany("INSERT INTO t (x) VALUES (?)", [('they say "hi"',), ("code 14 02 27",)])
    rows = db.execute("SELECT rowid FROM t WHERE t MATCH ? ORDER BY rowid", (expression,))
    assert [r[0] for r in rows] == [1, 2]


def test_a_message_with_a_lone_surrogate_is_found(store: ChatStore) -> None:
    chat = stored(store)
    target = chat.messages[0]
    target["mes"] = "A broken \ud800 pair near the capstan."
    store.save(chat, changed=[target])
    assert found(store, "c", "capstan") == [target.id]


def test_a_message_whose_json_is_not_valid_does_not_break_saving(store: ChatStore) -> None:
    """`Infinity` is stored as it is (it is not JSON): the trigger that indexes the row must
    not fail the save, and the rest of the chat stays searchable."""
    chat = stored(store)
    target = chat.messages[0]
    target["mes"] = "The wombat slept on the coils."
    target["odd"] = float("inf")
    assert store.save(chat, changed=[target]) == 1
    (data,) = store.run(
        lambda db: db.execute("SELECT data FROM messages WHERE id = ?", (target.id,)).fetchone()
    )
    assert "Infinity" in data
    with pytest.raises(ValueError, match="Infinity"):
        json.loads(data, parse_constant=lambda word: (_ for _ in ()).throw(ValueError(word)))
    assert store.load_chat("c").messages[0]["mes"] == "The wombat slept on the coils."
    assert found(store, "c", "astrolabe") == [chat.messages[1].id]
    assert found(store, "c", "ropes foredeck") == []  # its old text is gone from the index
    # Later saves of the chat go on as before.
    set_data(chat.messages[2], "memory", "A gale was coming.")
    store.save(chat, changed=[chat.messages[2]])
    assert found(store, "c", "gale") == [chat.messages[2].id]


def _back_to_version_4(path: Path) -> None:
    db = sqlite3.connect(path, isolation_level=None)
    for trigger in ("recall_on_insert", "recall_on_update", "recall_on_delete"):
        db.execute(f"DROP TRIGGER {trigger}")
    db.execute("DROP TABLE recall_index")
    db.execute("PRAGMA user_version = 4")
    db.close()


def test_the_sqlite_migration_from_version_4_indexes_existing_messages(tmp_path: Path) -> None:
    path = tmp_path / "db"
    store = SQLiteStore(path)
    chat = make_chat("old")
    set_data(chat.messages[0], "memory", "Tomas became quartermaster.")
    store.import_chat(chat)
    loaded = store.load_chat("old")
    loaded.messages[3]["mes"] = "They haggled over the price of whale oil."  # stored as data
    store.save(loaded, changed=[loaded.messages[3]])
    store.import_chat(make_chat("other"))
    ids = [m.id for m in loaded.messages]
    store.close()
    _back_to_version_4(path)

    reopened = SQLiteStore(path)
    try:
        assert schema_version(reopened._db) == MIGRATIONS[-1].number
        assert found(reopened, "old", "astrolabe") == [ids[1]]  # from the raw line
        assert found(reopened, "old", "quartermaster") == [ids[0]]  # its recap
        assert found(reopened, "old", "whale") == [ids[3]]  # the edited JSON, not the line
        assert found(reopened, "old", "coal") == []
        assert len(found(reopened, "other", "astrolabe")) == 1
        # The triggers are back: the next edit is indexed.
        again = reopened.load_chat("old")
        again.messages[2]["mes"] = "Fog over the lighthouse."
        reopened.save(again, changed=[again.messages[2]])
        assert found(reopened, "old", "lighthouse") == [ids[2]]
        assert found(reopened, "old", "harbour") == []
    finally:
        reopened.close()


def test_a_word_is_found_in_any_of_its_forms_on_both_stores(store: ChatStore) -> None:
    chat = make_chat("forms", ["Counting the morning, we took nine silver.", "Rain again."])
    store.import_chat(chat)
    ids = [m.id for m in store.load_chat("forms").messages]
    assert found(store, "forms", "How much had we counted?") == [ids[0]]
    assert found(store, "forms", "what was the count") == [ids[0]]
    assert found(store, "forms", "raining") == [ids[1]]


def test_the_sqlite_migration_from_version_5_stems_the_words_already_indexed(
    tmp_path: Path,
) -> None:
    path = tmp_path / "db"
    store = SQLiteStore(path)
    store.import_chat(make_chat("old", ["Counting the morning, we took nine silver."]))
    (message_id,) = [m.id for m in store.load_chat("old").messages]
    store.close()
    # Back to version 5: the index as it was, words unstemmed.
    db = sqlite3.connect(path, isolation_level=None)
    db.execute("DROP TABLE recall_index")
    db.execute(
        "CREATE VIRTUAL TABLE recall_index USING fts5("
        "chat, text, recap, scene, tokenize = 'unicode61 remove_diacritics 2')"
    )
    db.execute(
        "INSERT INTO recall_index (rowid, chat, text) "
        "SELECT id, 'c' || hex(chat_id), json_extract(raw, '$.mes') FROM messages"
    )
    db.execute("PRAGMA user_version = 5")
    assert db.execute(
        "SELECT count(*) FROM recall_index WHERE recall_index MATCH 'count'"
    ).fetchone() == (0,)
    db.close()
    reopened = SQLiteStore(path)
    try:
        assert found(reopened, "old", "count") == [message_id]
        chat = reopened.load_chat("old")
        chat.messages[0]["mes"] = "The ropes were paying out."
        reopened.save(chat, changed=[chat.messages[0]])  # the triggers write the new table
        assert found(reopened, "old", "pays") == [message_id]
        assert found(reopened, "old", "count") == []
    finally:
        reopened.close()


def test_the_memory_index_follows_loads_appends_and_updates() -> None:
    index = MemoryIndex()
    index.load([("the brass astrolabe", "", ""), ("ropes", "a recap of coal", ""), ("x", "", "")])
    assert [i for i, _ in index.search("astrolabe")] == [0]
    assert [i for i, _ in index.search("coal")] == [1]
    index.append([("a zeppelin", "", ""), ("", "", "the scene of the saltmarsh")])
    assert index.count == 5
    assert [i for i, _ in index.search("zeppelin")] == [3]
    assert [i for i, _ in index.search("saltmarsh")] == [4]
    index.update(0, ("the silver sextant", "", ""))
    assert index.search("astrolabe") == []
    assert [i for i, _ in index.search("sextant")] == [0]
    index.load([("only one", "", "")])
    assert index.count == 1
    assert index.search("zeppelin") == []
    assert index.search("what was it?") == []
