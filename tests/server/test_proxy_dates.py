"""When the proxy's messages were written: the newest message of a request and the reply are
stamped as they pass; a history that arrives in one request is not, since when it was written
nobody said (stamping it with the moment it arrived would give its scenes and recalls that
day, and make a chat with no dates look like one written in a second)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime

import openai

from autorecap.core.scenes import scenes

from .conftest import StartProxy
from .test_proxy import bot, user
from .test_proxy_names import wait_for

MakeClient = Callable[[str], openai.OpenAI]


def test_only_what_passes_the_proxy_is_dated(
    start_proxy: StartProxy, openai_client: MakeClient
) -> None:
    proxy = start_proxy(worker=True)
    client = openai_client(proxy.chat_url("dated"))
    history = []
    for turn in range(30):
        history += [user(f"Turn {turn}: the next morning we walk to the mill at Hollin Ford.")]
        history += [bot(f"Reply {turn}: the miller counts {turn + 40} sacks of barley.")]
    history.append(user("And what now?"))
    reply = client.chat.completions.create(model="m", messages=history)  # type: ignore[arg-type]
    history += [bot(reply.choices[0].message.content or ""), user("We go home.")]
    client.chat.completions.create(model="m", messages=history)  # type: ignore[arg-type]

    chat = proxy.stored("dated")
    times = [m.send_time for m in chat.messages]
    assert len(times) == 64
    assert all(t is None for t in times[:60])  # the history of the first request
    assert all(t is not None for t in times[60:])  # asked, answered, asked, answered

    def closed() -> bool:
        return any(s.closed and s.recap for s in scenes(proxy.stored("dated").messages))

    wait_for(closed, "a scene of the history recapped", timeout=30)
    for scene in scenes(proxy.stored("dated").messages):
        if scene.closed and scene.end < 60:
            assert str(datetime.now(UTC).year) not in scene.recap  # no day made up
