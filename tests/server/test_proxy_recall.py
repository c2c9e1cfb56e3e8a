"""The recall tier through the proxy: with `recall_enabled`, a turn that asks about something said
long ago (its message hidden by auto-hide) carries that message upstream, in the recall slot
just before the newest message, with where it comes from; with the tier off, nothing is
recalled."""

from __future__ import annotations

import re
import time
from collections.abc import Callable

import httpx
import openai

from autorecap.core import running
from autorecap.sample import sample_chat_path
from autorecap.settings import DEFAULT_RECALL_TEMPLATE
from autorecap.stfiles.jsonl import read_chat

from .conftest import StartProxy, Upstream
from .test_proxy import bot, user

MakeClient = Callable[[str], openai.OpenAI]
HEADING = DEFAULT_RECALL_TEMPLATE.split("{{recall}}")[0].strip()
QUESTION = "Remind me, how much did my second-hand boots from the cobbler cost?"
FACT = "two crowns and eleven pennies"
"""A fact the running recap leaves out (the violet lens's price, asked before, is in it now)."""


def wait_for(check: Callable[[], bool], what: str, timeout: float = 30.0) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.05)


def _history() -> list[dict[str, str]]:
    chat = read_chat(sample_chat_path())
    return [user(m.text) if m.is_user else bot(m.text) for m in chat.messages]


def _ask(
    start_proxy: StartProxy,
    upstream: Upstream,
    openai_client: MakeClient,
    http: httpx.Client,
    *,
    recall: bool,
) -> list[dict[str, str]]:
    """Send the sample chat, wait for its memory, then ask QUESTION; the messages the
    upstream got for it."""
    proxy = start_proxy(worker=True)
    settings = {"recall_enabled": recall}
    assert http.patch(proxy.origin + "/api/settings", json=settings).status_code == 200
    client = openai_client(proxy.chat_url("skyship"))
    history = _history()
    reply = client.chat.completions.create(model="m", messages=history)  # type: ignore[arg-type]
    wait_for(lambda: running.current(proxy.stored("skyship")) is not None, "the running recap")
    proxy.settled()
    history += [bot(reply.choices[0].message.content or ""), user(QUESTION)]
    client.chat.completions.create(model="m", messages=history)  # type: ignore[arg-type]
    sent = upstream.chat_requests[-1].json["messages"]
    assert isinstance(sent, list)
    return sent


def test_a_question_about_a_hidden_message_brings_it_back(
    start_proxy: StartProxy, upstream: Upstream, openai_client: MakeClient, http: httpx.Client
) -> None:
    sent = _ask(start_proxy, upstream, openai_client, http, recall=True)
    contents = [str(m["content"]) for m in sent]
    assert not any(c.startswith("*I find a cobbler") for c in contents)  # hidden
    recalled = [c for c in contents if c.startswith(HEADING)]
    assert len(recalled) == 1
    assert FACT in recalled[0]
    # Where it comes from: its scene and its number. No day: the history arrived in one
    # request, so when it was written is not known (the day it arrived is not that day).
    assert re.search(r"- \[scene \d+ · #\d+\] .*two crowns and eleven pennies", recalled[0])
    # Just before the newest message (depth 1), as a system message.
    where = contents.index(recalled[0])
    assert contents[where + 1 :] == [QUESTION]
    assert sent[where]["role"] == "system"


def test_nothing_is_recalled_with_the_tier_off(
    start_proxy: StartProxy, upstream: Upstream, openai_client: MakeClient, http: httpx.Client
) -> None:
    sent = _ask(start_proxy, upstream, openai_client, http, recall=False)
    contents = [str(m["content"]) for m in sent]
    assert not any(c.startswith(HEADING) for c in contents)
    assert not any(FACT in c for c in contents)
