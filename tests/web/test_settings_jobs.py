"""The settings form (generated from the API's JSON schema), the job queue page, and access
control (an API key asked for once and kept)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
from playwright.sync_api import Page, expect

from tests.server.conftest import Upstream
from tests.web.conftest import SAMPLE_ID, Proxy, StartProxy, import_sample, quote, wait_for_jobs


def test_a_validation_error_shows_next_to_its_field(
    page: Page, server: Proxy, api: httpx.Client, shot: Callable[[Page, str], None]
) -> None:
    page.goto(server.origin + "/#/settings")
    schema = api.get("/settings").json()["schema"]
    fields = page.locator(".setting")
    expect(fields).to_have_count(len(schema["properties"]))

    context = page.get_by_label("Context Size", exact=True)
    context.fill("10")
    hide = page.get_by_label("Auto Hide Scene Count", exact=True)
    hide.fill("3")
    page.get_by_role("button", name="Save settings").click()
    error = page.locator("[data-field='context_size'] .field-error")
    expect(error).to_contain_text("256")
    expect(context).to_have_attribute("aria-invalid", "true")
    expect(context).to_be_focused()
    expect(error).to_be_in_viewport()  # not under the sticky save bar, off screen
    expect(page.locator("#settings-error")).to_contain_text("context_size")
    # The patch is all or nothing: the valid change was not saved either.
    assert api.get("/settings").json()["values"]["auto_hide_scene_count"] == 2
    shot(page, "settings")

    context.fill("16384")
    page.get_by_role("button", name="Save settings").click()
    expect(page.locator(".toast")).to_contain_text("Saved 2 settings")
    expect(page.locator("[data-field='context_size'] .field-error")).to_be_empty()
    values = api.get("/settings").json()["values"]
    assert (values["context_size"], values["auto_hide_scene_count"]) == (16384, 3)

    page.reload()
    expect(page.get_by_label("Auto Hide Scene Count", exact=True)).to_have_value("3")
    page.get_by_role("button", name="Reset Auto Hide Scene Count to its default").click()
    expect(page.get_by_label("Auto Hide Scene Count", exact=True)).to_have_value("2")
    assert api.get("/settings").json()["values"]["auto_hide_scene_count"] == 2


def test_settings_kinds_of_field(page: Page, server: Proxy, api: httpx.Client) -> None:
    page.goto(server.origin + "/#/settings")
    tokenizer = page.get_by_label("Tokenizer", exact=True)
    expect(tokenizer).to_have_value("cl100k")
    tokenizer.select_option("o200k")
    role = page.get_by_label("Running Scene Recap Role", exact=True)
    expect(role.locator("option")).to_have_text(["0: system", "1: user", "2: assistant"])
    role.select_option("1")
    scan = page.get_by_label("Running Scene Recap Scan", exact=True)
    scan.check()
    page.get_by_label("Running Scene Recap Template", exact=True).fill("Memory: {{running_recap}}")
    page.get_by_role("button", name="Save settings").click()
    expect(page.locator(".toast")).to_contain_text("Saved 4 settings")
    values = api.get("/settings").json()["values"]
    assert values["tokenizer"] == "o200k"
    assert values["running_scene_recap_role"] == 1
    assert values["running_scene_recap_scan"] is True
    assert values["running_scene_recap_template"] == "Memory: {{running_recap}}"


def test_the_jobs_page_shows_failures_and_retries_them(
    page: Page,
    start_proxy: StartProxy,
    upstream: Upstream,
    shot: Callable[[Page, str], None],
) -> None:
    # Recaps by the upstream model, which refuses the first one: the job fails for good.
    server = start_proxy(worker=True, recap_backend="upstream")
    with httpx.Client(base_url=f"{server.origin}/api", timeout=20) as api:
        assert api.patch("/settings", json={"max_retries": 0}).status_code == 200
        import_sample(api)
        upstream.error(400, b'{"error": {"message": "no such model"}}')
        regenerate = api.post(f"/chats/{quote(SAMPLE_ID)}/messages/3/regenerate")
        assert regenerate.status_code in (200, 201, 202), regenerate.text
        wait_for_jobs(api)
        failed = api.get("/jobs", params={"state": "failed"}).json()["jobs"]
        assert len(failed) == 1

        page.goto(server.origin + "/#/jobs")
        row = page.locator(f"tr[data-id='{failed[0]['id']}']")
        expect(row).to_contain_text("failed")
        expect(row.locator(".job-error")).not_to_be_empty()
        expect(page.locator("#jobs-indicator")).to_contain_text("1 failed")
        shot(page, "jobs")

        # The upstream answers now: the retried job succeeds.
        row.get_by_role("button", name=f"Retry job {failed[0]['id']}").click()
        page.get_by_label("done").check()
        expect(row).to_have_attribute("data-state", "done", timeout=15_000)
        message = api.get(f"/chats/{quote(SAMPLE_ID)}/messages/3").json()
        assert message["recap"]


def test_an_api_key_is_asked_for_once_and_kept(
    page: Page, start_proxy: StartProxy, tmp_path: Path
) -> None:
    keys = tmp_path / "keys.txt"
    keys.write_text("alice: alice-key-123456\n", encoding="utf-8")
    server = start_proxy(keys_file=keys)
    with httpx.Client(
        base_url=f"{server.origin}/api",
        headers={"Authorization": "Bearer alice-key-123456"},
        timeout=20,
    ) as api:
        import_sample(api)

    page.goto(server.origin + "/")
    dialog = page.get_by_role("dialog", name="API key")
    expect(dialog).to_be_visible()
    dialog.get_by_label("Key").fill("wrong-key-000000")
    dialog.get_by_label("Key").press("Enter")
    expect(dialog).to_contain_text("refused")
    dialog.get_by_label("Key").fill("alice-key-123456")
    dialog.get_by_role("button", name="Use this key").click()
    expect(page.get_by_role("link", name=SAMPLE_ID)).to_be_visible()
    assert page.evaluate("() => localStorage.getItem('autorecap.apiKey')") == "alice-key-123456"

    page.reload()
    expect(page.get_by_role("link", name=SAMPLE_ID)).to_be_visible()
    expect(dialog).to_be_hidden()
    page.get_by_role("link", name=SAMPLE_ID).click()
    expect(page.locator(".msg-row[data-index='198']")).to_be_visible()
    page.get_by_role("button", name="Forget API key").click()
    expect(dialog).to_be_visible()
