"""A long chat stays light: the message list is virtualised (only the rows in view and a margin
exist in the DOM) and message ranges are fetched when they come into view."""

from __future__ import annotations

import itertools
from urllib.parse import parse_qs, urlsplit

import httpx
from playwright.sync_api import Page, Request, expect

from autorecap.stfiles.jsonl import serialize_chat
from autorecap.testing import generate_chat
from tests.web.conftest import Proxy, chat_url

SIZE = 3000


def test_a_long_chat_is_virtualised_and_fetched_on_demand(
    page: Page, server: Proxy, api: httpx.Client
) -> None:
    chat = generate_chat(SIZE, seed=3, with_recaps=True, chat_id="long")
    response = api.post("/chats", params={"id": "long"}, content=serialize_chat(chat))
    assert response.status_code == 201, response.text
    starts: list[int] = []

    def record(request: Request) -> None:
        url = urlsplit(request.url)
        if url.path.endswith("/messages"):
            starts.append(int(parse_qs(url.query).get("start", ["0"])[0]))

    page.on("request", record)
    page.goto(chat_url(server, "long"))
    expect(page.locator(f".msg-row[data-index='{SIZE - 1}'][data-loaded]")).to_be_visible()
    rows = page.locator(".vlist-row")
    assert rows.count() < 60
    assert max(starts) >= SIZE - 100, "the newest messages were fetched"
    assert len(starts) <= 3, starts

    # Jump to the middle with the keyboard: that range is fetched, nothing in between.
    page.get_by_label("Go to message number").fill("1500")
    page.get_by_label("Go to message number").press("Enter")
    middle = page.locator(".msg-row[data-index='1500'][data-loaded]")
    expect(middle).to_be_focused()
    expect(middle).to_be_in_viewport()
    assert 1500 - 100 <= max(s for s in starts if s < SIZE - 100) <= 1500
    assert len(starts) <= 6, starts
    assert rows.count() < 60

    # Scrolling with the wheel brings rows of varying height, measured, in order.
    for _ in range(5):
        page.mouse.move(700, 500)
        page.mouse.wheel(0, 1500)
    expect(page.locator(".msg-placeholder")).to_have_count(0)
    tops = page.evaluate(
        """() => [...document.querySelectorAll('.vlist-row')]
            .map((row) => [Number(row.dataset.index), row.getBoundingClientRect().top,
                           row.getBoundingClientRect().height])
            .sort((a, b) => a[0] - b[0])"""
    )
    assert rows.count() < 60
    heights = {round(height) for _, _, height in tops}
    assert len(heights) > 1, "rows have their own heights"
    for (index, top, height), (next_index, next_top, _) in itertools.pairwise(tops):
        if next_index == index + 1:
            assert abs(top + height - next_top) < 1.5, (index, top, height, next_top)
