"""Reconciling a client's message list with the stored chat (the proxy's rule: the client's
list is the truth; untouched messages keep their ids and recaps)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from autorecap.core.reconcile import ClientMessage, Op, Plan, plan, split_request

SYSTEM = ClientMessage("system", "You are Mira.")
STORED = [("user", "hi"), ("assistant", "hello"), ("user", "sail?"), ("assistant", "at dawn")]


def client(*pairs: tuple[str, str]) -> list[ClientMessage]:
    return [SYSTEM, *(ClientMessage(role, text) for role, text in pairs)]


def test_the_same_history_changes_nothing() -> None:
    result = plan(STORED, client(*STORED))
    assert result.unchanged
    assert result.system == [SYSTEM]
    assert [m.content for m in result.history] == ["hi", "hello", "sail?", "at dawn"]


def test_appended_messages_are_appends() -> None:
    result = plan(STORED, client(*STORED, ("user", "and the chart?")))
    assert result.ops == [Op("append", message=ClientMessage("user", "and the chart?"))]


def test_a_new_chat_appends_everything() -> None:
    result = plan([], client(("user", "hi")))
    assert [op.kind for op in result.ops] == ["append"]


def test_a_dropped_last_reply_is_a_regeneration() -> None:
    result = plan(STORED, client(*STORED[:-1]))
    assert result.regenerate == 3
    assert not result.ops


def test_dropping_the_last_reply_without_generating_is_a_deletion() -> None:
    result = plan(STORED, client(*STORED[:-1]), generating=False)
    assert result.ops == [Op("delete", index=3)]


def test_an_edited_message_is_an_edit_in_place() -> None:
    result = plan(STORED, client(*STORED[:2], ("user", "sail tomorrow?"), STORED[3]))
    # Only the changed message: the reply after it keeps its id and recap.
    assert result.ops == [Op("edit", index=2, message=ClientMessage("user", "sail tomorrow?"))]


def test_removed_messages_are_deleted_newest_first() -> None:
    result = plan(STORED, client(*STORED[:1]))
    assert result.ops == [Op("delete", index=3), Op("delete", index=2), Op("delete", index=1)]


def test_a_changed_role_deletes_and_appends() -> None:
    result = plan(STORED, client(*STORED[:2], ("assistant", "I go on"), ("user", "ok")))
    kinds = [(op.kind, op.index) for op in result.ops]
    assert kinds == [("delete", 3), ("delete", 2), ("append", -1), ("append", -1)]


def test_whitespace_differences_are_not_edits() -> None:
    result = plan(STORED, client(("user", " hi "), *STORED[1:]))
    assert result.unchanged


def test_our_own_injection_is_recognised_and_not_history() -> None:
    memory = "# Story Memory\n\nMira owes 340 crowns."
    messages = [ClientMessage("system", memory), SYSTEM, *client(*STORED)[1:]]
    result = plan(STORED, messages, injected=[memory])
    assert result.carries_injection
    assert result.unchanged
    # Sent on with the system block (never injected twice), never taken for history.
    assert result.system == [ClientMessage("system", memory), SYSTEM]


def test_system_messages_inside_the_history_are_history() -> None:
    system, history, _ = split_request(
        [SYSTEM, ClientMessage("user", "hi"), ClientMessage("system", "[a note]")]
    )
    assert system == [SYSTEM]
    assert [m.role for m in history] == ["user", "system"]


def _apply(stored: list[tuple[str, str]], result: Plan) -> list[tuple[str, str]]:
    chat = list(stored)
    for op in result.ops:
        if op.kind == "edit":
            assert op.message is not None
            chat[op.index] = (op.message.role, op.message.content)
        elif op.kind == "delete":
            del chat[op.index]
        else:
            assert op.message is not None
            chat.append((op.message.role, op.message.content))
    return chat


NOTE = "[Author's note: keep the tone grim.]"
AFTER = "[Post-history: write two paragraphs.]"


def test_post_history_instructions_are_sent_on_not_stored() -> None:
    result = plan(STORED, client(*STORED, ("user", "and now?"), ("system", AFTER)))
    assert result.ops == [Op("append", message=ClientMessage("user", "and now?"))]
    assert result.prompts == [(5, ClientMessage("system", AFTER))]


def test_an_authors_note_at_a_depth_moves_without_touching_the_messages() -> None:
    """SillyTavern places an author's note at the same distance from the end each turn: the
    messages around it keep their places (their recaps, their swipes), and it is not stored."""
    sent = [*STORED[:3], ("system", NOTE), STORED[3], ("user", "and now?")]
    result = plan(STORED, client(*sent))
    assert result.ops == [Op("append", message=ClientMessage("user", "and now?"))]
    assert result.prompts == [(3, ClientMessage("system", NOTE))]


def test_a_note_stored_before_it_was_known_for_one_is_deleted_alone() -> None:
    """A chat's first request cannot tell a note from a narrator message: stored then, it is
    deleted when it moves, and nothing else is touched."""
    stored = [STORED[0], ("system", NOTE), *STORED[1:]]
    sent = [*STORED[:3], ("system", NOTE), STORED[3], ("user", "and now?")]
    result = plan(stored, client(*sent))
    assert result.ops == [
        Op("delete", index=1),
        Op("append", message=ClientMessage("user", "and now?")),
    ]
    assert _apply(stored, result) == [*STORED, ("user", "and now?")]
    # Regenerating the last reply meanwhile: its index is the one after the deletion.
    result = plan(stored, client(*STORED[:2], ("system", NOTE), STORED[2]))
    assert result.ops == [Op("delete", index=1)]
    assert result.regenerate == 3
    assert _apply(stored, result)[result.regenerate] == STORED[3]


def test_a_narrator_message_is_stored_where_it_was_said_and_stays() -> None:
    storm = ("system", "A storm breaks over the bay.")
    result = plan(STORED, client(*STORED, storm, ("user", "we hold on")))
    assert [op.message.content for op in result.ops if op.message] == [storm[1], "we hold on"]
    assert not result.prompts
    stored = [*STORED, storm, ("user", "we hold on")]
    later = [*stored, ("assistant", "the mast cracks"), ("user", "cut it loose")]
    result = plan(stored, client(*later))
    assert [op.kind for op in result.ops] == ["append", "append"]
    assert not result.prompts
    # A whole history arriving at once keeps its narrator messages where they are.
    assert _apply([], plan([], client(*later))) == later


TEXTS = st.sampled_from(["a", "b", "c", "d"])
HISTORY = st.lists(st.tuples(st.sampled_from(["user", "assistant"]), TEXTS), max_size=8)


@settings(max_examples=300, deadline=None)
@given(stored=HISTORY, sent=HISTORY)
def test_applying_the_plan_gives_the_clients_history(
    stored: list[tuple[str, str]], sent: list[tuple[str, str]]
) -> None:
    """Whatever the two lists, carrying out the plan turns the stored chat into the client's
    (after the stored messages its window leaves out, when it sent only the newest)."""
    result = plan(stored, client(*sent), generating=False)
    assert _apply(stored, result) == stored[: result.offset] + sent
    unchanged_prefix = 0
    while (
        unchanged_prefix < min(len(stored), len(sent))
        and stored[unchanged_prefix] == sent[unchanged_prefix]
    ):
        unchanged_prefix += 1
    touched = {op.index for op in result.ops if op.kind in ("edit", "delete")}
    assert all(index >= unchanged_prefix for index in touched)  # untouched messages stay


MIXED = st.lists(st.tuples(st.sampled_from(["user", "assistant", "system"]), TEXTS), max_size=8)


@settings(max_examples=300, deadline=None)
@given(stored=MIXED, sent=MIXED)
def test_with_system_messages_the_plan_stores_the_history_and_places_the_prompts(
    stored: list[tuple[str, str]], sent: list[tuple[str, str]]
) -> None:
    """Carrying out the plan turns the stored chat into the client's history without its
    prompts, and history and prompts together are what the client sent."""
    if sent and sent[0][0] == "system":
        sent = [("user", "first"), *sent]  # a leading system message is the main prompt
    result = plan(stored, client(*sent), generating=False)
    history = [(m.role, m.content) for m in result.history]
    assert _apply(stored, result) == stored[: result.offset] + history
    together: list[tuple[str, str]] = list(history)
    for place, prompt in reversed(result.prompts):
        together.insert(place, (prompt.role, prompt.content))
    assert together == sent


STORM = ("system", "A storm breaks over the bay.")


def test_a_note_is_deleted_alone_when_the_next_request_has_none() -> None:
    """An author's note stored by a chat's first request, then a request without it (the note
    turned off, or skipped this turn): the note goes, nothing else is touched."""
    stored = [STORED[0], ("system", NOTE), *STORED[1:]]
    result = plan(stored, client(*STORED, ("user", "u4")))
    assert result.ops == [Op("delete", index=1), Op("append", message=ClientMessage("user", "u4"))]


def test_a_narrator_message_stays_when_a_message_before_it_is_edited_or_deleted() -> None:
    stored = [*STORED[:2], STORM, *STORED[2:]]
    edited = [STORED[0], ("assistant", "hello there"), STORM, *STORED[2:], ("user", "u4")]
    result = plan(stored, client(*edited))
    assert not result.prompts
    assert [op.kind for op in result.ops] == ["edit", "append"]
    deleted = [STORED[0], STORM, *STORED[2:], ("user", "u4")]
    result = plan(stored, client(*deleted))
    assert not result.prompts
    assert _apply(stored, result) == deleted


def test_a_narrator_message_after_a_deleted_reply_is_new_not_a_prompt() -> None:
    """The user deletes the last reply, adds a narrator message and writes on."""
    sent = [*STORED[:3], STORM, ("user", "we hold on")]
    result = plan(STORED, client(*sent))
    assert not result.prompts
    assert _apply(STORED, result) == sent


def test_of_two_narrator_messages_alike_the_one_deleted_goes() -> None:
    passes = ("system", "*Time passes.*")
    stored = [("user", "..."), passes, ("assistant", "a1"), ("user", "..."), passes]
    stored += [("assistant", "a2"), ("user", "u3")]
    sent = [("user", "..."), ("assistant", "a1"), ("user", "..."), passes, *stored[5:]]
    result = plan(stored, client(*sent))
    assert result.ops == [Op("delete", index=1)]


def test_a_message_deleted_early_in_the_chat_is_the_only_one_touched() -> None:
    """SillyTavern lets a message be deleted anywhere: the messages after it keep their ids
    and recaps (they are not deleted and added again)."""
    long = [("user" if i % 2 == 0 else "assistant", f"line {i}") for i in range(40)]
    sent = [m for i, m in enumerate(long) if i not in (1, 2)] + [("user", "and now?")]
    result = plan(long, client(*sent))
    assert result.ops == [
        Op("delete", index=2),
        Op("delete", index=1),
        Op("append", message=ClientMessage("user", "and now?")),
    ]
    edited = [*long[:5], ("assistant", "line 5, fixed"), *long[6:]]
    result = plan(long, client(*[m for i, m in enumerate(edited) if i != 20]))
    assert [(op.kind, op.index) for op in result.ops] == [("edit", 5), ("delete", 20)]


LONG = [(("user", "assistant")[i % 2], f"message {i}") for i in range(12)]


def test_a_window_on_the_newest_messages_keeps_the_older_ones() -> None:
    """A frontend that fits a long chat to its context sends only the newest messages: the
    ones it left out stay, and the window is reconciled as a whole history would be."""
    new = ("user", "what now?")
    result = plan(LONG, client(*LONG[6:], new))
    assert result.offset == 6
    assert result.ops == [Op("append", message=ClientMessage(*new))]
    # a regeneration, an edit and a deletion inside the window: at their stored places
    assert plan(LONG, client(*LONG[6:-1])).regenerate == 11
    edited = plan(LONG, client(*LONG[6:9], ("assistant", "changed"), *LONG[10:], new))
    assert edited.ops[0] == Op("edit", index=9, message=ClientMessage("assistant", "changed"))
    deleted = plan(LONG, client(*LONG[6:9], *LONG[10:]), generating=False)
    assert _apply(LONG, deleted) == LONG[:9] + LONG[10:]


def test_a_history_that_begins_as_the_chat_does_is_no_window() -> None:
    """The usual request, a chat's first messages changed or a run too short to tell: the
    client's list is the whole truth."""
    assert plan(LONG, client(*LONG, ("user", "more"))).offset == 0
    assert plan(LONG, client(("user", "new start"), *LONG[1:])).offset == 0  # an edit
    assert plan(LONG, client(LONG[11], ("user", "more"))).offset == 0  # 1 in a row: too few
    assert plan(LONG, client(LONG[4], LONG[7], LONG[8], ("user", "x"))).offset == 0


def test_an_edited_last_reply_with_a_new_message_after_it_is_an_edit_and_an_append() -> None:
    """The user edits the last reply (or swipes back to an earlier one) and sends on: the
    reply keeps its id, recap and swipes."""
    result = plan(STORED, client(*STORED[:3], ("assistant", "at noon"), ("user", "why?")))
    assert result.ops == [
        Op("edit", index=3, message=ClientMessage("assistant", "at noon")),
        Op("append", message=ClientMessage("user", "why?")),
    ]
