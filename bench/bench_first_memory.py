"""How soon a long chat that reaches the proxy for the first time gets its memory.

A real `autorecap serve` (its own worker, offline recaps, the embedded defaults) between a
client and a loopback upstream that records what it is sent. The client sends a whole chat of
400 and then 1,000 messages at once, as the proxy sees it from SillyTavern (roles only: no
names, no dates), then keeps asking with the same history. Printed: when the reply came, when
the running recap existed, and when the upstream first got the memory with the old scenes
hidden, as seconds after the first reply. Figures only, never asserted."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any, ClassVar

import httpx

from _common import report
from autorecap.evaluation.corpus import from_generated, proxy_view
from autorecap.testing import generate
from autorecap.testing.llm import send_json
from bench_proxy import free_port, wait_until_up
from loopback import ANSWER

SIZES = (400, 1000)
POLL_S = 0.5
"""A user who keeps sending (real ones pause longer: the worker waits while requests come in)."""
DEADLINE_S = 120.0
REPLY = json.loads(ANSWER)["choices"][0]["message"]["content"]
MARK = "[autorecap-bench-memory]"
"""The running recap template's opening, to tell an injected memory in the upstream's request."""


class _Upstream(BaseHTTPRequestHandler):
    """Answers at once and keeps the message count and whether the memory was in it."""

    seen: ClassVar[list[tuple[float, int, bool]]] = []

    def do_POST(self) -> None:
        body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))))
        messages = body.get("messages", [])
        carried = any(MARK in str(m.get("content", "")) for m in messages)
        _Upstream.seen.append((time.monotonic(), len(messages), carried))
        send_json(self, ANSWER)

    def log_message(self, *args: object) -> None:
        return


def proxied_history(size: int) -> list[dict[str, str]]:
    corpus = proxy_view(from_generated(generate(size, seed=11), "narrated", f"first-{size}"))
    items = [{"role": "system", "content": "Continue the story."}]
    for message in corpus.chat.messages:
        items.append({"role": "user" if message.is_user else "assistant", "content": message.text})
    return items


def measure(http: httpx.Client, origin: str, size: int) -> dict[str, Any]:
    chat = f"first-{size}"
    url = f"{origin}/c/{chat}/v1/chat/completions"
    history = proxied_history(size)
    _Upstream.seen.clear()
    start = time.monotonic()
    answer = http.post(url, json={"model": "m", "messages": history})
    answer.raise_for_status()
    replied = time.monotonic()
    history.append({"role": "assistant", "content": REPLY})
    recap_at = injected_at = None
    hidden = 0
    while time.monotonic() - replied < DEADLINE_S:
        if recap_at is None:
            versions = http.get(f"{origin}/api/chats/{chat}/running").json()["versions"]
            if versions:
                recap_at = time.monotonic()
        asked = [*history, {"role": "user", "content": "And then?"}]
        http.post(url, json={"model": "m", "messages": asked}).raise_for_status()
        _, count, carried = _Upstream.seen[-1]
        if carried:
            injected_at = _Upstream.seen[-1][0]
            hidden = len(asked) - (count - 1)
            break
        time.sleep(POLL_S)
    return {
        f"{size} messages: first reply s": replied - start,
        f"{size} messages: running recap exists, s after the reply": (
            recap_at - replied if recap_at else "not within 120 s"
        ),
        f"{size} messages: memory in the upstream request, s after the reply": (
            injected_at - replied if injected_at else "not within 120 s"
        ),
        f"{size} messages: messages hidden from that request": hidden,
    }


def main() -> None:
    upstream = ThreadingHTTPServer(("127.0.0.1", 0), _Upstream)
    threading.Thread(target=upstream.serve_forever, daemon=True).start()
    upstream_url = f"http://127.0.0.1:{upstream.server_address[1]}/v1"
    with tempfile.TemporaryDirectory() as folder:
        home = Path(folder)
        settings = {"global": {"running_scene_recap_template": f"{MARK}\n{{{{running_recap}}}}"}}
        (home / "settings.json").write_text(json.dumps(settings))
        with httpx.Client(timeout=60) as probe:
            port = free_port()
            command = [
                sys.executable,
                "-c",
                "from autorecap.cli import main; main()",
                "serve",
                "--upstream",
                upstream_url,
                "--port",
                str(port),
                "--db",
                str(home / "proxy.db"),
            ]
            env = {**os.environ, "AUTORECAP_HOME": folder}
            server = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL)
            origin = f"http://127.0.0.1:{port}"
            try:
                wait_until_up(f"{origin}/openapi.json", server)
                figures: dict[str, Any] = {}
                for size in SIZES:
                    figures.update(measure(probe, origin, size))
                report("first request of a long chat through the proxy (offline recaps)", figures)
            finally:
                server.terminate()
                server.wait(timeout=30)
    upstream.shutdown()
    upstream.server_close()


if __name__ == "__main__":
    main()
