"""The upstream's API key (`--api-key-env`) never leaves the server: a whole session through a
real uvicorn server with access control on, then the key is searched for in every log line,
everything the server printed, every response body, the exported chats and the raw bytes of the
SQLite files. The fake upstream refuses some requests with an error body that quotes the key,
as real servers do ("Incorrect API key provided: sk-...")."""

from __future__ import annotations

import json
import logging
import secrets
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import httpx
import openai
import pytest

from autorecap import sample_chat_path
from autorecap.jobs.queue import JobQueue
from autorecap.store.sqlite import SQLiteStore

from .conftest import Proxy, StartProxy, Upstream

KEY_VARIABLE = "AUTORECAP_TEST_UPSTREAM_KEY"
CLIENT_KEY = "alice-key-0123456789"
SYSTEM = {"role": "system", "content": "You are Mira, captain of the Heron."}


def user(text: str) -> dict[str, str]:
    return {"role": "user", "content": text}


def echo(status: int, secret: str) -> bytes:
    """What a real upstream answers to a key it refuses: the key, quoted."""
    message = f"Incorrect API key provided: {secret}. Header was: Bearer {secret}"
    return json.dumps({"error": {"message": message, "code": status}}).encode()


def wait_until(check: Callable[[], Any], *, timeout: float, what: str) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out after {timeout} s waiting for {what}"
        time.sleep(0.1)


class Seen:
    """Every body the server answered with."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def keep(self, response: httpx.Response) -> httpx.Response:
        self.bodies.append(response.read())
        return response


def test_the_upstream_key_never_leaves_the_server(
    start_proxy: StartProxy,
    upstream: Upstream,
    db_path: Path,
    tmp_path: Path,
    home: Path,
    monkeypatch: pytest.MonkeyPatch,
    caplog: pytest.LogCaptureFixture,
    capfd: pytest.CaptureFixture[str],
) -> None:
    secret = f"sk-upstream-{secrets.token_hex(20)}"
    monkeypatch.setenv(KEY_VARIABLE, secret)
    caplog.set_level(logging.DEBUG)
    keys_file = tmp_path / "keys.txt"
    keys_file.write_text(f"alice: {CLIENT_KEY}\n")
    # The recap worker waits until the proxy's own error cases are done (the upstream answers
    # in order, and the worker would take the scripted errors).
    store = SQLiteStore(db_path)
    JobQueue(store).pause()
    store.close()
    proxy: Proxy = start_proxy(
        worker=True, api_key_env=KEY_VARIABLE, keys_file=keys_file, recap_backend="upstream"
    )
    seen = Seen()
    auth = {"Authorization": f"Bearer {CLIENT_KEY}"}
    client = openai.OpenAI(
        base_url=proxy.chat_url("voyage"), api_key=CLIENT_KEY, max_retries=0, timeout=20
    )
    http = httpx.Client(timeout=20, headers=auth, event_hooks={"response": [seen.keep]})
    try:
        # --- chat completions, plain and streamed ---
        history = [SYSTEM, user("Where are we headed, captain?")]
        reply = client.chat.completions.create(model="m", messages=history)
        assert reply.choices[0].message.content == "Reply 1."
        seen.bodies.append(reply.model_dump_json().encode())
        history += [
            {"role": "assistant", "content": "Reply 1."},
            user("Then we sail north, past the reef."),
        ]
        pieces = []
        with client.chat.completions.create(model="m", messages=history, stream=True) as stream:
            for chunk in stream:
                pieces.append(chunk.choices[0].delta.content or "")
                seen.bodies.append(chunk.model_dump_json().encode())
        assert "".join(pieces) == "Reply 2."
        # The key did go upstream (so finding it nowhere else means something).
        assert {r.headers.get("authorization") for r in upstream.requests} == {f"Bearer {secret}"}

        # --- upstream errors that quote the key: relayed, with the key blanked ---
        base = proxy.chat_url("voyage")
        body = {"model": "m", "messages": [*history, user("Status?")]}
        for status in (401, 500):
            upstream.error(status, echo(status, secret))
            response = http.post(f"{base}/chat/completions", json=body)
            assert response.status_code == status
            assert "Incorrect API key provided" in response.text
            upstream.error(status, echo(status, secret))
            with http.stream(
                "POST", f"{base}/chat/completions", json={**body, "stream": True}
            ) as response:
                assert response.status_code == status
                assert b"Incorrect API key provided" in response.read()
        upstream.error(401, echo(401, secret))
        with pytest.raises(openai.AuthenticationError) as refused:
            client.chat.completions.create(model="m", messages=body["messages"])
        seen.bodies.append(str(refused.value).encode())
        # The passthrough routes use the same upstream key.
        http.get(f"{proxy.url}/models")
        http.post(f"{proxy.url}/completions", json={"model": "m", "prompt": "Once"})

        # --- the REST API ---
        api = proxy.origin + "/api"
        sample = sample_chat_path().read_bytes()
        assert http.post(f"{api}/chats?id=sample", content=sample).status_code == 201
        for url in (
            "/chats",
            "/chats/voyage",
            "/chats/voyage/messages",
            "/chats/voyage/scenes",
            "/chats/voyage/running",
            "/chats/voyage/memory",
            "/chats/voyage/preview",
            "/chats/voyage/preview?format=text",
            "/settings",
            "/settings?chat=voyage",
            "/jobs",
        ):
            assert http.get(api + url).status_code == 200, url
        # One message per recap call: the upstream answers "Reply N.", not numbered lines.
        changes = {"llm_api_key_env": KEY_VARIABLE, "llm_batch_tokens": 0}
        patched = http.patch(f"{api}/settings", json=changes)
        assert patched.status_code == 200
        assert http.post(f"{api}/jobs/pause").status_code == 403
        http.get(f"{api}/chats/voyage", headers={"Authorization": f"Bearer {secret}"})

        # --- a recap by the upstream model, whose first answers quote the key ---
        upstream.error(500, echo(500, secret))
        upstream.error(401, echo(401, secret))
        store = SQLiteStore(db_path)
        JobQueue(store).resume()
        store.close()
        assert http.post(f"{api}/chats/voyage/recap?force=true").status_code == 200

        def settled() -> bool:
            counts = http.get(f"{api}/jobs").json()["counts"]
            return counts["queued"] + counts["running"] == 0 and counts["done"] > 0

        wait_until(settled, timeout=60, what="the recap jobs")
        jobs = http.get(f"{api}/jobs").json()["jobs"]
        assert any(job["state"] == "done" for job in jobs)
        # The refused recap call left its trace (masked): the key was asked for and refused.
        assert any("401" in record.getMessage() for record in caplog.records) or any(
            "check the API key" in (job["error"] or "") for job in jobs
        )

        # --- export ---
        exported = tmp_path / "voyage.jsonl"
        response = http.get(f"{api}/chats/voyage/export")
        assert response.status_code == 200
        exported.write_bytes(response.content)
    finally:
        client.close()
        http.close()
        proxy.stop()

    leaks: list[str] = []
    hidden = secret.removeprefix("sk-upstream-")
    # The clients' key to autorecap is a secret too: it is kept nowhere either.
    needles = (secret, hidden, hidden[: len(hidden) // 2], hidden[len(hidden) // 2 :], CLIENT_KEY)

    def search(where: str, data: bytes | str) -> None:
        raw = data.encode("utf-8", "replace") if isinstance(data, str) else data
        if any(needle.encode() in raw for needle in needles):
            leaks.append(where)

    for number, body_bytes in enumerate(seen.bodies):
        search(f"response body #{number}", body_bytes)
    for record in caplog.records:
        search(f"log record {record.name}", record.getMessage())
        search(f"log record {record.name} (formatted)", logging.Formatter().format(record))
    printed = capfd.readouterr()
    search("the server's stdout", printed.out)
    search("the server's stderr", printed.err)
    search("the exported chat", exported.read_bytes())
    for suffix in ("", "-wal", "-shm"):
        path = Path(f"{db_path}{suffix}")
        if path.exists():
            search(path.name, path.read_bytes())
    for path in home.rglob("*"):
        if path.is_file():
            search(str(path.relative_to(home)), path.read_bytes())
    assert leaks == [], f"a key leaked into: {leaks}"
    assert len(seen.bodies) > 20
