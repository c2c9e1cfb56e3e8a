"""What a proxy turn costs before its request can go upstream: `ProxyChats.begin` on recapped
chats of 1,000 messages (hidden scenes, a running recap), the usual turn (the last reply and a
new user message appended to the history), with the memory refresh of the turn's events left for
after the request is sent (`refresh_later`, the default) and on the reply path (the baseline),
turn by turn on the same chats in the same run. Then the same turns with SillyTavern's
post-history instructions after the newest message (a prompt the proxy sends on but does not
store; the fast path keeps it last), and with an author's note four messages from the end as
well (the full path each turn). Figures, never asserted.

BENCH_BEGIN_CHATS (default 6) sets how many chats take turns: with 60, each turn finds its chat
out of the processor's caches, as a server with many chats does (the setup then takes about two
minutes).
"""

from __future__ import annotations

import os
import statistics
import tempfile
import time
from pathlib import Path

import orjson

from _common import percentile, report
from autorecap.core.tokens import get_counter
from autorecap.jobs.queue import JobQueue
from autorecap.profiles import Profiles
from autorecap.recap.offline.engine import OfflineBackend
from autorecap.server.proxy.turns import ProxyChats
from autorecap.store.sqlite import SQLiteStore
from bench_proxy import history
from loopback import MODEL_LIKE

CHATS = int(os.environ.get("BENCH_BEGIN_CHATS", "6"))
ROUNDS = 30 if CHATS <= 10 else 10
AFTER = {"role": "system", "content": "[Write one paragraph. Stay in character.]"}
NOTE = {"role": "system", "content": "[Author's note: the storm is getting worse.]"}


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteStore(Path(folder) / "begin.db")
        registry = ProxyChats(store, JobQueue(store), profiles=Profiles(Path(folder) / "s.json"))
        worker = registry.worker(lambda _: OfflineBackend(get_counter()))
        ids = [f"paced-{n}" for n in range(CHATS)]
        chats = {chat_id: history(chat_id) for chat_id in ids}
        times: dict[bool, list[float]] = {True: [], False: []}
        prompted: dict[str, list[float]] = {"after": [], "note": []}
        deferred = 0

        def turn(chat_id: str, number: int, measured: bool, prompts: str = "") -> None:
            nonlocal deferred
            messages = chats[chat_id]
            messages.append({"role": "user", "content": f"Paced {number}, {chat_id}."})
            sent = [*messages, AFTER] if prompts else messages
            if prompts == "note":
                sent = [*sent[:-5], NOTE, *sent[-5:]]
            raw = orjson.dumps({"model": MODEL_LIKE, "messages": sent})
            later = bool(prompts) or (number + ids.index(chat_id)) % 2 == 0  # both ways
            registry.refresh_later = later
            start = time.perf_counter()
            begun = registry.begin(chat_id, raw)
            spent = time.perf_counter() - start
            reply = f"Reply {number} for {chat_id}: the captain nods."
            registry.record(begun, reply)
            registry.settle(begun)
            messages.append({"role": "assistant", "content": reply})
            if measured and prompts:
                prompted[prompts].append(spent)
            elif measured:
                times[later].append(spent)
                deferred += begun.refresh_due

        for chat_id in ids:  # the first request: 1,000 new messages, then their recaps
            turn(chat_id, 0, False)
        worker.run()
        for number in range(1, ROUNDS + 1):
            for chat_id in ids:
                turn(chat_id, number, number > 2)
            worker.run()  # the turns' recap jobs, as the server's worker runs them
        fast = registry.fast_turns
        for kind, first in (("after", ROUNDS + 1), ("note", ROUNDS + 11)):
            for number in range(first, first + 10):
                for chat_id in ids:
                    turn(chat_id, number, number > first + 1, prompts=kind)
                worker.run()
        registry.close()
        store.close()

    later, now = times[True], times[False]
    report(
        f"proxy: begin() of the usual turn, {CHATS} recapped chats of 1,000 messages in turn",
        {
            "turns measured each way": len(later),
            "turns on the fast path": fast,
            "turns whose refresh was left for later": deferred,
            "refresh later: p50 us": statistics.median(later) * 1e6,
            "refresh later: p90 us": percentile(later, 90) * 1e6,
            "refresh on the reply path (baseline): p50 us": statistics.median(now) * 1e6,
            "refresh on the reply path (baseline): p90 us": percentile(now, 90) * 1e6,
            "ratio of p50s (later / baseline)": statistics.median(later) / statistics.median(now),
            "with post-history instructions (fast path): p50 us": (
                statistics.median(prompted["after"]) * 1e6
            ),
            "with post-history instructions: p90 us": percentile(prompted["after"], 90) * 1e6,
            "and an author's note (full path): p50 us": statistics.median(prompted["note"]) * 1e6,
            "and an author's note: p90 us": percentile(prompted["note"], 90) * 1e6,
            "ratio of p50s (author's note / refresh later)": (
                statistics.median(prompted["note"]) / statistics.median(later)
            ),
        },
    )


if __name__ == "__main__":
    main()
