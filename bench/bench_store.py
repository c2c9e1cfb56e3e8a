"""The store: persisting one changed message of a 10,000-message chat, against rewriting the
whole JSONL file as SillyTavern does; import and export of that chat. Figures, never asserted."""

from __future__ import annotations

import os
import tempfile
import time
from pathlib import Path

from _common import median, percentile, report, timed
from autorecap import read_chat, set_data, write_chat
from autorecap.autosave import OpenChat
from autorecap.store import SQLiteStore
from autorecap.testing import generate_chat

N_MESSAGES = 10_000
ROUNDS = 60


def main() -> None:
    with tempfile.TemporaryDirectory() as folder_name:
        folder = Path(folder_name)
        os.environ["AUTORECAP_HOME"] = str(folder / "home")
        path = folder / "big.jsonl"
        write_chat(generate_chat(N_MESSAGES, seed=5, with_recaps=True, chat_id="big"), path)
        chat = read_chat(path)
        store = SQLiteStore(folder / "bench.db")

        import_s = median(timed(lambda: store.import_chat(chat, replace=True), repeat=3))
        export_s = median(timed(lambda: store.export_chat("big"), repeat=3))
        load_s = median(timed(lambda: store.load_chat("big"), repeat=3))
        assert store.export_chat("big") == path.read_bytes()

        stored = OpenChat(store.load_chat("big"), store=store, debounce_ms=60_000)
        on_file = OpenChat(read_chat(path), path=path, debounce_ms=60_000)
        store_times: list[float] = []
        file_times: list[float] = []
        for i in range(ROUNDS):
            index = (i * 997) % N_MESSAGES
            set_data(stored.messages[index], "memory", f"changed {i}")
            start = time.perf_counter()
            stored.flush()
            store_times.append(time.perf_counter() - start)
            set_data(on_file.messages[index], "memory", f"changed {i}")
            start = time.perf_counter()
            on_file.flush()
            file_times.append(time.perf_counter() - start)
        stored.close()
        on_file.close()
        store.close()

    store_p50, file_p50 = median(store_times), median(file_times)
    report(
        "store: persist one changed message of 10,000",
        {
            "store flush p50 ms (target <= 2)": store_p50 * 1e3,
            "store flush p99 ms": percentile(store_times, 99) * 1e3,
            "whole-file rewrite p50 ms (SillyTavern's way)": file_p50 * 1e3,
            "speed-up vs whole-file rewrite (target >= 50)": file_p50 / store_p50,
            "synchronous": "FULL (WAL)",
        },
    )
    report(
        "store: import and export, 10,000 messages",
        {
            "import s": import_s,
            "export s (byte-exact)": export_s,
            "load s": load_s,
        },
    )


if __name__ == "__main__":
    main()
