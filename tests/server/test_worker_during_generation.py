"""The recap worker runs while the upstream generates: a request counts as being answered only
while the proxy computes for it (reconciling, building the request, recording the reply), not
while it waits for the model. Before, a minute-long generation held every recap back."""

from __future__ import annotations

import threading
import time
from typing import Any

import httpx

from autorecap.server.proxy.turns import ProxyChats

from .conftest import StartProxy, Upstream

CHAT = "generating"
SYSTEM = {"role": "system", "content": "You are Mira, captain of the Heron."}


def history(count: int) -> list[dict[str, str]]:
    items = []
    for n in range(count):
        role = "user" if n % 2 == 0 else "assistant"
        items.append({"role": role, "content": f"Turn {n}: the Heron sails past isle {n}."})
    return items


def test_recaps_progress_while_a_reply_is_being_generated(
    start_proxy: StartProxy, upstream: Upstream
) -> None:
    proxy = start_proxy(worker=True)
    registry: ProxyChats = proxy.server.config.app.state.registry
    queue = registry.queue
    url = f"{proxy.chat_url(CHAT)}/chat/completions"
    messages: list[dict[str, Any]] = [SYSTEM, *history(80)]
    with httpx.Client(timeout=60) as http:
        queue.pause()  # the first turn's recap jobs wait until the next turn is generating
        first = http.post(url, json={"model": "m", "messages": messages})
        assert first.status_code == 200
        proxy.settled()
        queued = queue.counts(CHAT)["queued"]
        assert queued >= 40
        hold = upstream.hold(lambda request: True, reply="Aye.", timeout=60)
        messages += [
            {"role": "assistant", "content": first.json()["choices"][0]["message"]["content"]},
            {"role": "user", "content": "What now?"},
        ]
        results: list[httpx.Response] = []
        sender = threading.Thread(
            target=lambda: results.append(http.post(url, json={"model": "m", "messages": messages}))
        )
        sender.start()
        try:
            held = hold.first()
            queue.resume()
            deadline = time.monotonic() + 30
            while queue.counts(CHAT)["queued"] > queued - 30 and time.monotonic() < deadline:
                time.sleep(0.05)
            left = queue.counts(CHAT)["queued"]
            still_generating = not held.answered.is_set() and not results
        finally:
            hold.release()
            sender.join(30)
    assert still_generating, "the reply came before the recaps were checked"
    assert left <= queued - 30, f"only {queued - left} recap jobs ran during the generation"
    assert results
    assert results[0].status_code == 200
