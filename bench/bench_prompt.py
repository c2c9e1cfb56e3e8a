"""Prompt assembly of a 10,000-message chat into an 8k context (chat and text completion), and
`autorecap inject` end to end on it, against reading the chat alone as the baseline. Figures and
ratios, never asserted."""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from _common import median, report, timed
from autorecap import read_chat, set_data, write_chat
from autorecap.core import running
from autorecap.core.events import ManualClock
from autorecap.core.prompt import assemble_chat, assemble_text, history_from_chat
from autorecap.session import Session
from autorecap.settings import Settings
from autorecap.testing import generate

N_MESSAGES = 10_000


def main() -> None:
    generated = generate(N_MESSAGES, seed=21, with_recaps=True)
    chat = generated.chat
    for end in generated.scene_ends[:-4]:
        set_data(chat.messages[end], "scene_break", True)
    running.add_version(
        chat,
        "The Kestrel left Port Anvil; Mira owes Osric Hesk 340 crowns.",
        scene_count=3,
        excluded_count=1,
        prev_scene_index=0,
        new_scene_index=generated.scene_ends[0],
        now_ms=0,
    )
    settings = Settings(auto_hide_scene_count=-1, running_scene_recap_position=1)
    session = Session(chat, clock=ManualClock(), settings=settings)
    history = history_from_chat(chat.messages)
    main_prompt = "You are Captain Mira. Stay in character."

    def chat_form() -> None:
        assemble_chat(main_prompt, history, session.slots, session.counter, context_size=8192)

    def text_form() -> None:
        assemble_text(
            main_prompt,
            history,
            session.slots,
            session.counter,
            context_size=8192,
            user_name="Tomas",
            char_name="Captain Mira",
        )

    chat_s = median(timed(chat_form, repeat=20))
    text_s = median(timed(text_form, repeat=20))
    built = assemble_chat(main_prompt, history, session.slots, session.counter, context_size=8192)

    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "big.jsonl"
        write_chat(chat, path)
        read_s = median(timed(lambda: read_chat(path), repeat=5))
        env = dict(os.environ, AUTORECAP_HOME=str(Path(folder) / "home"))
        script = Path(sys.executable).with_name("autorecap")
        runs = []
        for _ in range(3):
            start = time.perf_counter()
            subprocess.run(
                [str(script), "inject", str(path)],
                env=env,
                check=True,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
            runs.append(time.perf_counter() - start)
        version_runs = []
        for _ in range(3):
            start = time.perf_counter()
            subprocess.run(
                [str(script), "--version"], env=env, check=True, stdout=subprocess.DEVNULL
            )
            version_runs.append(time.perf_counter() - start)

    report(
        "prompt assembly: 10,000 messages into 8,192 tokens",
        {
            "chat-completion assembly ms": chat_s * 1e3,
            "text-completion assembly ms": text_s * 1e3,
            "history messages kept": len(built.included),
            "prompt tokens": built.tokens,
            "read_chat of the same chat ms (baseline)": read_s * 1e3,
            "assembly vs read_chat (ratio)": chat_s / read_s,
        },
    )
    report(
        "autorecap inject end to end, 10,000 messages",
        {
            "inject s (process start to exit)": median(runs),
            "autorecap --version s (start-up alone)": median(version_runs),
        },
    )


if __name__ == "__main__":
    main()
