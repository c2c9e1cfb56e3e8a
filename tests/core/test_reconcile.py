"""Reconciling a client's message list with the stored chat (the proxy's rule: the client's
list is the truth; untouched messages keep their ids and recaps)."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from autorecap.core.reconcile import ClientMessage, Op, plan, split_request

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


ROLES = st.sampled_from(["user", "assistant"])
HISTORY = st.lists(st.tuples(ROLES, st.sampled_from(["a", "b", "c", "d"])), max_size=8)


@settings(max_examples=300, deadline=None)
@given(stored=HISTORY, sent=HISTORY)
def test_applying_the_plan_gives_the_clients_history(
    stored: list[tuple[str, str]], sent: list[tuple[str, str]]
) -> None:
    """Whatever the two lists, carrying out the plan turns the stored chat into the client's."""
    result = plan(stored, client(*sent), generating=False)
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
    assert chat == sent
    unchanged_prefix = 0
    while (
        unchanged_prefix < min(len(stored), len(sent))
        and stored[unchanged_prefix] == sent[unchanged_prefix]
    ):
        unchanged_prefix += 1
    touched = {op.index for op in result.ops if op.kind in ("edit", "delete")}
    assert all(index >= unchanged_prefix for index in touched)  # untouched messages stay
