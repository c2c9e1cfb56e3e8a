"""Recaps: offline message recaps per second on a 1,000-message chat; recall@budget of the
offline engine and of the recent-messages baseline at 1,000 and 2,000 tokens; the offline
pipeline end to end on 1,000 messages; the same through a loopback LLM server answering every
call after 200 ms, at the configured concurrency against one call at a time, and LLM calls per
scene. Figures and ratios, never asserted."""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from _common import report
from autorecap.core.tokens import get_counter
from autorecap.evaluation import by_style, evaluate_chats
from autorecap.evaluation.corpus import generated_chats
from autorecap.recap.messages import recap_all
from autorecap.recap.offline.engine import OfflineBackend
from autorecap.recap.openai_compat import OpenAICompatBackend
from autorecap.recap.pipeline import run_pipeline
from autorecap.settings import Settings
from autorecap.testing import generate

LLM_DELAY_S = 0.2


class _SlowLLM(BaseHTTPRequestHandler):
    """Answers every chat completion after LLM_DELAY_S: a recap, or a scene-break verdict."""

    def do_POST(self) -> None:
        length = int(self.headers.get("Content-Length", 0))
        body = json.loads(self.rfile.read(length))
        time.sleep(LLM_DELAY_S)
        prompt = body["messages"][0]["content"]
        found = re.search(r"from (\d+) to (\d+)", prompt)
        if "scene_break_at" in prompt and found:  # a break at the earliest allowed message
            content = json.dumps({"scene_break_at": int(found.group(1)), "reason": "new place"})
        else:
            content = "Mira and Tomas argued about the chart and agreed to sail at dawn."
        answer = {"choices": [{"index": 0, "message": {"role": "assistant", "content": content}}]}
        data = json.dumps(answer).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)

    def log_message(self, *args: object) -> None:
        return


def offline_figures() -> None:
    counter = get_counter()
    chat = generate(1000, seed=3).chat
    start = time.perf_counter()
    stats = recap_all(chat, OfflineBackend(counter), Settings(), counter)
    elapsed = time.perf_counter() - start
    chat = generate(1000, seed=4).chat
    start = time.perf_counter()
    result = run_pipeline(chat, OfflineBackend(counter), Settings(), counter, now_ms=0)
    pipeline_s = time.perf_counter() - start
    report(
        "offline recaps, 1,000 messages",
        {
            "message recaps made": stats.made,
            "message recaps per second (target >= 1,000)": stats.made / elapsed,
            "whole pipeline s (recaps, scenes, scene recaps, running recap)": pipeline_s,
            "scenes found": len(result.breaks_found),
            "running recap versions": result.running_versions,
        },
    )
    figures: dict[str, object] = {}
    for row in by_style(evaluate_chats(generated_chats(size=1000), budgets=(1000, 2000))):
        for budget in (1000, 2000):
            key = f"{row.style} @ {budget} tokens"
            figures[f"{key}: memory answer recall"] = round(row.memory_recall[budget], 3)
            figures[f"{key}: latest-messages answer recall"] = round(row.baseline_recall[budget], 3)
    report("answer recall (offline engine, generated chats of 1,000 messages)", figures)


def llm_figures() -> None:
    server = ThreadingHTTPServer(("127.0.0.1", 0), _SlowLLM)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    base_url = f"http://127.0.0.1:{server.server_address[1]}/v1"
    counter = get_counter()
    try:
        timings = {}
        calls = {}
        scenes = 0
        for concurrency in (1, Settings().llm_concurrency):
            chat = generate(60, seed=5, scene_length=(12, 20)).chat
            backend = OpenAICompatBackend(base_url=base_url, api_key_env="", retries=0)
            settings = Settings(llm_concurrency=concurrency)
            start = time.perf_counter()
            result = run_pipeline(chat, backend, settings, counter, now_ms=0)
            timings[concurrency] = time.perf_counter() - start
            calls[concurrency] = backend.calls
            scenes = max(1, result.scene_recaps)
            backend.close()
    finally:
        server.shutdown()
        server.server_close()
        thread.join(timeout=10)
    high = Settings().llm_concurrency
    report(
        "LLM pipeline through a loopback server (200 ms a call), 60 messages",
        {
            "one call at a time s": timings[1],
            f"concurrency {high} s": timings[high],
            "speed-up": timings[1] / timings[high],
            "LLM calls": calls[high],
            "scenes recapped": scenes,
            "LLM calls per scene": calls[high] / scenes,
        },
    )


def main() -> None:
    offline_figures()
    llm_figures()


if __name__ == "__main__":
    main()
