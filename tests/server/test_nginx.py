"""docs/nginx.conf, run: a real nginx (Debian's, installed by `make test`) in front of two real
proxies on one PostgreSQL. A chat's requests all reach the same server, whether it is named by
the per-chat URL or the header; a streamed answer goes through as it comes; and when that
server is stopped, the chat's next request is answered by the other one, from the stored chat.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from .conftest import Proxy, StartProxy

REPO = Path(__file__).resolve().parents[2]
NGINX = shutil.which("nginx") or "/usr/sbin/nginx"
HISTORY = [
    {"role": "system", "content": "You are Mira."},
    {"role": "user", "content": "Where does the Heron sail?"},
]


@pytest.fixture
def db_path(postgres_url: str) -> str:
    """Both proxies on one PostgreSQL."""
    return postgres_url


@pytest.fixture
def balanced(
    start_proxy: StartProxy, tmp_path: Path, free_tcp_port: int
) -> Iterator[tuple[str, list[Proxy], Path]]:
    """nginx with docs/nginx.conf (its two servers swapped for two local proxies, its port
    for a free local one); yields nginx's origin, the proxies and nginx's access log."""
    proxies = [start_proxy(worker=True), start_proxy(worker=True)]
    port = free_tcp_port
    shipped = (REPO / "docs" / "nginx.conf").read_text()
    addresses = re.findall(r"server (10\.0\.0\.\d+:8008)", shipped)
    assert len(addresses) == 2, "docs/nginx.conf should name two servers"
    site = shipped.replace("listen 80;", f"listen 127.0.0.1:{port};")
    for address, proxy in zip(addresses, proxies, strict=True):
        site = site.replace(address, f"127.0.0.1:{proxy.port}")
    (tmp_path / "autorecap.conf").write_text(site)
    log = tmp_path / "access.log"
    (tmp_path / "nginx.conf").write_text(
        f"""
daemon off;
user root;
worker_processes 1;
pid {tmp_path}/nginx.pid;
error_log {tmp_path}/error.log warn;
events {{ worker_connections 256; }}
http {{
    log_format routed '$uri $upstream_addr $status';
    access_log {log} routed;
    client_body_temp_path {tmp_path}/body;
    proxy_temp_path {tmp_path}/proxy;
    fastcgi_temp_path {tmp_path}/fastcgi;
    uwsgi_temp_path {tmp_path}/uwsgi;
    scgi_temp_path {tmp_path}/scgi;
    include {tmp_path}/autorecap.conf;
}}
"""
    )
    with (tmp_path / "nginx.out").open("w") as out:
        nginx = subprocess.Popen(
            [NGINX, "-p", str(tmp_path), "-c", str(tmp_path / "nginx.conf")],
            stdout=out,
            stderr=subprocess.STDOUT,
        )
    origin = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 15
        while True:
            assert nginx.poll() is None, (tmp_path / "nginx.out").read_text()
            try:
                httpx.get(origin + "/api/chats", timeout=2)
                break
            except httpx.HTTPError:
                assert time.monotonic() < deadline, "nginx did not answer within 15 s"
                time.sleep(0.05)
        yield origin, proxies, log
    finally:
        nginx.terminate()
        try:
            nginx.wait(timeout=15)
        except subprocess.TimeoutExpired:
            nginx.kill()
            nginx.wait(timeout=5)


def routed(log: Path, needle: str) -> set[str]:
    """The servers nginx sent the requests whose URI starts with `needle` to."""
    return {line.split()[1] for line in log.read_text().splitlines() if line.startswith(needle)}


def test_a_chat_stays_on_one_server_and_moves_when_it_is_down(
    balanced: tuple[str, list[Proxy], Path],
) -> None:
    origin, proxies, log = balanced
    with httpx.Client(timeout=20) as client:
        history = list(HISTORY)
        for turn in range(4):
            answer = client.post(
                f"{origin}/c/voyage/v1/chat/completions", json={"model": "m", "messages": history}
            )
            assert answer.status_code == 200, answer.text
            history += [
                {"role": "assistant", "content": answer.json()["choices"][0]["message"]["content"]},
                {"role": "user", "content": f"And then? ({turn})"},
            ]
        for _ in range(3):  # named by the header instead
            answer = client.post(
                f"{origin}/v1/chat/completions",
                json={"model": "m", "messages": HISTORY},
                headers={"X-Autorecap-Chat": "by-header"},
            )
            assert answer.status_code == 200, answer.text
        streamed = client.post(
            f"{origin}/c/voyage/v1/chat/completions",
            json={"model": "m", "messages": history, "stream": True},
        )
        assert streamed.status_code == 200
        assert streamed.text.rstrip().endswith("data: [DONE]")
        said = "".join(
            json.loads(line[6:])["choices"][0]["delta"].get("content", "")
            for line in streamed.text.splitlines()
            if line.startswith("data: {")
        )
        time.sleep(0.2)  # nginx writes its log after each answer
        [server] = routed(log, "/c/voyage/")  # every request of the chat, on one server
        assert len(routed(log, "/v1/chat/completions")) == 1  # the header's chat: the same
        # The chat's server goes away: its next request is answered by the other one.
        serving = next(p for p in proxies if server.endswith(f":{p.port}"))
        other = next(p for p in proxies if p is not serving)
        serving.stop()
        history.append({"role": "assistant", "content": said})
        history.append({"role": "user", "content": "Who is aboard?"})
        answer = client.post(
            f"{origin}/c/voyage/v1/chat/completions", json={"model": "m", "messages": history}
        )
        assert answer.status_code == 200, answer.text
        last_reply = answer.json()["choices"][0]["message"]["content"]
        time.sleep(0.2)
        last = log.read_text().splitlines()[-1]  # "URI tried-server, next-server STATUS"
        assert last.startswith("/c/voyage/")
        assert f"127.0.0.1:{other.port}" in last
        assert last.endswith("200")
        stored = other.stored("voyage")
        assert [m.text for m in stored.messages][-3:] == [said, "Who is aboard?", last_reply]
        assert len(stored.messages) == len(history)  # nothing lost, nothing twice
