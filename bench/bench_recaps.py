"""Recaps: the offline pipeline on 1,000 and 10,000 messages (messages per second; target at
least 1,000), scene detection's time per message, and what the LLM side costs: calls and prompt
tokens per 1,000 chat tokens through a counting loopback OpenAI-compatible server
(`autorecap.testing.llm.PlausibleLLM`), the default batched pipeline against one call per
message, in the same run, and on every chat of the eval's dev and held-out sets. Figures and
ratios, never asserted."""

from __future__ import annotations

import time
from collections import Counter
from collections.abc import Mapping
from typing import Any

from _common import report
from autorecap.core.model import Chat
from autorecap.core.tokens import get_counter
from autorecap.evaluation import shipped
from autorecap.evaluation.run import fresh_copy
from autorecap.recap import OfflineBackend, run_pipeline
from autorecap.recap.backends import make_backend
from autorecap.recap.offline.cues import Turn, score_scene_starts
from autorecap.sample import sample_chat_path
from autorecap.settings import Settings
from autorecap.stfiles.jsonl import read_chat
from autorecap.testing import generate
from autorecap.testing.llm import PlausibleLLM


def offline_figures() -> None:
    counter = get_counter()
    run_pipeline(generate(50, seed=1).chat, OfflineBackend(counter), Settings(), counter, now_ms=0)
    figures: dict[str, object] = {}
    for size in (1000, 10_000):
        chat = generate(size, seed=3).chat
        start = time.perf_counter()
        result = run_pipeline(chat, OfflineBackend(counter), Settings(), counter, now_ms=0)
        elapsed = time.perf_counter() - start
        figures[f"{size:,} messages: whole pipeline s"] = elapsed
        figures[f"{size:,} messages: messages per second (target >= 1,000)"] = size / elapsed
        figures[f"{size:,} messages: scenes, running recap versions"] = (
            f"{len(result.breaks_found)}, {result.running_versions}"
        )
    chat = generate(10_000, seed=3).chat
    turns = [Turn(m.text, m.name, m.is_narrator, m.is_hidden, m.send_time) for m in chat.messages]
    start = time.perf_counter()
    score_scene_starts(turns)
    scored = time.perf_counter() - start
    figures["scene cues scored, microseconds per message (10,000)"] = scored / len(turns) * 1e6
    report("offline pipeline", figures)


def _chat_tokens(chat: Chat) -> int:
    counter = get_counter()
    return sum(counter.count(m.text) for m in chat.messages)


def _every_tier(url: str, values: Mapping[str, Any]) -> Settings:
    """Settings for the counting LLM at `url` with every tier on (scene detection by the LLM
    too), `values` over them."""
    return Settings.model_validate(
        {
            "recap_backend": "openai",
            "llm_base_url": url,
            "llm_api_key_env": "",
            "scene_break_detection": "llm",
            **values,
        }
    )


def llm_figures() -> None:
    """Every tier on (message recaps, scene detection by the LLM, scene recaps, the running
    recap) on the bundled sample chat and a generated 1,000-message one; and the cheapest
    setup that still makes the injected memory (no message recaps, scenes by the cues)."""
    ways: dict[str, dict[str, Any]] = {
        "one call per message": {"llm_batch_tokens": 0, "llm_own_recap_tokens": 0},
        "batched (the default)": {},
        "message recaps skipped (nothing injects them), scenes by the cues": {
            "skip_unused_message_recaps": True,
            "scene_break_detection": "cues",
        },
    }
    chats = {
        "sample chat (199 messages)": lambda: read_chat(sample_chat_path()),
        "generated chat (1,000 messages)": lambda: generate(1000, seed=7).chat,
    }
    counter = get_counter()
    with PlausibleLLM() as llm:
        for chat_name, load in chats.items():
            figures: dict[str, object] = {}
            baseline = 0.0
            for way, values in ways.items():
                chat = load()
                tokens = _chat_tokens(chat)
                settings = _every_tier(llm.url, values)
                backend = make_backend(settings)
                first = len(llm.kinds)
                run_pipeline(chat, backend, settings, counter, now_ms=0)
                usage = backend.usage
                per_thousand = usage.prompt_tokens / tokens * 1000
                baseline = baseline or per_thousand
                kinds = Counter(llm.kinds[first:])
                figures[f"{way}: calls"] = usage.calls
                figures[f"{way}: prompt tokens per 1,000 chat tokens"] = per_thousand
                figures[f"{way}: against one call per message"] = per_thousand / baseline
                figures[f"{way}: calls by prompt"] = ", ".join(
                    f"{kind} {n}" for kind, n in sorted(kinds.items())
                )
            figures["chat tokens"] = tokens
            report(f"LLM cost, every tier on, {chat_name}", figures)


def eval_chat_costs() -> None:
    """Every tier on, the default settings, on each chat of `autorecap eval`'s dev and held-out
    sets (narrated, dialogue, texting, group): prompt tokens per chat token, the dearest chat
    and the cheapest, with and without short messages as their own recaps."""
    counter = get_counter()
    chats = [c for which in ("dev", "heldout") for c in shipped(which)]
    with PlausibleLLM() as llm:
        for way, values in {
            "default": {},
            "every message asked (llm_own_recap_tokens 0)": {"llm_own_recap_tokens": 0},
        }.items():
            costs: dict[str, float] = {}
            for corpus in chats:
                chat = fresh_copy(corpus.chat)
                settings = _every_tier(llm.url, values)
                backend = make_backend(settings)
                run_pipeline(chat, backend, settings, counter, now_ms=0)
                costs[corpus.name] = backend.usage.prompt_tokens / _chat_tokens(chat)
            dearest = max(costs, key=costs.__getitem__)
            report(
                f"LLM cost on the eval chats ({len(chats)}), {way}",
                {
                    "prompt tokens per chat token, dearest": costs[dearest],
                    "dearest chat": dearest,
                    "cheapest": min(costs.values()),
                    "over 2": sum(1 for cost in costs.values() if cost > 2),
                },
            )


def main() -> None:
    offline_figures()
    llm_figures()
    eval_chat_costs()


if __name__ == "__main__":
    main()
