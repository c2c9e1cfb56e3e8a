"""A stand-in for an LLM on loopback: a real OpenAI-compatible HTTP server that answers
autorecap's own prompts with plausible recaps, and counts what it was sent.

It is for measuring what the LLM side costs (calls, prompt tokens) and for testing the whole
path without a model: a message gets a note made of its first words, a batch gets one numbered
line per message, a scene gets its first sentences up to the asked length, a running recap to
condense gets each line halved, a scene-break question gets "no break". Answers carry `usage`
counted with the same tokenizer as autorecap's, as real servers report it.

```python
with PlausibleLLM() as llm:
    backend = OpenAICompatBackend(base_url=llm.url, api_key_env="")
    ...
    llm.calls, llm.prompt_tokens
```
"""

from __future__ import annotations

import json
import re
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from autorecap.core.tokens import TokenCounter, get_counter

_NUMBERED = re.compile(r"^\[(\d+)\] ([^:\n]{1,60}): (.*)$", re.MULTILINE)
_MAX_TOKENS = re.compile(r"at most (\d+) tokens")
_MARKUP = re.compile(r"[*\"“”]")
_OPENS = re.compile(r"\b(?:later|next morning|the next day|meanwhile)\b", re.IGNORECASE)
"""A message that opens a scene, as the stand-in judges it (a time phrase near its start)."""


class PlausibleLLM:
    """The server: `url` is the base URL to give a backend; `calls`, `prompt_tokens` and
    `completion_tokens` count what it answered, `kinds` which prompt each call was."""

    def __init__(self, *, tokenizer: str = "cl100k", delay_s: float = 0.0) -> None:
        self.counter = get_counter(tokenizer)
        self.delay_s = delay_s
        """How long each answer takes (a test that needs a worker caught mid-call)."""
        self.calls = 0
        self.prompt_tokens = 0
        self.completion_tokens = 0
        self.kinds: list[str] = []
        self.by_kind: dict[str, int] = {}
        """Prompt tokens per kind of prompt."""
        self._lock = threading.Lock()
        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        self.httpd.daemon_threads = True
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}/v1"
        self._thread = threading.Thread(
            target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True
        )

    def __enter__(self) -> PlausibleLLM:
        self._thread.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        error: BaseException | None,
        trace: TracebackType | None,
    ) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self._thread.join(timeout=5)

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The completion for one request body."""
        prompt = "\n".join(str(m.get("content", "")) for m in body.get("messages", []))
        kind, content = _reply(prompt, self.counter)
        prompt_tokens = self.counter.count(prompt)
        completion_tokens = self.counter.count(content)
        with self._lock:
            self.calls += 1
            self.prompt_tokens += prompt_tokens
            self.completion_tokens += completion_tokens
            self.kinds.append(kind)
            self.by_kind[kind] = self.by_kind.get(kind, 0) + prompt_tokens
        return {
            "id": f"plausible-{self.calls}",
            "object": "chat.completion",
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": content},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt_tokens,
                "completion_tokens": completion_tokens,
                "total_tokens": prompt_tokens + completion_tokens,
            },
        }


def _reply(prompt: str, counter: TokenCounter) -> tuple[str, str]:
    if "scene_breaks_at" in prompt:
        return "break", json.dumps({"scene_breaks_at": [], "reason": "no clear change"})
    numbered = _NUMBERED.findall(prompt)
    if numbered and "For each of the" in prompt:
        lines = [
            f"[{n}] {'NEW SCENE: ' if _OPENS.search(text[:80]) else ''}{name} said that "
            f"{_third_person(_gist(text, 0.25), name)}"
            for n, name, text in numbered
        ]
        return "messages", "\n".join(lines)
    if "running memory" in prompt:
        lines = [line for line in prompt.splitlines() if line.startswith("- ")]
        limit = _MAX_TOKENS.search(prompt)
        target = int(limit.group(1)) if limit else 0
        # The oldest lines halved first, as asked, until they fit the asked length.
        condensed = list(lines)
        for _ in range(4):  # passes over the old lines, each halving what is still too long
            for index in range(len(condensed)):
                if counter.count("\n".join(condensed)) <= target:
                    return "running", "\n".join(condensed)
                condensed[index] = f"- {_gist(condensed[index][2:], 0.5)}"
        return "running", "\n".join(condensed)
    if "Recap the scene" in prompt:
        limit = _MAX_TOKENS.search(prompt)
        words = int(limit.group(1)) * 2 // 3 if limit else 100
        body = prompt.split(":\n\n", 1)[-1].split("\n\nRecap the scene", 1)[0]
        text = " ".join(line.split(": ", 1)[-1] for line in body.splitlines())
        return "scene", "In this scene: " + " ".join(_MARKUP.sub(" ", text).split()[:words])
    message = prompt.rsplit(":\n", 1)[-1].split("\n\nAnswer with", 1)[0]
    speaker = re.search(r"Message from ([^\n:]{1,60}):\n", prompt)
    name = speaker.group(1) if speaker else "Someone"
    return "message", f"{name} said that {_third_person(_gist(message, 0.25), name)}"


def _third_person(text: str, name: str) -> str:
    """A note says who: "I" becomes the speaker's name."""
    return re.sub(r"\bI\b", name, text)


def _gist(text: str, share: float) -> str:
    """About `share` of a text's words (at least six), taken across the whole text (every
    message says something of its own), as a sentence without the chat's markup."""
    words = _MARKUP.sub(" ", text).split()
    # A long message is never given back whole (autorecap refuses copies); a short one may be.
    step = max(2 if len(words) >= 8 else 1, min(round(1 / share), len(words) // 6))
    kept = words[::step]
    return (" ".join(kept).rstrip(".,;:!?") + ".") if kept else "Nothing happened."


def send_json(handler: BaseHTTPRequestHandler, data: bytes) -> None:
    """Answer a request of a loopback test server with a JSON body (200)."""
    handler.send_response(200)
    handler.send_header("Content-Type", "application/json")
    handler.send_header("Content-Length", str(len(data)))
    handler.end_headers()
    handler.wfile.write(data)


def _handler(llm: PlausibleLLM) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            length = int(self.headers.get("Content-Length", 0))
            try:
                body = json.loads(self.rfile.read(length))
            except ValueError:
                self.send_error(400, "not JSON")
                return
            if llm.delay_s:
                time.sleep(llm.delay_s)
            data = json.dumps(llm.answer(body)).encode()
            send_json(self, data)

        def log_message(self, *args: object) -> None:
            return

    return Handler
