"""Keyboard-only use: tab order reaches the message list, j/k and arrows move between messages,
Enter edits a recap and saves it, Escape leaves an editor; the side panel's tabs use arrows."""

from __future__ import annotations

import httpx
from playwright.sync_api import Page, expect

from tests.web.conftest import Proxy, chat_url, quote


def focused_index(page: Page) -> int | None:
    value = page.evaluate(
        "() => document.activeElement && document.activeElement.classList.contains('vlist-row')"
        " ? Number(document.activeElement.dataset.index) : null"
    )
    return None if value is None else int(value)


def tab_to_the_message_list(page: Page) -> int:
    for _ in range(60):
        page.keyboard.press("Tab")
        index = focused_index(page)
        if index is not None:
            return index
    raise AssertionError("Tab never reached a message of the list")


def test_edit_a_recap_with_the_keyboard_only(
    page: Page, server: Proxy, api: httpx.Client, recapped: str
) -> None:
    page.goto(chat_url(server, recapped))
    expect(page.locator(".msg-row[data-index='198']")).to_be_visible()
    start = tab_to_the_message_list(page)
    assert start > 150, "the chat opened at its newest messages"

    for key, expected in (
        ("k", start - 1),
        ("k", start - 2),
        ("j", start - 1),
        ("ArrowUp", start - 2),
    ):
        page.keyboard.press(key)
        assert focused_index(page) == expected, key
    target = start - 2
    row = page.locator(f".msg-row[data-index='{target}']")
    expect(row).to_be_focused()
    expect(row).to_have_attribute("tabindex", "0")

    page.keyboard.press("Enter")
    editor = row.get_by_role("textbox", name=f"Recap of message {target}")
    expect(editor).to_be_focused()
    page.keyboard.press("Control+a")
    page.keyboard.type("Typed with the keyboard alone.")
    page.keyboard.press("Escape")
    expect(editor).to_have_count(0)
    expect(row).to_be_focused()
    assert api.get(f"/chats/{quote(recapped)}/messages/{target}").json()["recap"] != (
        "Typed with the keyboard alone."
    )

    page.keyboard.press("Enter")
    page.keyboard.press("Control+a")
    page.keyboard.type("Typed with the keyboard alone.")
    page.keyboard.press("Enter")
    expect(row.locator(".recap-text")).to_have_text("Typed with the keyboard alone.")
    expect(row).to_be_focused()
    assert api.get(f"/chats/{quote(recapped)}/messages/{target}").json()["recap"] == (
        "Typed with the keyboard alone."
    )

    page.keyboard.press("Home")
    expect(page.locator(".msg-row[data-index='0']")).to_be_focused()
    page.keyboard.press("End")
    expect(page.locator(".msg-row[data-index='198']")).to_be_focused()


def test_tabs_and_buttons_by_keyboard(page: Page, server: Proxy, recapped: str) -> None:
    page.goto(chat_url(server, recapped, "running"))
    running = page.get_by_role("tab", name="Running recap")
    expect(running).to_have_attribute("aria-selected", "true")
    running.focus()
    page.keyboard.press("ArrowRight")
    preview = page.get_by_role("tab", name="Prompt preview")
    expect(preview).to_be_focused()
    expect(preview).to_have_attribute("aria-selected", "true")
    # the running recap, and what the newest message recalls (on by default)
    expect(page.locator(".pmsg.injected")).to_have_count(2)
    page.keyboard.press("ArrowRight")
    expect(page.get_by_role("tab", name="Memory")).to_be_focused()
    # Into the panel, onto the "Off" radio, and choose it with the keyboard.
    page.get_by_label("Default").focus()
    page.keyboard.press("ArrowDown")
    page.keyboard.press("ArrowDown")
    expect(page.get_by_label("Off")).to_be_checked()
    expect(page.get_by_label("Off")).to_be_focused()
    expect(page.locator("#memory-effective")).to_contain_text("Memory is off")


def test_a_toggle_keeps_the_keyboard_on_itself(page: Page, server: Proxy, recapped: str) -> None:
    # Space on Remember pinned the message, then the redrawn row took the focus: a second
    # Space did nothing (found by a newcomer test).
    page.goto(chat_url(server, recapped, message=14))
    row = page.locator(".msg-row[data-index='14']")
    remember = row.get_by_role("button", name="Remember message 14 in long-term memory")
    remember.focus()
    page.keyboard.press("Space")
    expect(row.locator(".badge", has_text="pinned")).to_be_visible()
    expect(remember).to_be_focused()
    page.keyboard.press("Space")
    expect(row.locator(".badge", has_text="pinned")).to_have_count(0)
    expect(remember).to_be_focused()
