"""What the proxy keeps per chat is bounded whatever chat ids clients invent: 10,000 requests,
each for a chat never seen before, through a real proxy, and the memory it keeps measured after
(Python's live memory blocks, after the collection of the server's next quiet moment)."""

from __future__ import annotations

import sys
from concurrent.futures import ThreadPoolExecutor

import httpx

from autorecap.server.proxy.turns import ECHOES, ProxyChats
from autorecap.store.sql import ORDERS_KEPT

from .conftest import Proxy, StartProxy, Upstream

OPEN_CHATS = 32
CLIENTS = 2


def live_blocks() -> int:
    """Python's memory blocks in use now (what is kept, not what the allocator still holds
    from an earlier peak, as the resident size would say)."""
    return sys.getallocatedblocks()


def send(proxy: Proxy, first: int, count: int) -> None:
    """`count` requests, each for a new chat (`invented-N`), from a few clients at once."""

    def run(part: range) -> None:
        with httpx.Client(timeout=30) as client:
            for n in part:
                answer = client.post(
                    f"{proxy.chat_url(f'invented-{n}')}/chat/completions",
                    json={"model": "m", "messages": [{"role": "user", "content": f"Hi {n}"}]},
                )
                assert answer.status_code == 200, answer.text

    parts = [range(first + k, first + count, CLIENTS) for k in range(CLIENTS)]
    with ThreadPoolExecutor(CLIENTS) as pool:
        list(pool.map(run, parts))


def collected(registry: ProxyChats) -> None:
    """Everything dead freed, frozen or not: what the server's deep sweep does at its next
    quiet moment (chats it let go of were frozen, with cycles: only that sweep frees them)."""
    assert registry.collector is not None
    registry.collector.sweep(deep=True)


def test_ten_thousand_invented_chat_ids_leave_the_memory_bounded(
    start_proxy: StartProxy, upstream: Upstream
) -> None:
    proxy = start_proxy(open_chats=OPEN_CHATS)
    registry: ProxyChats = proxy.server.config.app.state.registry
    # Warm up: the allocator's arenas, the caches of texts (bounded, larger than this).
    send(proxy, 0, 3_000)
    proxy.settled()
    collected(registry)
    upstream.forget()
    before = live_blocks()
    for first in range(3_000, 10_000, 1_000):
        send(proxy, first, 1_000)
        upstream.forget()  # the fake upstream's records of them are not the proxy's memory
    proxy.settled()
    collected(registry)
    grown = live_blocks() - before
    # Kept without a bound, 7,000 more chats hold their sessions, locks and stored orders:
    # 728,000 more blocks, measured. Bounded: none (a few hundred either way).
    assert grown < 20_000, f"{grown} more memory blocks after 7,000 new chat ids"
    assert len(registry.sessions()) <= OPEN_CHATS
    assert registry.locks() <= OPEN_CHATS + CLIENTS
    assert len(registry._echoes) <= ECHOES
    assert len(registry.store._orders) <= ORDERS_KEPT
    assert not registry._turning
    # Every chat was kept in the store: a chat let go of is read again on its next request.
    assert len(proxy.chat_ids()) == 10_000
    first = [m.text for m in proxy.stored("invented-5").messages]
    assert first[0] == "Hi 5"
    assert len(first) == 2  # the question and its reply
    with httpx.Client(timeout=30) as client:
        again = client.post(
            f"{proxy.chat_url('invented-5')}/chat/completions",
            json={
                "model": "m",
                "messages": [
                    {"role": "user", "content": first[0]},
                    {"role": "assistant", "content": first[1]},
                    {"role": "user", "content": "And now?"},
                ],
            },
        )
    assert again.status_code == 200
    assert [m.text for m in proxy.stored("invented-5").messages][:3] == [*first, "And now?"]
    assert len(proxy.stored("invented-5").messages) == 4
