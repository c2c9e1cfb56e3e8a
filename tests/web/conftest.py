"""The web UI in a real headless Chromium (Debian's /usr/bin/chromium, driven by Playwright's
sync API) against a real autorecap server on loopback.

- `browser`: one Chromium for the whole session (never downloaded: `playwright install` is not
  used; `make test` installs Debian's chromium when it is missing).
- `server`: `create_app(ServerConfig(upstream=<the scripted loopback upstream>, db=tmp_path/...))`
  served by uvicorn in a thread, with the in-process recap worker (tests/server's fixtures).
- `page`: a fresh browser context (its own localStorage) per test, closed after it.
- `shot(page, name)`: a screenshot into $AUTORECAP_SCREENSHOTS when that is set (`make test`
  sets it to test-artifacts/screenshots).
"""

from __future__ import annotations

import os
import shutil
import threading
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any
from urllib.parse import quote as url_quote

import httpx
import pytest
import uvicorn
from playwright.sync_api import Browser, Page, Playwright, sync_playwright

from autorecap.sample import sample_chat_path
from autorecap.server.app import ServerConfig, create_app

# Fixtures of the server tests, reused: the scripted upstream and the proxy on loopback.
from tests.server.conftest import (  # noqa: F401
    Proxy,
    StartProxy,
    _no_proxies,
    db_path,
    start_proxy,
    upstream,
)

CHROMIUM = Path("/usr/bin/chromium")
CHROMIUM_ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
]
# Read at import: the autouse fixture of tests/conftest.py scrubs AUTORECAP_* from each test.
SCREENSHOTS = os.environ.get("AUTORECAP_SCREENSHOTS", "")
VIEWPORT = {"width": 1440, "height": 900}
SAMPLE_ID = "Captain Mira - 2026-03-02@18h11m40s"
"""A SillyTavern-style id: spaces and an '@' travel URL-encoded."""


@pytest.fixture(scope="session")
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as driver:
        yield driver


@pytest.fixture(scope="session")
def browser(playwright: Playwright) -> Iterator[Browser]:
    if not CHROMIUM.exists():
        pytest.fail(
            "the browser tests need Debian's chromium at /usr/bin/chromium: "
            "`make test` installs it (apt-get install -y chromium)"
        )
    browser = playwright.chromium.launch(
        executable_path=str(CHROMIUM), headless=True, args=CHROMIUM_ARGS
    )
    try:
        yield browser
    finally:
        browser.close()


@pytest.fixture
def server(
    request: pytest.FixtureRequest,
    start_proxy: StartProxy,  # noqa: F811 (the imported fixture)
    db_path: Path,  # noqa: F811
) -> Proxy:
    """A server with the recap worker running (offline recaps). A test that asks for
    `recapped` starts from a copy of a database where the sample chat is already recapped."""
    if "recapped" in request.fixturenames:
        template: Path = request.getfixturevalue("recapped_template")
        for suffix in ("", "-wal", "-shm"):
            source = template.with_name(template.name + suffix)
            if source.exists():
                shutil.copyfile(source, db_path.with_name(db_path.name + suffix))
    return start_proxy(worker=True)


@pytest.fixture
def page(browser: Browser) -> Iterator[Page]:
    context = browser.new_context(viewport=VIEWPORT, accept_downloads=True)
    context.set_default_timeout(15_000)
    page = context.new_page()
    errors: list[str] = []
    page.on("pageerror", lambda error: errors.append(str(error)))
    try:
        yield page
    finally:
        context.close()
    assert not errors, f"JavaScript errors in the page: {errors}"


@pytest.fixture
def shot() -> Callable[[Page, str], None]:
    def take(page: Page, name: str) -> None:
        if SCREENSHOTS:
            folder = Path(SCREENSHOTS)
            folder.mkdir(parents=True, exist_ok=True)
            page.screenshot(path=str(folder / f"{name}.png"))

    return take


@pytest.fixture
def api(server: Proxy) -> Iterator[httpx.Client]:
    """A plain HTTP client of the server's REST API (for setting up and checking)."""
    with httpx.Client(base_url=f"{server.origin}/api", timeout=20) as client:
        yield client


def import_sample(api: httpx.Client, chat_id: str = SAMPLE_ID) -> dict[str, Any]:
    response = api.post("/chats", params={"id": chat_id}, content=sample_chat_path().read_bytes())
    assert response.status_code == 201, response.text
    result: dict[str, Any] = response.json()
    return result


def wait_for_jobs(api: httpx.Client, timeout: float = 30.0, settle: float = 0.6) -> None:
    """Until no job has been queued or running for `settle` seconds: a pipeline step is marked
    done a moment before the jobs it leads to are queued, so one empty look is not enough."""
    deadline = time.monotonic() + timeout
    empty_since: float | None = None
    while True:
        counts = api.get("/jobs").json()["counts"]
        now = time.monotonic()
        if counts.get("queued") or counts.get("running"):
            empty_since = None
        elif empty_since is None:
            empty_since = now
        elif now - empty_since >= settle:
            return
        assert now < deadline, f"jobs still waiting after {timeout} s: {counts}"
        time.sleep(0.05)


@pytest.fixture
def sample(api: httpx.Client) -> str:
    """The sample chat, imported (no recaps yet). Its id."""
    import_sample(api)
    return SAMPLE_ID


@pytest.fixture(scope="session")
def recapped_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Once per session: a database where the sample chat was imported and recapped offline
    through the API (a server of its own, stopped before the file is copied)."""
    folder = tmp_path_factory.mktemp("recapped")
    db = folder / "template.db"
    saved = dict(os.environ)
    os.environ["AUTORECAP_HOME"] = str(folder / "home")
    try:
        app = create_app(ServerConfig(upstream="http://127.0.0.1:9/v1", db=db, worker=True))
        server = uvicorn.Server(
            uvicorn.Config(app, host="127.0.0.1", port=0, log_level="warning", lifespan="on")
        )
        thread = threading.Thread(target=server.run, daemon=True, name="recap-template")
        thread.start()
        deadline = time.monotonic() + 10
        while not server.started:
            assert thread.is_alive(), "the template server exited while starting"
            assert time.monotonic() < deadline, "the template server did not start"
            time.sleep(0.01)
        port = server.servers[0].sockets[0].getsockname()[1]
        try:
            with httpx.Client(
                base_url=f"http://127.0.0.1:{port}/api", timeout=20, trust_env=False
            ) as api:
                import_sample(api)
                response = api.post(f"/chats/{quote(SAMPLE_ID)}/recap")
                assert response.status_code in (200, 201, 202), response.text
                wait_for_jobs(api)
                running = api.get(f"/chats/{quote(SAMPLE_ID)}/running").json()
                assert running["versions"], "the sample chat has a running recap"
        finally:
            server.should_exit = True
            thread.join(timeout=15)
    finally:
        os.environ.clear()
        os.environ.update(saved)
    return db


@pytest.fixture
def recapped(server: Proxy) -> str:
    """The sample chat, imported and recapped offline (the `server` starts from a copy of
    `recapped_template`). Its id."""
    return SAMPLE_ID


def quote(chat_id: str) -> str:
    """A chat id as a path segment."""
    return url_quote(chat_id, safe="")


def chat_url(server: Proxy, chat_id: str, tab: str = "", message: int | None = None) -> str:
    """The address of a chat's view in the UI."""
    url = f"{server.origin}/#/chat/{quote(chat_id)}"
    if tab:
        url += f"/{tab}"
    if message is not None:
        url += f"?m={message}"
    return url
