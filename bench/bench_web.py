"""The web UI with a 10,000-message chat against a 100-message one, in the same run: the time
from navigation to "usable" (the first rows rendered, then a scroll to the middle of the chat
shows rows there) in headless Chromium, and how many rows exist in the DOM (the list is
virtualised: it should not grow with the chat). Figures, never asserted."""

from __future__ import annotations

import os
import statistics
import tempfile
import threading
import time
from pathlib import Path
from urllib.parse import quote

import httpx
import uvicorn
from playwright.sync_api import Page, sync_playwright

from _common import report
from autorecap.server.app import ServerConfig, create_app
from autorecap.stfiles.jsonl import serialize_chat
from autorecap.testing import generate_chat

CHROMIUM = Path("/usr/bin/chromium")
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
SIZES = (100, 10_000)
REPEAT = 5
LOADED = ".msg-row[data-loaded]"
MIDDLE_JS = """() => {
  const list = document.getElementById("messages");
  list.scrollTop = (list.scrollHeight - list.clientHeight) / 2;
}"""
ROWS_IN_VIEW_JS = """() => {
  const list = document.getElementById("messages");
  const box = list.getBoundingClientRect();
  return [...list.querySelectorAll(".msg-row[data-loaded]")].filter((row) => {
    const r = row.getBoundingClientRect();
    return r.bottom > box.top && r.top < box.bottom;
  }).map((row) => Number(row.dataset.index));
}"""


def start_server(db: Path) -> tuple[uvicorn.Server, threading.Thread, str]:
    app = create_app(ServerConfig(upstream="http://127.0.0.1:9/v1", db=db, worker=False))
    server = uvicorn.Server(
        uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 20
    while not server.started:
        if time.monotonic() > deadline or not thread.is_alive():
            raise SystemExit("the server did not start")
        time.sleep(0.01)
    port = server.servers[0].sockets[0].getsockname()[1]
    return server, thread, f"http://127.0.0.1:{port}"


def measure(page: Page, url: str, total: int) -> dict[str, float]:
    """One cold open of the chat view (a fresh page each time)."""
    page.goto("about:blank")
    start = time.perf_counter()
    page.goto(url)
    page.locator(LOADED).first.wait_for(state="visible")
    first_rows = time.perf_counter() - start
    page.evaluate(MIDDLE_JS)
    middle = total // 2
    deadline = time.monotonic() + 10
    while True:
        shown = page.evaluate(ROWS_IN_VIEW_JS)
        if shown and min(shown) <= middle + 60 and max(shown) >= middle - 60:
            break
        if time.monotonic() > deadline:
            raise SystemExit(f"the middle of the chat never showed rows (saw {shown})")
        time.sleep(0.005)
    usable = time.perf_counter() - start
    rows = page.locator(".vlist-row").count()
    nodes = page.evaluate("() => document.getElementsByTagName('*').length")
    return {"first": first_rows, "usable": usable, "rows": rows, "nodes": nodes}


def main() -> None:
    if not CHROMIUM.exists():
        print("bench_web: /usr/bin/chromium is missing (apt-get install -y chromium): skipped")
        return
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        os.environ.pop(name, None)
    with tempfile.TemporaryDirectory() as tmp:
        os.environ["AUTORECAP_HOME"] = tmp
        server, thread, origin = start_server(Path(tmp) / "bench.db")
        try:
            urls = {}
            with httpx.Client(base_url=f"{origin}/api", timeout=120) as api:
                for size in SIZES:
                    chat_id = f"bench chat {size}"
                    chat = generate_chat(size, seed=7, with_recaps=True, chat_id=chat_id)
                    response = api.post(
                        "/chats", params={"id": chat_id}, content=serialize_chat(chat)
                    )
                    response.raise_for_status()
                    urls[size] = f"{origin}/#/chat/{quote(chat_id, safe='')}"
            figures: dict[str, float | int] = {}
            with sync_playwright() as driver:
                browser = driver.chromium.launch(
                    executable_path=str(CHROMIUM), headless=True, args=ARGS
                )
                page = browser.new_page(viewport={"width": 1440, "height": 900})
                for size in SIZES:
                    measure(page, urls[size], size)  # warm the browser's caches once
                    runs = [measure(page, urls[size], size) for _ in range(REPEAT)]
                    label = f"{size:,} messages"
                    figures[f"{label}: to first rows, median s"] = statistics.median(
                        r["first"] for r in runs
                    )
                    figures[f"{label}: to usable (middle shown), median s"] = statistics.median(
                        r["usable"] for r in runs
                    )
                    figures[f"{label}: to usable, worst s"] = max(r["usable"] for r in runs)
                    figures[f"{label}: message rows in the DOM"] = int(max(r["rows"] for r in runs))
                    figures[f"{label}: DOM elements"] = int(max(r["nodes"] for r in runs))
                browser.close()
            report("web UI: chat view in headless Chromium", figures)
        finally:
            server.should_exit = True
            thread.join(timeout=15)


if __name__ == "__main__":
    main()
