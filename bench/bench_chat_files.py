"""Chat files: read + write of a 10,000-message chat against plain json per line; set_data
calls per second; token counting against the raw encoder. Figures and ratios, never asserted."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path

import quicktok

from _common import median, report, timed
from autorecap import TokenCounter, read_chat, set_data, write_chat
from autorecap.testing import generate_chat

N_MESSAGES = 10_000


def bench_read_write(folder: Path) -> None:
    path = folder / "big.jsonl"
    write_chat(generate_chat(N_MESSAGES, seed=7, with_recaps=True), path)
    size_mb = path.stat().st_size / 1e6
    out_baseline = folder / "baseline.jsonl"
    out_ours = folder / "ours.jsonl"

    def baseline_read() -> list[object]:
        return [json.loads(line) for line in path.read_text(encoding="utf-8").split("\n")]

    parsed = baseline_read()

    def baseline_write() -> None:
        text = "\n".join(json.dumps(o, ensure_ascii=False, separators=(",", ":")) for o in parsed)
        out_baseline.write_text(text, encoding="utf-8")

    chat = read_chat(path)

    def ours_write() -> None:
        write_chat(chat, out_ours)

    def ours_write_one_changed() -> None:
        set_data(chat.messages[N_MESSAGES // 2], "memory", "changed once more")
        write_chat(chat, out_ours)

    base_r = median(timed(baseline_read))
    base_w = median(timed(baseline_write))
    ours_r = median(timed(lambda: read_chat(path)))
    ours_w = median(timed(ours_write))
    ours_w1 = median(timed(ours_write_one_changed))
    assert out_ours.read_bytes() != b""
    report(
        "chat files: read + write, 10,000 messages",
        {
            "file size MB": size_mb,
            "baseline read s (json.loads per line)": base_r,
            "baseline write s (json.dumps per line)": base_w,
            "autorecap read s": ours_r,
            "autorecap write s (unchanged, byte-exact)": ours_w,
            "autorecap write s (one message changed)": ours_w1,
            "read+write ratio vs baseline (target <= 3)": (ours_r + ours_w) / (base_r + base_w),
            "read under 0.5 s": ours_r < 0.5,
        },
    )


def bench_set_data() -> None:
    chat = generate_chat(N_MESSAGES, seed=3, with_recaps=True)
    messages = chat.messages
    rounds = 5

    def run() -> None:
        for i in range(rounds):
            text = f"recap round {i}"
            for message in messages:
                set_data(message, "memory", text)

    times = timed(run, repeat=3)
    calls = rounds * len(messages)
    per_call_us = median(times) / calls * 1e6
    with_swipes = sum(1 for m in messages if m.get("swipe_info"))
    report(
        "set_data",
        {
            "calls per run": calls,
            "messages with swipe_info (copy on write)": with_swipes,
            "us per call (target < 20; seed quotes 1,000-5,000)": per_call_us,
            "calls per second": 1e6 / per_call_us,
        },
    )


def bench_tokens() -> None:
    chat = generate_chat(N_MESSAGES, seed=11)
    texts = [m.text for m in chat.messages]
    encoding = quicktok.get_encoding("cl100k_base")
    total_tokens = sum(encoding.count(t) for t in texts)

    def raw() -> None:
        for text in texts:
            encoding.count(text)

    def cold() -> None:
        counter = TokenCounter("cl100k")
        for text in texts:
            counter.count(text)

    warm_counter = TokenCounter("cl100k")
    for text in texts:
        warm_counter.count(text)

    def warm() -> None:
        for text in texts:
            warm_counter.count(text)

    raw_s, cold_s, warm_s = median(timed(raw)), median(timed(cold)), median(timed(warm))
    report(
        "token counting (cl100k)",
        {
            "texts": len(texts),
            "tokens": total_tokens,
            "raw encoder M tokens/s": total_tokens / raw_s / 1e6,
            "TokenCounter cold M tokens/s": total_tokens / cold_s / 1e6,
            "TokenCounter cached M tokens/s": total_tokens / warm_s / 1e6,
            "cold overhead vs raw (ratio)": cold_s / raw_s,
            "cached speed-up vs raw (ratio)": raw_s / warm_s,
        },
    )


def main() -> None:
    with tempfile.TemporaryDirectory() as folder:
        bench_read_write(Path(folder))
    bench_set_data()
    bench_tokens()


if __name__ == "__main__":
    main()
