"""The recall tier on PostgreSQL's full-text search (`tsvector`, `ts_rank`) against SQLite's
(FTS5, BM25), on the same questions: `autorecap eval`'s shipped chats (dev and held-out), each
recapped offline, its covered messages hidden as auto-hide would, and every question asked as
the newest message. Printed: the share of the answer words and the planted facts the recalled
pieces hold (recall alone, at `recall_max_tokens` 500), and the search time per question. Then
the time of a recall on one generated 10,000-message chat in each store, p50 and p99 over 300
of its own user messages as queries (SQLite is the baseline; `bench_recall.py` has its targets).

The PostgreSQL server is started for the run in a temporary folder.
"""

from __future__ import annotations

import time
from functools import partial

from _common import percentile, report, timed_each
from autorecap.chat_search import ChatSearch
from autorecap.core import running
from autorecap.core.tokens import get_counter
from autorecap.evaluation.corpus import CORPORA, read_script
from autorecap.evaluation.measures import answer_recall, answer_words, planted_found
from autorecap.evaluation.run import fresh_copy
from autorecap.recap.detection import detect_scene_breaks
from autorecap.recap.messages import recap_all
from autorecap.recap.offline.engine import OfflineBackend
from autorecap.recap.running_recap import update_running_recap
from autorecap.recap.scenes import recap_scenes
from autorecap.session import Session
from autorecap.settings import Settings
from autorecap.store import ChatStore, open_store
from autorecap.testing.postgres import PostgresServer
from bench_recall import recapped_chat

SHARE = 500


def main() -> None:
    settings = Settings().model_copy(update={"recall_max_tokens": SHARE})
    counter = get_counter(settings.tokenizer)
    backend = OfflineBackend(counter)
    paths = sorted((CORPORA / "dev").glob("*.chat.txt")) + sorted(
        (CORPORA / "heldout").glob("*.chat.txt")
    )
    totals: dict[str, list[float]] = {"SQLite FTS5": [], "PostgreSQL tsvector": []}
    planted: dict[str, list[int]] = {name: [0, 0] for name in totals}
    times: dict[str, list[float]] = {name: [] for name in totals}
    with PostgresServer() as server:
        stores: dict[str, ChatStore] = {
            "SQLite FTS5": open_store(":memory:"),
            "PostgreSQL tsvector": open_store(server.url),
        }
        try:
            for path in paths:
                corpus = read_script(path, source=path.parent.name)
                chat = fresh_copy(corpus.chat)
                recap_all(chat, backend, settings, counter)
                detect_scene_breaks(chat, backend, settings)
                recap_scenes(chat, backend, settings, counter)
                update_running_recap(chat, backend, settings, counter, now_ms=0)
                for message in chat.messages[: running.covered_upto(chat) + 1]:
                    message["is_system"] = True
                scored = [q for q in corpus.questions if answer_words(q.answer)]
                for name, store in stores.items():
                    chat_id = f"{path.parent.name}-{path.stem}"
                    store.import_chat(chat, chat_id=chat_id)
                    stored = store.load_chat(chat_id)
                    search = ChatSearch(stored, store)
                    for question in scored:
                        start = time.perf_counter()
                        text, _ = search.recall(settings, counter, question.question)
                        times[name].append(time.perf_counter() - start)
                        totals[name].append(answer_recall([question], text))
                        if question.planted:
                            planted[name][0] += planted_found([question], text)[0]
                            planted[name][1] += 1
        finally:
            for store in stores.values():
                store.close()
    figures: dict[str, object] = {"questions": len(totals["SQLite FTS5"])}
    for name in totals:
        figures[f"answer words held, {name}"] = f"{sum(totals[name]) / len(totals[name]):.0%}"
        figures[f"planted facts held, {name}"] = f"{planted[name][0]}/{planted[name][1]}"
        figures[f"recall p50 ms, {name}"] = round(percentile(times[name], 50) * 1e3, 2)
    report("recall: PostgreSQL full-text search against SQLite FTS5, same questions", figures)
    report("recall on one 10,000-message chat: PostgreSQL against SQLite", large_chat_times())


def large_chat_times() -> dict[str, object]:
    """Recall's time on `bench_recall`'s 10,000-message chat, alone in a fresh database of
    each kind, with the chat's own user messages as queries."""
    settings = Settings(recall_enabled=True)
    counter = get_counter(settings.tokenizer)
    chat, queries = recapped_chat(settings, counter)
    figures: dict[str, object] = {}
    p50: dict[str, float] = {}
    with PostgresServer() as server:
        for name, url in (("SQLite", ":memory:"), ("PostgreSQL", server.url)):
            store = open_store(url)
            try:
                store.import_chat(chat, chat_id=chat.id)
                stored = store.load_chat(chat.id)
                session = Session(stored, settings=settings)
                session.refresh()  # hides what the running recap covers, keeps the breaks
                breaks = session.state.breaks
                search = ChatSearch(stored, store)
                ask = partial(search.recall, settings, counter, breaks=breaks)
                ask(queries[0])
                times = timed_each(queries, ask)
            finally:
                store.close()
            p50[name] = percentile(times, 50)
            figures[f"recall p50 ms, {name}"] = round(p50[name] * 1e3, 2)
            figures[f"recall p99 ms, {name}"] = round(percentile(times, 99) * 1e3, 2)
    figures["PostgreSQL against SQLite (p50)"] = round(p50["PostgreSQL"] / p50["SQLite"], 2)
    return figures


if __name__ == "__main__":
    main()
