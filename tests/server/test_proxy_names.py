"""Names through the proxy: SillyTavern sends no `name` fields, so the speakers' names are taken
from its system prompt (or the `name` fields, when a client sends them) and the stored chat and
its recaps use them."""

from __future__ import annotations

import time
from collections.abc import Callable

import openai

from autorecap.core.data import get_memory
from autorecap.core.names import spoken

from .conftest import StartProxy
from .test_proxy import bot, user

MakeClient = Callable[[str], openai.OpenAI]
MAIN_PROMPT = {
    "role": "system",
    "content": "Write Seraphina's next reply in a fictional chat between Seraphina and Tomas.\n"
    "[Seraphina's personality: a guardian of the glade, gentle and stern.]",
}
TURNS = [
    "I wake up in a glade, my arm bandaged. Where am I?",
    "You are in the Eldergrove, Tomas. I found you by the river three days ago.",
    "Thank you. I owe you my life. I will repay the debt of forty silver.",
]


def wait_for(check: Callable[[], bool], what: str, timeout: float = 20.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def test_names_from_sillytaverns_prompt_reach_the_stored_chat_and_its_recaps(
    start_proxy: StartProxy, openai_client: MakeClient
) -> None:
    proxy = start_proxy(worker=True)
    client = openai_client(proxy.chat_url("glade"))
    history: list[dict[str, str]] = [MAIN_PROMPT, user(TURNS[0])]
    reply = client.chat.completions.create(model="m", messages=history)  # type: ignore[arg-type]
    history += [bot(reply.choices[0].message.content or ""), user(TURNS[2])]
    client.chat.completions.create(model="m", messages=history)  # type: ignore[arg-type]

    def recapped() -> bool:
        chat = proxy.stored("glade")
        return len(chat.messages) == 4 and all(get_memory(m) for m in chat.messages)

    wait_for(recapped, "the offline recaps")
    chat = proxy.stored("glade")
    assert [m.name for m in chat.messages] == ["Tomas", "Seraphina", "Tomas", "Seraphina"]
    assert (chat.user_name, chat.character_name) == ("Tomas", "Seraphina")
    recaps = " ".join(get_memory(m) for m in chat.messages)
    assert "Tomas" in recaps
    assert "Assistant" not in recaps
    assert "User" not in recaps


def test_name_fields_win_and_a_prompt_without_names_keeps_the_stand_ins(
    start_proxy: StartProxy, openai_client: MakeClient
) -> None:
    proxy = start_proxy()
    named = openai_client(proxy.chat_url("named"))
    messages = [
        MAIN_PROMPT,
        {"role": "user", "content": TURNS[0], "name": "Tom"},
    ]
    named.chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]
    assert [m.name for m in proxy.stored("named").messages] == ["Tom", "Seraphina"]
    plain = openai_client(proxy.chat_url("plain"))
    messages = [{"role": "system", "content": "You are a helpful assistant."}, user("Hi.")]
    plain.chat.completions.create(model="m", messages=messages)  # type: ignore[arg-type]
    assert [m.name for m in proxy.stored("plain").messages] == ["User", "Assistant"]


def test_a_group_chat_keeps_each_characters_name(
    start_proxy: StartProxy, openai_client: MakeClient
) -> None:
    """SillyTavern's group chat: the prompt names the speaker of the coming reply and lists
    the group ("between Mae, Rook and Tomas"), and each reply opens with its speaker's name.
    The user is Tomas, and each reply is its own speaker's, not the first character's."""
    proxy = start_proxy()
    client = openai_client(proxy.chat_url("crew"))
    prompt = "Write {}'s next reply in a fictional chat between Mae, Rook and Tomas."
    history: list[dict[str, str]] = [user("Tomas: Who has the key?")]
    for speaker in ("Mae", "Rook", "Mae"):
        sent = [{"role": "system", "content": prompt.format(speaker)}, *history]
        client.chat.completions.create(model="m", messages=sent)  # type: ignore[arg-type]
        history += [bot(f"{speaker}: {speaker} has it."), user("Tomas: Good.")]
    chat = proxy.stored("crew")
    assert chat.messages[0].name == "Tomas"
    assert [spoken(m)[0] for m in chat.messages[1:4]] == ["Mae", "Tomas", "Rook"]
    assert "Mae: Rook:" not in " ".join(m.text for m in chat.messages)
