"""Scene breaks in the chat view (mark, rename, hide, unmark, switch a scene recap's version)
and the scene navigator."""

from __future__ import annotations

import re

import httpx
from playwright.sync_api import Page, expect

from tests.web.conftest import Proxy, chat_url, quote


def test_mark_rename_and_unmark_a_scene_break(
    page: Page, server: Proxy, api: httpx.Client, sample: str
) -> None:
    page.goto(chat_url(server, sample, message=12))
    row = page.locator(".msg-row[data-index='12']")
    row.get_by_role("button", name="Mark a scene break after message 12").click()
    # Marking opens the name editor at once.
    name = row.get_by_role("textbox", name="Name of the scene ending at message 12")
    expect(name).to_be_focused()
    name.fill("The Rusted Anchor")
    name.press("Enter")
    expect(row.locator(".scene-name")).to_contain_text("The Rusted Anchor")
    expect(row.locator(".scene-cause")).to_have_text("marked by hand")  # why it ends here
    navigator = page.get_by_role("navigation", name="Scenes")
    expect(navigator.locator(".scene-link").first).to_contain_text("The Rusted Anchor")
    scenes = api.get(f"/chats/{quote(sample)}/scenes").json()["scenes"]
    assert [(s["name"], s["break_index"]) for s in scenes if s["break_index"] is not None] == [
        ("The Rusted Anchor", 12)
    ]

    row.get_by_role("button", name="Rename the scene ending at message 12").click()
    name = row.get_by_role("textbox", name="Name of the scene ending at message 12")
    name.fill("Back room")
    name.press("Enter")
    expect(row.locator(".scene-name")).to_contain_text("Back room")
    expect(navigator.locator(".scene-link").first).to_contain_text("Back room")

    # Hidden, the break stays a scene but no longer counts for auto-hide; shown again.
    hide = row.get_by_role("button", name="Hide the scene break after message 12")
    expect(hide).to_have_attribute("aria-pressed", "false")
    hide.click()
    expect(row.locator(".scene-break")).to_have_class("scene-break is-hidden")
    expect(row.locator(".scene-name")).to_contain_text("Hidden scene break")
    expect(hide).to_have_attribute("aria-pressed", "true")
    scenes = api.get(f"/chats/{quote(sample)}/scenes").json()["scenes"]
    assert [s["visible"] for s in scenes if s["break_index"] == 12] == [False]
    hide.click()
    expect(hide).to_have_attribute("aria-pressed", "false")
    expect(row.locator(".scene-name")).not_to_contain_text("Hidden")
    scenes = api.get(f"/chats/{quote(sample)}/scenes").json()["scenes"]
    assert [s["visible"] for s in scenes if s["break_index"] == 12] == [True]

    # Removing asks first; cancelled, the break stays.
    remove = row.get_by_role("button", name="Remove the scene break after message 12")
    remove.click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text("Remove the scene break after message 12?")
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    expect(row.locator(".scene-break")).to_have_count(1)
    scenes = api.get(f"/chats/{quote(sample)}/scenes").json()["scenes"]
    assert [s["break_index"] for s in scenes if s["break_index"] is not None] == [12]
    remove.click()
    dialog.get_by_role("button", name="Remove").click()
    expect(row.locator(".scene-break")).to_have_count(0)
    expect(navigator).not_to_contain_text("Back room")
    scenes = api.get(f"/chats/{quote(sample)}/scenes").json()["scenes"]
    assert all(scene["break_index"] is None for scene in scenes)


def test_switch_a_scene_recap_version(
    page: Page, server: Proxy, api: httpx.Client, recapped: str
) -> None:
    scene = api.get(f"/chats/{quote(recapped)}/scenes").json()["scenes"][1]
    index = scene["break_index"]
    page.goto(chat_url(server, recapped, message=index))
    row = page.locator(f".msg-row[data-index='{index}']")
    row.get_by_role("button", name=f"Edit the recap of the scene ending at message {index}").click()
    editor = row.get_by_role("textbox", name=f"Recap of the scene ending at message {index}")
    editor.fill("The Kestrel rode out a Cinder squall.")
    editor.press("Enter")
    expect(row.locator(".scene-recap")).to_have_text("The Kestrel rode out a Cinder squall.")

    versions = row.get_by_role(
        "combobox", name=f"Scene recap version for the scene ending at message {index}"
    )
    expect(versions.locator("option")).to_have_count(2)
    versions.select_option("0")
    expect(row.locator(".scene-recap")).to_have_text(scene["recap"])
    after = api.get(f"/chats/{quote(recapped)}/scenes").json()["scenes"][1]
    assert after["selected"] == 0
    assert after["recap"] == scene["recap"]


def test_the_scene_navigator_jumps_to_each_scene(
    page: Page, server: Proxy, api: httpx.Client, recapped: str
) -> None:
    scenes = api.get(f"/chats/{quote(recapped)}/scenes").json()["scenes"]
    page.goto(chat_url(server, recapped))
    links = page.get_by_role("navigation", name="Scenes").locator(".scene-link")
    expect(links).to_have_count(len(scenes))
    for number in (0, 3, len(scenes) - 1, 1):
        scene = scenes[number]
        links.nth(number).click()
        first = page.locator(f".msg-row[data-index='{scene['start']}']")
        expect(first).to_be_focused()
        expect(first).to_be_in_viewport()
        expect(links.nth(number)).to_have_attribute("aria-current", "true")
    # A reload comes back to the message last gone to.
    last = scenes[1]["start"]
    expect(page).to_have_url(re.compile(rf"\?m={last}$"))
    page.reload()
    expect(page.locator(f".msg-row[data-index='{last}']")).to_be_in_viewport()
