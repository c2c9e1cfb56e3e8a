"""refresh_memory() on chats of 100, 1,000 and 10,000 messages, every message with a recap: cold
(first refresh of an opened chat) and incremental (a `send` of one message, whose handler
refreshes), against the seed algorithm as written (each message's text tokenized for the length
check, the growing concatenation tokenized at every step, on every refresh) with the same
tokenizer, in the same run. Figures and ratios, never asserted."""

from __future__ import annotations

import time

import quicktok

from _common import median, percentile, report
from autorecap import INCLUDED, get_data, get_memory, set_data
from autorecap.core import running
from autorecap.core.events import ManualClock
from autorecap.core.memory import MemoryState, short_token_limit
from autorecap.core.model import Message
from autorecap.session import Session
from autorecap.settings import Settings, chat_enabled
from autorecap.testing import generate

ENCODING = quicktok.get_encoding("cl100k_base")


def seed_refresh(messages: list[Message], settings: Settings, chat_id: str) -> str:
    """The seed's update_message_inclusion_flags() + injection, as written: no token cache."""
    if not chat_enabled(settings, chat_id):
        return ""
    limit = short_token_limit(settings)
    reached = False
    recap = ""
    for i in range(len(messages) - 1, -1, -1):
        message = messages[i]
        text = message.get("mes")
        tokens = ENCODING.count(text) if isinstance(text, str) and text else 0
        excluded = (
            get_data(message, "is_auto_recap_system_memory")
            or get_data(message, "exclude")
            or tokens < settings.message_length_threshold
        )
        if excluded:
            set_data(message, "include", None)
            continue
        if not reached:
            memory = get_memory(message)
            if not memory:
                set_data(message, "include", None)
                continue
            new_recap = f"{memory}\n{recap}" if recap else memory
            if ENCODING.count(new_recap) > limit:
                reached = True
                recap = ""
            else:
                set_data(message, "include", INCLUDED)
                recap = new_recap
                continue
        set_data(message, "include", None)
    return settings.running_scene_recap_template.replace("{{running_recap}}", "recap")


def build(n: int) -> tuple[Session, Settings]:
    generated = generate(n, seed=n, with_recaps=True)
    chat = generated.chat
    for end in generated.scene_ends:
        set_data(chat.messages[end], "scene_break", True)
    if generated.scene_ends:
        running.add_version(
            chat,
            "Mira owes Osric Hesk 340 crowns.",
            scene_count=1,
            excluded_count=1,
            prev_scene_index=0,
            new_scene_index=generated.scene_ends[0],
            now_ms=0,
        )
    # The seeds' refresh alone: the recall tier's search, on by default, is measured by
    # bench_recall.py (a 10,000-message chat: about 4 ms at p50).
    settings = Settings(recall_enabled=False)
    session = Session(chat, clock=ManualClock(), settings=settings)  # the first-ever refresh
    return session, settings


def bench_size(n: int) -> dict[str, object]:
    session, settings = build(n)
    cold: list[float] = []
    for _ in range(9 if n >= 10_000 else 25):
        session.state = MemoryState()
        session.counter.clear_cache()
        start = time.perf_counter()
        session.refresh()
        cold.append(time.perf_counter() - start)
    incremental: list[float] = []
    for i in range(200):
        start = time.perf_counter()
        message = session.send(f"Tomas asks about the chart, attempt {i}.")
        incremental.append(time.perf_counter() - start)
        set_data(message, "memory", f"Tomas asks about the chart ({i}).")
    assert not session.last_result or not session.last_result.full
    baseline: list[float] = []
    messages = session.chat.messages
    for _ in range(5 if n >= 10_000 else 20):
        start = time.perf_counter()
        seed_refresh(messages, settings, session.chat.id)
        baseline.append(time.perf_counter() - start)
    base_p50 = median(baseline)
    return {
        "cold p50 ms": median(cold) * 1e3,
        "cold p99 ms": percentile(cold, 99) * 1e3,
        "incremental (send) p50 ms": median(incremental) * 1e3,
        "incremental (send) p99 ms": percentile(incremental, 99) * 1e3,
        "seed loop p50 ms": base_p50 * 1e3,
        "speed-up incremental vs seed (target >= 100 at 10k)": base_p50 / median(incremental),
        "speed-up cold vs seed": base_p50 / median(cold),
    }


def main() -> None:
    for n in (100, 1_000, 10_000):
        report(f"refresh_memory, {n:,} messages", bench_size(n))
    print("\ntargets at 10,000: incremental p50 <= 1 ms, cold <= 100 ms, >= 100x the seed loop")


if __name__ == "__main__":
    main()
