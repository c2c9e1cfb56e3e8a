"""Running scene recap versions (SPEC-NOTES §1, §4.7, §4.8; seed 000 "Running Recap Storage",
"Case 1: No Running Recap Exists", "Case 2: Template is Empty"; seed 002
`cleanup_invalid_running_recaps`)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from autorecap import Chat, read_chat, set_data
from autorecap.core import running
from autorecap.core.running import SET_ASIDE_PREFIX, STORAGE_KEY, RunningRecapError
from autorecap.settings import DEFAULT_RUNNING_TEMPLATE

VERSION_KEYS = {
    "version",
    "timestamp",
    "content",
    "scene_count",
    "excluded_count",
    "prev_scene_index",
    "new_scene_index",
}


def make_chat(n: int = 10, breaks: tuple[int, ...] = (), chat_id: str = "chat-1") -> Chat:
    """A chat of `n` alternating user/character messages with scene breaks at `breaks`."""
    chat = Chat(
        [
            {
                "name": "Tomas" if i % 2 == 0 else "Captain Mira",
                "is_user": i % 2 == 0,
                "is_system": False,
                "mes": f"message {i}",
                "extra": {},
            }
            for i in range(n)
        ],
        chat_id=chat_id,
    )
    for index in breaks:
        set_data(chat.messages[index], "scene_break", True)
    return chat


def add(chat: Chat, content: str, new: int = 0, prev: int = 0, **extra: Any) -> dict[str, Any]:
    values: dict[str, Any] = {
        "scene_count": 1,
        "excluded_count": 0,
        "prev_scene_index": prev,
        "new_scene_index": new,
        "now_ms": 1_700_000_000_000,
    }
    values.update(extra)
    return running.add_version(chat, content, **values)


def numbers(chat: Chat) -> list[int]:
    return [v["version"] for v in running.versions(chat)]


# --- storage shape (SPEC-NOTES §1; seed 000 "Running Recap Storage") ---------------------------


def test_storage_lives_in_chat_metadata_with_the_spec_keys() -> None:
    # SPEC-NOTES §1: chat_metadata["auto_recap_running_scene_recaps"] = {chat_id,
    # current_version, versions}; a version has exactly the seven listed keys.
    chat = make_chat(breaks=(4,))
    assert running.storage(chat) is None
    version = add(chat, "The Kestrel sails.", new=4, prev=0, scene_count=2, excluded_count=1)
    stored = chat.metadata[STORAGE_KEY]
    assert set(stored) == {"chat_id", "current_version", "versions"}
    assert stored["chat_id"] == "chat-1"
    assert stored["current_version"] == version["version"] == 0
    assert stored["versions"] == [version]
    assert set(version) == VERSION_KEYS
    assert version == {
        "version": 0,
        "timestamp": 1_700_000_000_000,
        "content": "The Kestrel sails.",
        "scene_count": 2,
        "excluded_count": 1,
        "prev_scene_index": 0,
        "new_scene_index": 4,
    }


def test_reading_a_chat_file_with_a_running_recap(fixtures_dir: Path) -> None:
    # seed 000 "Running Recap Storage": the fixture stores versions 0 and 1, current_version 1.
    chat = read_chat(fixtures_dir / "handmade" / "modern-solo.jsonl")
    assert numbers(chat) == [0, 1]
    current = running.current(chat)
    assert current is not None
    assert current["version"] == 1
    assert "A storm split the mainmast." in current["content"]
    assert set(current) == VERSION_KEYS


# --- version numbers (SPEC-NOTES §4.7) --------------------------------------------------------


def test_added_versions_get_increasing_numbers_and_become_current() -> None:
    # SPEC-NOTES §4.7: version numbers are unique and increasing; the new version is current.
    chat = make_chat()
    for expected in range(4):
        version = add(chat, f"recap {expected}")
        assert version["version"] == expected
        assert running.current(chat) is version
        assert running.storage(chat)["current_version"] == expected  # type: ignore[index]
    assert numbers(chat) == [0, 1, 2, 3]


def test_adding_after_an_edit_and_a_deletion_never_collides() -> None:
    # SPEC-NOTES §4.7: "the JS original can collide after a manual edit" (it numbered a new
    # version by the count of versions). Here a new number is above every existing one.
    chat = make_chat(breaks=(4,))
    for i in range(3):
        add(chat, f"recap {i}", new=4)
    running.delete_version(chat, 1)  # 2 versions left, numbered 0 and 2
    edited = running.edit_version(chat, "edited by hand", now_ms=1)
    assert edited["version"] == 3
    added = add(chat, "generated", new=4)
    assert added["version"] == 4
    assert numbers(chat) == [0, 2, 3, 4]
    assert len(set(numbers(chat))) == len(numbers(chat))


@given(
    st.lists(
        st.tuples(st.sampled_from(["add", "edit", "delete", "select"]), st.integers(0, 8)),
        max_size=25,
    )
)
def test_version_numbers_stay_unique_under_any_sequence_of_operations(
    ops: list[tuple[str, int]],
) -> None:
    # SPEC-NOTES §4.7: whatever the user does, no two versions share a number, and a version
    # that is added or edited is numbered above every other existing version and is current.
    chat = make_chat(breaks=(4,))
    for op, arg in ops:
        existing = numbers(chat)
        if op in ("add", "edit"):
            if op == "edit" and not existing:
                with pytest.raises(RunningRecapError):
                    running.edit_version(chat, "x", now_ms=0)
                continue
            made = (
                add(chat, f"v{arg}", new=4)
                if op == "add"
                else running.edit_version(chat, f"e{arg}", now_ms=0)
            )
            assert all(made["version"] > n for n in existing)
            assert running.current(chat) is made
        elif existing:
            target = existing[arg % len(existing)]
            if op == "delete":
                running.delete_version(chat, target)
            else:
                running.select_version(chat, target)
                assert running.current(chat)["version"] == target  # type: ignore[index]
        after = numbers(chat)
        assert len(after) == len(set(after))
        assert after == sorted(after)


# --- select, edit, delete (SPEC-NOTES §4.7) ---------------------------------------------------


def test_select_version_changes_current_and_injection_text() -> None:
    # SPEC-NOTES §4.7: selecting a version changes which one is injected.
    chat = make_chat()
    add(chat, "first recap")
    add(chat, "second recap")
    assert running.injection_text(chat, "{{running_recap}}") == "second recap"
    selected = running.select_version(chat, 0)
    assert selected["version"] == 0
    assert running.current(chat)["content"] == "first recap"  # type: ignore[index]
    assert running.storage(chat)["current_version"] == 0  # type: ignore[index]
    assert running.injection_text(chat, "{{running_recap}}") == "first recap"


def test_selecting_an_unknown_version_raises_and_lists_the_existing_numbers() -> None:
    # SPEC-NOTES §4.7: an error names what exists; the current version is left alone.
    chat = make_chat()
    add(chat, "a")
    add(chat, "b")
    add(chat, "c")
    running.delete_version(chat, 1)
    with pytest.raises(RunningRecapError) as caught:
        running.select_version(chat, 7)
    message = str(caught.value)
    assert "7" in message
    assert "0, 2" in message
    assert running.current(chat)["version"] == 2  # type: ignore[index]


def test_selecting_a_version_in_a_chat_without_recaps_raises() -> None:
    chat = make_chat()
    with pytest.raises(RunningRecapError, match="none yet"):
        running.select_version(chat, 0)


def test_edit_adds_a_version_with_the_same_scene_facts_and_new_content() -> None:
    # SPEC-NOTES §4.7: editing a recap adds a version (it does not overwrite the old one).
    chat = make_chat(breaks=(4, 8))
    add(chat, "old text", new=8, prev=4, scene_count=2, excluded_count=1)
    edited = running.edit_version(chat, "new text", now_ms=1_800_000_000_000)
    assert edited["version"] == 1
    assert edited["content"] == "new text"
    assert edited["timestamp"] == 1_800_000_000_000
    for key in ("scene_count", "excluded_count", "prev_scene_index", "new_scene_index"):
        assert edited[key] == running.versions(chat)[0][key]
    assert running.versions(chat)[0]["content"] == "old text"
    assert running.current(chat) is edited


def test_edit_takes_the_scene_facts_of_the_selected_version() -> None:
    chat = make_chat(breaks=(2, 6))
    add(chat, "scene one", new=2, scene_count=1)
    add(chat, "scenes one and two", new=6, prev=2, scene_count=2)
    running.select_version(chat, 0)
    edited = running.edit_version(chat, "scene one, edited", now_ms=0)
    assert (edited["scene_count"], edited["new_scene_index"]) == (1, 2)


def test_editing_with_no_recap_raises() -> None:
    chat = make_chat()
    with pytest.raises(RunningRecapError):
        running.edit_version(chat, "nothing to edit", now_ms=0)
    assert running.versions(chat) == []


def test_deleting_the_current_version_falls_back_to_the_newest_remaining() -> None:
    # SPEC-NOTES §4.7: the newest version left takes over.
    chat = make_chat()
    for i in range(4):
        add(chat, f"recap {i}")
    running.select_version(chat, 1)
    running.delete_version(chat, 1)
    assert numbers(chat) == [0, 2, 3]
    assert running.current(chat)["version"] == 3  # type: ignore[index]
    assert running.storage(chat)["current_version"] == 3  # type: ignore[index]


def test_deleting_another_version_keeps_the_current_one() -> None:
    chat = make_chat()
    for i in range(3):
        add(chat, f"recap {i}")
    running.select_version(chat, 0)
    running.delete_version(chat, 2)
    assert running.current(chat)["version"] == 0  # type: ignore[index]


def test_deleting_the_last_version_leaves_no_recap() -> None:
    # seed 000 Case 1: with no versions left there is nothing to inject.
    chat = make_chat()
    add(chat, "only")
    running.delete_version(chat, 0)
    assert running.current(chat) is None
    assert running.injection_text(chat, DEFAULT_RUNNING_TEMPLATE) == ""


def test_deleting_an_unknown_version_raises() -> None:
    chat = make_chat()
    add(chat, "only")
    with pytest.raises(RunningRecapError, match="the versions are 0"):
        running.delete_version(chat, 5)
    assert numbers(chat) == [0]


# --- injection text (seed 000 get_running_recap_injection, Case 1 and Case 2; SPEC §4.10) -----


def test_no_recap_injects_nothing() -> None:
    # seed 000 Case 1: no running recap -> "".
    chat = make_chat()
    assert running.injection_text(chat, DEFAULT_RUNNING_TEMPLATE) == ""


def test_a_version_with_empty_content_injects_nothing() -> None:
    # seed 000: `if (!current || !current.content) return ""`.
    chat = make_chat()
    add(chat, "")
    assert running.injection_text(chat, DEFAULT_RUNNING_TEMPLATE) == ""


@pytest.mark.parametrize("template", ["", "   ", "\n\t\n"])
def test_a_blank_template_injects_the_raw_content(template: str) -> None:
    # seed 000 Case 2 / SPEC-NOTES §4.10: empty template -> the raw content.
    chat = make_chat()
    add(chat, "## Characters\nMira: captain")
    assert running.injection_text(chat, template) == "## Characters\nMira: captain"


def test_every_placeholder_in_the_template_is_replaced() -> None:
    # seed 000: template.replace(/\{\{running_recap\}\}/g, content) replaces all occurrences.
    chat = make_chat()
    add(chat, "RECAP")
    template = "<a>{{running_recap}}</a> and again {{running_recap}}{{running_recap}}"
    assert running.injection_text(chat, template) == "<a>RECAP</a> and again RECAPRECAP"


def test_a_template_without_placeholder_is_injected_as_is() -> None:
    chat = make_chat()
    add(chat, "RECAP")
    assert running.injection_text(chat, "Fixed header only") == "Fixed header only"


def test_the_default_template_wraps_the_recap() -> None:
    # seed 000 "Default Template" (seed 001): "# Story Memory ... {{running_recap}}".
    chat = make_chat()
    add(chat, "## Characters\nAlice: Warrior, recovered...")
    text = running.injection_text(chat, DEFAULT_RUNNING_TEMPLATE)
    assert text == DEFAULT_RUNNING_TEMPLATE.replace(
        "{{running_recap}}", "## Characters\nAlice: Warrior, recovered..."
    )
    assert text.startswith("# Story Memory\n\nThe following is a cumulative memory")
    assert text.endswith("\n\n## Characters\nAlice: Warrior, recovered...")


def test_current_falls_back_to_the_newest_when_current_version_is_unknown() -> None:
    chat = make_chat()
    add(chat, "a")
    add(chat, "b")
    chat.metadata[STORAGE_KEY]["current_version"] = 99
    assert running.current(chat)["content"] == "b"  # type: ignore[index]


# --- message deletion (seed 002 handleMessageDeleted; SPEC-NOTES §4.7, §4.9) ------------------


def delete(chat: Chat, index: int) -> list[int]:
    """Delete message `index` the way a Session does, then clean up (seed 002)."""
    del chat.messages[index]
    running.shift_after_deletion(chat, index)
    return running.cleanup_invalid(chat)


def test_deleting_a_message_before_a_scene_break_shifts_the_indexes() -> None:
    # SPEC-NOTES §4.9: indexes written into ST files are recomputed when messages are deleted.
    chat = make_chat(breaks=(3, 6))
    add(chat, "one", new=3, prev=0)
    add(chat, "two", new=6, prev=3)
    assert delete(chat, 1) == []
    v0, v1 = running.versions(chat)
    assert (v0["prev_scene_index"], v0["new_scene_index"]) == (0, 2)
    assert (v1["prev_scene_index"], v1["new_scene_index"]) == (2, 5)
    assert running.current(chat) is v1


def test_deleting_a_message_after_every_scene_break_changes_nothing() -> None:
    chat = make_chat(breaks=(3, 6))
    add(chat, "one", new=3)
    add(chat, "two", new=6, prev=3)
    assert delete(chat, 8) == []
    assert [v["new_scene_index"] for v in running.versions(chat)] == [3, 6]


def test_deleting_a_scene_break_removes_its_version_and_shifts_the_rest() -> None:
    # seed 002 handleMessageDeleted -> cleanup_invalid_running_recaps.
    chat = make_chat(breaks=(3, 6))
    add(chat, "one", new=3)
    add(chat, "two", new=6, prev=3)
    assert delete(chat, 3) == [0]
    (remaining,) = running.versions(chat)
    assert remaining["version"] == 1
    assert remaining["new_scene_index"] == 5
    assert running.current(chat) is remaining


def test_deleting_the_current_versions_scene_falls_back_to_the_newest_valid() -> None:
    # SPEC-NOTES §4.7: "falls back to the newest valid one".
    chat = make_chat(breaks=(2, 5, 8))
    add(chat, "one", new=2)
    add(chat, "two", new=5, prev=2)
    add(chat, "three", new=8, prev=5)
    assert delete(chat, 8) == [2]
    assert numbers(chat) == [0, 1]
    assert running.current(chat)["version"] == 1  # type: ignore[index]
    assert running.storage(chat)["current_version"] == 1  # type: ignore[index]
    assert running.injection_text(chat, "") == "two"


def test_a_version_whose_message_is_no_longer_a_scene_break_is_removed() -> None:
    # seed 002 cleanup_invalid_running_recaps: the scene must still end at new_scene_index.
    chat = make_chat(breaks=(3, 6))
    add(chat, "one", new=3)
    add(chat, "two", new=6, prev=3)
    set_data(chat.messages[6], "scene_break", False)
    assert running.cleanup_invalid(chat) == [1]
    assert numbers(chat) == [0]
    assert running.current(chat)["version"] == 0  # type: ignore[index]


def test_a_version_pointing_past_the_end_of_the_chat_is_removed() -> None:
    chat = make_chat(n=5, breaks=(2,))
    add(chat, "one", new=2)
    add(chat, "ghost", new=40)
    assert running.cleanup_invalid(chat) == [1]
    assert numbers(chat) == [0]


def test_cleanup_of_a_chat_without_recaps_does_nothing() -> None:
    chat = make_chat(breaks=(3,))
    running.shift_after_deletion(chat, 0)
    assert running.cleanup_invalid(chat) == []
    assert STORAGE_KEY not in chat.metadata


def test_cleanup_removing_every_version_leaves_no_recap() -> None:
    chat = make_chat(breaks=(3,))
    add(chat, "one", new=3)
    assert delete(chat, 3) == [0]
    assert running.current(chat) is None
    assert running.injection_text(chat, DEFAULT_RUNNING_TEMPLATE) == ""


# --- chat_id validation (SPEC-NOTES §4.8) -----------------------------------------------------


def foreign(chat_id: str = "new-id", owner: str = "old-id") -> Chat:
    """A chat whose running recap storage records another chat's id."""
    chat = make_chat(breaks=(3,), chat_id=chat_id)
    add(chat, "recap of the old chat", new=3)
    chat.metadata[STORAGE_KEY]["chat_id"] = owner
    return chat


def test_a_chat_file_adopts_the_storage() -> None:
    # SPEC-NOTES §4.8: opening a file counts as an import; a renamed file keeps its recaps.
    chat = foreign()
    assert running.adopt_chat_id(chat, from_file=True) is None
    assert chat.metadata[STORAGE_KEY]["chat_id"] == "new-id"
    assert running.injection_text(chat, "") == "recap of the old chat"
    assert not any(key.startswith(SET_ASIDE_PREFIX) for key in chat.metadata)


def test_a_branch_in_the_store_adopts_the_storage() -> None:
    # SPEC-NOTES §4.8: a branch (chat_metadata.main_chat set) adopts the new id.
    chat = foreign()
    chat.metadata["main_chat"] = "old-id"
    assert running.adopt_chat_id(chat, from_file=False) is None
    assert chat.metadata[STORAGE_KEY]["chat_id"] == "new-id"
    assert running.injection_text(chat, "") == "recap of the old chat"


def test_a_mismatch_in_the_store_keeps_the_old_storage_aside_and_warns() -> None:
    # SPEC-NOTES §4.8: not a branch -> keep the old storage under another key, start empty,
    # warn (the JS original reset the storage, losing it).
    chat = foreign()
    old = chat.metadata[STORAGE_KEY]
    warning = running.adopt_chat_id(chat, from_file=False)
    assert isinstance(warning, str)
    assert "old-id" in warning
    assert "new-id" in warning
    assert chat.metadata[f"{SET_ASIDE_PREFIX}old-id"] is old
    assert old["versions"][0]["content"] == "recap of the old chat"
    assert chat.metadata[STORAGE_KEY] == {
        "chat_id": "new-id",
        "current_version": 0,
        "versions": [],
    }
    assert running.current(chat) is None
    assert running.injection_text(chat, DEFAULT_RUNNING_TEMPLATE) == ""


def test_setting_storage_aside_never_overwrites_storage_set_aside_before() -> None:
    # SPEC-NOTES §4.8: the old storage is kept aside, "never deletes it". A chat that already
    # holds storage set aside from chat "old-id" must not lose it when a second storage from
    # "old-id" is set aside.
    chat = foreign()
    earlier = {"chat_id": "old-id", "current_version": 0, "versions": [{"version": 0}]}
    chat.metadata[f"{SET_ASIDE_PREFIX}old-id"] = earlier
    current = chat.metadata[STORAGE_KEY]
    running.adopt_chat_id(chat, from_file=False)
    kept = [value for key, value in chat.metadata.items() if key.startswith(SET_ASIDE_PREFIX)]
    assert any(value is earlier for value in kept)
    assert any(value is current for value in kept)


def test_the_same_chat_id_changes_nothing() -> None:
    chat = foreign(chat_id="same", owner="same")
    before = dict(chat.metadata[STORAGE_KEY])
    assert running.adopt_chat_id(chat, from_file=False) is None
    assert running.adopt_chat_id(chat, from_file=True) is None
    assert chat.metadata[STORAGE_KEY] == before


def test_storage_without_an_owner_is_adopted() -> None:
    chat = foreign(owner="")
    assert running.adopt_chat_id(chat, from_file=False) is None
    assert chat.metadata[STORAGE_KEY]["chat_id"] == "new-id"


def test_a_chat_without_storage_needs_no_adoption() -> None:
    chat = make_chat()
    assert running.adopt_chat_id(chat, from_file=False) is None
    assert STORAGE_KEY not in chat.metadata


def test_storage_that_is_not_an_object_is_refused_on_write() -> None:
    chat = make_chat()
    chat.metadata[STORAGE_KEY] = "garbage"
    assert running.versions(chat) == []
    with pytest.raises(RunningRecapError, match="not an object"):
        add(chat, "x")
    assert chat.metadata[STORAGE_KEY] == "garbage"


_VERSION_NUMBERS = st.one_of(st.integers(-2, 6), st.booleans(), st.none(), st.just("3"))


@given(
    stored=st.lists(
        st.one_of(
            st.builds(lambda n, c: {"version": n, "content": c}, _VERSION_NUMBERS, st.text()),
            st.builds(lambda c: {"content": c}, st.text(max_size=3)),  # no number at all
            st.just("not a version"),
        ),
        max_size=8,
    ),
    wanted=_VERSION_NUMBERS,
)
def test_current_is_the_wanted_version_of_the_sorted_list_else_its_last(
    stored: list[Any], wanted: Any
) -> None:
    # The seeds' reading, spelt out: sort the versions by number (stably), take the first whose
    # number is `current_version`, else the last. `current()` finds the same one in one pass,
    # whatever the stored list holds (duplicates, booleans, missing numbers, non-objects).
    chat = Chat(chat_id="c")
    chat.metadata[STORAGE_KEY] = {"current_version": wanted, "versions": stored}
    ordered = running.versions(chat)
    matches = [v for v in ordered if running._number(v) == wanted]
    expected = matches[0] if matches else (ordered[-1] if ordered else None)
    assert running.current(chat) is expected
