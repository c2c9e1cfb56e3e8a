"""The chat list: import by upload, open, export (download), delete; the page and its assets."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from autorecap.sample import sample_chat_path
from tests.web.conftest import SAMPLE_ID, Proxy, chat_url, import_sample, quote


def test_the_page_and_its_assets_are_served_by_autorecap(server: Proxy) -> None:
    with httpx.Client(base_url=server.origin) as client:
        page = client.get("/")
        assert page.status_code == 200
        assert page.headers["content-type"].startswith("text/html")
        assert page.headers["cache-control"] == "no-cache"
        assert "script-src 'self'" in page.headers["content-security-policy"]
        assert "http" not in page.text.replace("http-equiv", "")  # no CDN, no remote asset
        script = client.get("/ui/app.js")
        assert script.headers["content-type"].startswith("text/javascript")
        assert client.get("/ui/app.css").headers["content-type"].startswith("text/css")
        again = client.get("/ui/app.js", headers={"If-None-Match": script.headers["etag"]})
        assert again.status_code == 304
        assert client.get("/ui/../app.py").status_code == 404
        assert client.get("/ui/%2e%2e/web.py").status_code == 404
        assert client.get("/ui/nothing.js").status_code == 404


def test_import_by_upload_export_and_delete(
    page: Page, server: Proxy, api: httpx.Client, shot: Callable[[Page, str], None]
) -> None:
    page.goto(server.origin + "/")
    expect(page.get_by_role("heading", name="Chats", exact=True)).to_be_visible()
    expect(page.get_by_text("No chats yet")).to_be_visible()

    page.get_by_label("Chat file (.jsonl)").set_input_files(sample_chat_path())
    expect(page.get_by_label("Chat id")).to_have_value("sample_chat")
    page.get_by_label("Chat id").fill(SAMPLE_ID)
    page.get_by_role("button", name="Import").click()
    expect(page.locator("#import-done")).to_contain_text("199 messages")
    row = page.locator("tr", has=page.get_by_role("link", name=SAMPLE_ID))
    expect(row).to_contain_text("199")
    assert api.get(f"/chats/{quote(SAMPLE_ID)}").json()["messages"] == 199

    # The same id again is a conflict, explained where the upload is.
    page.get_by_label("Chat file (.jsonl)").set_input_files(sample_chat_path())
    page.get_by_label("Chat id").fill(SAMPLE_ID)
    page.get_by_role("button", name="Import").click()
    expect(page.locator("#import-result [role=alert]")).to_contain_text("Replace")
    expect(page.locator("#import-result [role=alert]")).to_contain_text(
        f"A chat “{SAMPLE_ID}” is stored already"
    )
    expect(page.locator("#import-result [role=alert]")).not_to_contain_text("replace=true")
    shot(page, "chat-list")

    with page.expect_download() as download_info:
        row.get_by_role("button", name=f"Export {SAMPLE_ID}").click()
    download = download_info.value
    assert download.suggested_filename == f"{SAMPLE_ID}.jsonl"
    exported = api.get(f"/chats/{quote(SAMPLE_ID)}/export").content
    assert Path(download.path()).read_bytes() == exported

    row.get_by_role("button", name=f"Delete {SAMPLE_ID}").click()
    dialog = page.get_by_role("dialog")
    expect(dialog).to_contain_text(SAMPLE_ID)
    dialog.get_by_role("button", name="Delete").click()
    expect(page.get_by_text("No chats yet")).to_be_visible()
    assert api.get("/chats").json()["chats"] == []


def test_open_a_chat_from_the_list(page: Page, server: Proxy, api: httpx.Client) -> None:
    import_sample(api)
    page.goto(server.origin + "/")
    page.get_by_role("link", name=SAMPLE_ID).click()
    expect(page.get_by_role("heading", level=1)).to_have_text(SAMPLE_ID)
    # A chat opens at its newest message.
    expect(page.locator(".msg-row[data-index='198']")).to_be_visible()


def test_a_phone_wide_screen_reaches_every_chat_action(
    page: Page, server: Proxy, sample: str
) -> None:
    # At 390 px the toolbar ran off the right edge: "Recap chat" and "Export" unreachable.
    page.set_viewport_size({"width": 390, "height": 844})
    page.goto(chat_url(server, sample))
    for name in ("Recap chat", "Export"):
        button = page.get_by_role("button", name=name).or_(page.get_by_role("link", name=name))
        box = button.first.bounding_box()
        assert box is not None
        assert box["x"] >= 0, (name, box)
        assert box["x"] + box["width"] <= 390, (name, box)
