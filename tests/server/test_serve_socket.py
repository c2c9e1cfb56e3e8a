"""`autorecap serve`'s socket: it listens before anything starts (a second server on the port
is told so at once), uvicorn serves on it, and Ctrl-C ends the server normally. Real sockets
and a real `autorecap serve` process, on 127.0.0.1 only."""

from __future__ import annotations

import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
import pytest

from autorecap.cli.serve import _listen, base_url
from autorecap.errors import AutorecapError


def test_a_port_held_by_another_starting_server_is_in_use() -> None:
    """The first server's socket listens at once: a bound socket that did not listen yet
    would let the second bind it too, and fail later, after its banner."""
    first = _listen("127.0.0.1", 0)
    try:
        port = first[0].getsockname()[1]
        with pytest.raises(AutorecapError, match="is in use"):
            _listen("127.0.0.1", port)
    finally:
        for listener in first:
            listener.close()


def test_an_ipv6_address_is_written_in_brackets_in_the_urls() -> None:
    assert base_url("::1", 8008) == "http://[::1]:8008"
    assert base_url("127.0.0.1", 8008) == "http://127.0.0.1:8008"
    assert base_url("localhost", 8008) == "http://localhost:8008"


def test_an_unknown_host_is_a_clear_error() -> None:
    with pytest.raises(AutorecapError, match="check --host"):
        _listen("no-such-host.invalid", 0)


def test_serve_serves_on_its_socket_and_ends_normally_on_ctrl_c(tmp_path: Path) -> None:
    probe = _listen("127.0.0.1", 0)
    port = probe[0].getsockname()[1]
    for listener in probe:
        listener.close()
    command = [str(Path(sys.executable).parent / "autorecap"), "serve", "--port", str(port)]
    command += ["--upstream", "http://127.0.0.1:9/v1", "--db", str(tmp_path / "x.db")]
    server = subprocess.Popen(command, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                answer = httpx.get(f"http://127.0.0.1:{port}/api/chats", timeout=2)
                break
            except httpx.TransportError:
                assert server.poll() is None, server.communicate()[1]
                assert time.monotonic() < deadline, "serve did not answer within 30 s"
                time.sleep(0.2)
        assert answer.status_code == 200
        server.send_signal(signal.SIGINT)
        _, err = server.communicate(timeout=30)
        assert server.returncode == 0, err
        assert "Traceback" not in err
    finally:
        if server.poll() is None:
            server.kill()
            server.wait(timeout=10)
