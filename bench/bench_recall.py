"""The recall tier on a 10,000-message chat: the time a turn's recall takes on the reply path
(the store's full-text index, and the in-memory one a chat file gets), p50 and p99 over the
chat's own user messages as queries, against the running recap's refresh in the same run; and
what the index costs a save (one changed recap written, with the index's triggers and
without). Figures and ratios, never asserted."""

from __future__ import annotations

import tempfile
import time
from pathlib import Path

from _common import median, percentile, report, timed_each
from autorecap.chat_search import ChatSearch
from autorecap.core.data import set_data
from autorecap.core.model import Chat
from autorecap.core.tokens import TokenCounter, get_counter
from autorecap.recap import OfflineBackend, run_pipeline
from autorecap.session import Session
from autorecap.settings import Settings
from autorecap.store.sqlite import SQLiteStore
from autorecap.testing import generate

SIZE = 10_000
QUERIES = 300


def recapped_chat(settings: Settings, counter: TokenCounter) -> tuple[Chat, list[str]]:
    """The generated 10,000-message chat, recapped offline, and `QUERIES` of its own user
    messages spread over it, to ask as queries."""
    chat = generate(SIZE, seed=5).chat
    run_pipeline(chat, OfflineBackend(counter), settings, counter, now_ms=0)
    queries = [m.text for m in chat.messages if m.is_user][:: max(1, SIZE // 2 // QUERIES)]
    return chat, queries


def main() -> None:
    counter = get_counter()
    settings = Settings(recall_enabled=True)
    chat, queries = recapped_chat(settings, counter)
    figures: dict[str, object] = {}
    with tempfile.TemporaryDirectory() as folder:
        store = SQLiteStore(Path(folder) / "bench.db", synchronous="NORMAL")
        start = time.perf_counter()
        store.import_chat(chat, chat_id=chat.id)
        figures["import of 10,000 messages with the index, s"] = time.perf_counter() - start
        stored = store.load_chat(chat.id)
        session = Session(stored, settings=settings)  # hides what the running recap covers
        session.refresh()
        hidden = sum(m.is_hidden for m in stored.messages)
        figures["messages hidden (recall's candidates)"] = hidden
        breaks = session.state.breaks  # as a refresh keeps them
        in_store = ChatSearch(stored, store)
        in_store.recall(settings, counter, queries[0], breaks=breaks)
        times = timed_each(queries, lambda q: in_store.recall(settings, counter, q, breaks=breaks))
        figures["recall from the store's index: p50 ms (target <= 5)"] = median(times) * 1000
        figures["recall from the store's index: p99 ms (target <= 20)"] = (
            percentile(times, 99) * 1000
        )
        refresh = timed_each(range(50), lambda _: session.refresh())
        figures["baseline: a refresh of the running recap, p50 ms"] = median(refresh) * 1000
        figures["recall against the refresh (p50)"] = median(times) / max(median(refresh), 1e-9)

        start = time.perf_counter()
        in_memory = ChatSearch(stored)
        in_memory.hits("warm up")
        figures["in-memory index of 10,000 messages built, ms"] = (
            time.perf_counter() - start
        ) * 1000
        times = timed_each(queries, lambda q: in_memory.recall(settings, counter, q, breaks=breaks))
        figures["recall from the in-memory index: p50 ms"] = median(times) * 1000
        figures["recall from the in-memory index: p99 ms"] = percentile(times, 99) * 1000

        targets = stored.messages[100:400]
        with_index = timed_each(
            targets,
            lambda m: (
                set_data(m, "memory", f"Changed {m.text[:40]}"),
                store.save(stored, changed=[m]),
            ),
        )
        store._db.execute("DROP TRIGGER recall_on_update")
        without = timed_each(
            targets,
            lambda m: (
                set_data(m, "memory", f"Again {m.text[:40]}"),
                store.save(stored, changed=[m]),
            ),
        )
        figures["one changed recap saved, with the index: p50 ms"] = median(with_index) * 1000
        figures["baseline: the same save without the index's trigger, p50 ms"] = (
            median(without) * 1000
        )
        figures["save with the index against without (p50)"] = median(with_index) / median(without)
        store.close()
    report("recall tier, 10,000 messages", figures)


if __name__ == "__main__":
    main()
