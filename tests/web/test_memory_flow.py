"""The memory flow in the chat view: an offline recap run from the UI, the running recap's
versions, the prompt preview, the memory switch, and recap edits that persist."""

from __future__ import annotations

import time
from collections.abc import Callable

import httpx
from playwright.sync_api import Locator, Page, expect

from tests.server.conftest import StartProxy, Upstream
from tests.web.conftest import SAMPLE_ID, Proxy, chat_url, import_sample, quote, wait_for_jobs


def test_recap_from_the_ui_and_wait_for_the_queue(
    page: Page, server: Proxy, api: httpx.Client, sample: str, shot: Callable[[Page, str], None]
) -> None:
    page.goto(chat_url(server, sample))
    last = page.locator(".msg-row[data-index='198']")
    expect(last.locator(".recap")).to_contain_text("No recap")

    page.get_by_role("button", name="Recap chat").click()
    # The queue drains in the UI: the header's indicator goes back to idle and the rows
    # in view show their new recaps without a reload.
    expect(page.locator(".chat-view[data-drained='1']")).to_be_attached(timeout=60_000)
    expect(page.locator(".version").first).to_be_visible(timeout=60_000)
    expect(page.locator("#jobs-indicator")).to_have_text("idle")
    expect(last.locator(".recap")).to_have_class("recap status-included")
    expect(page.locator("#chat-jobs")).to_have_text("No jobs waiting")
    wait_for_jobs(api)

    scenes = api.get(f"/chats/{quote(sample)}/scenes").json()["scenes"]
    closed = [scene for scene in scenes if scene["break_index"] is not None]
    assert closed, "the offline recap found scene breaks"
    expect(page.locator(".scene-link")).to_have_count(len(scenes))
    versions = api.get(f"/chats/{quote(sample)}/running").json()["versions"]
    expect(page.locator(".version")).to_have_count(len(versions))
    shot(page, "chat-view")


def test_a_chats_waiting_jobs_are_cancelled_from_its_view(
    page: Page, server: Proxy, api: httpx.Client, sample: str
) -> None:
    # A recap of a long chat on a paid LLM: stop it without pausing every chat's queue.
    assert api.post("/jobs/pause").status_code == 200
    try:
        page.goto(chat_url(server, sample))
        cancel = page.get_by_role("button", name="Cancel jobs")
        expect(cancel).to_be_hidden()
        page.get_by_role("button", name="Recap chat").click()
        expect(cancel).to_be_visible()
        cancel.click()
        expect(page.locator(".toast").last).to_contain_text("Cancelled")
        expect(cancel).to_be_hidden()
        waiting = api.get("/jobs", params={"state": "queued,running"}).json()["jobs"]
        assert waiting == []
    finally:
        api.post("/jobs/resume")


def test_a_chats_failed_jobs_are_retried_from_its_view(
    page: Page, start_proxy: StartProxy, upstream: Upstream
) -> None:
    # Recaps through an upstream that refuses the key: after three refusals the chat's other
    # jobs fail without a call; once fixed, one button queues them again.
    for _ in range(10):
        upstream.error(401, b'{"error": {"message": "invalid api key", "type": "auth"}}')
    server = start_proxy(worker=True, recap_backend="upstream")
    with httpx.Client(base_url=f"{server.origin}/api", timeout=20) as api:
        assert api.patch("/settings", json={"llm_model": "m"}).status_code == 200
        import_sample(api)
        chat = SAMPLE_ID
        page.goto(chat_url(server, chat))
        retry = page.get_by_role("button", name="Retry failed")
        expect(retry).to_be_hidden()
        page.get_by_role("button", name="Recap chat").click()
        expect(retry).to_be_visible(timeout=30_000)
        # The button shows at the first refusal; the jobs after the third fail without a call
        # a moment later: wait until none is left to fail.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and any(
            api.get("/jobs", params={"state": state}).json()["jobs"]
            for state in ("queued", "running")
        ):
            time.sleep(0.1)
        assert len(upstream.chat_requests) <= 3 + 3  # three refusals, and calls under way
        failed = api.get("/jobs", params={"state": "failed"}).json()["jobs"]
        assert any("not sent: the LLM refused" in (job["error"] or "") for job in failed)
        assert api.post("/jobs/pause").status_code == 200  # to see them queued, not redone
        try:
            retry.click()
            expect(page.locator(".toast").last).to_contain_text("failed jobs of this chat again")
            expect(retry).to_be_hidden()
            assert api.get("/jobs", params={"state": "failed"}).json()["jobs"] == []
            queued = api.get("/jobs", params={"state": "queued"}).json()["jobs"]
            assert len(queued) == len(failed)
        finally:
            api.post("/jobs/resume")


def test_an_older_running_recap_version_changes_the_preview(
    page: Page, server: Proxy, api: httpx.Client, recapped: str, shot: Callable[[Page, str], None]
) -> None:
    running = api.get(f"/chats/{quote(recapped)}/running").json()
    versions = running["versions"]
    assert len(versions) >= 2
    newest, oldest = versions[0], versions[-1]
    assert running["selected"] == newest["version"]

    page.goto(chat_url(server, recapped, "running"))
    items = page.locator(".version")
    expect(items).to_have_count(len(versions))
    # Newest first, each with the scenes it covers.
    expect(items.first.get_by_role("heading")).to_have_text(f"Version {newest['version']}")
    expect(items.first).to_contain_text(f"Covers {len(newest['scenes'])} scenes")
    expect(items.first).to_contain_text("injected")
    shot(page, "running-recap")

    page.get_by_role("tab", name="Prompt preview").click()
    injected = page.locator(".pmsg.injected")
    expect(injected).to_have_count(2)  # the running recap, and what the newest message recalls
    newest_tail = newest["content"].strip().splitlines()[-1][:60]
    expect(injected.filter(has_text=newest_tail)).to_have_count(1)

    page.get_by_role("tab", name="Running recap").click()
    page.get_by_role("button", name=f"Use running recap version {oldest['version']}").click()
    expect(
        items.last.get_by_role("button", name=f"Use running recap version {oldest['version']}")
    ).to_have_attribute("aria-pressed", "true")
    assert api.get(f"/chats/{quote(recapped)}/running").json()["selected"] == oldest["version"]

    page.get_by_role("tab", name="Prompt preview").click()
    recap = injected.filter(has_not_text="Earlier in this chat")  # not the recall slot
    expect(recap).not_to_contain_text(newest_tail)
    expect(recap).to_contain_text(oldest["content"].strip().splitlines()[0][:60])
    expect(page.locator("#preview-hidden")).to_contain_text("hidden message")
    expect(page.locator("#preview-meter")).to_be_visible()
    shot(page, "preview")


def test_a_chat_is_bound_to_a_settings_profile_from_its_memory_tab(
    page: Page, server: Proxy, api: httpx.Client, sample: str, shot: Callable[[Page, str], None]
) -> None:
    assert api.post("/profiles", json={"name": "Short"}).status_code == 201
    changed = api.patch(
        "/settings", params={"profile": "Short"}, json={"running_scene_recap_max_tokens": 300}
    )
    assert changed.status_code == 200
    page.goto(chat_url(server, sample, "memory"))
    effective = page.locator("#chat-profile-effective")
    expect(effective).to_contain_text("runs with the profile “Default”: the active profile")
    page.get_by_label("Bind this chat to").select_option("Short")
    expect(page.locator(".toast").last).to_contain_text("now runs with the profile “Short”")
    expect(effective).to_contain_text("runs with the profile “Short”: bound to this chat")
    runs = api.get("/settings", params={"chat": sample}).json()
    assert runs["profile"] == "Short"
    assert runs["values"]["running_scene_recap_max_tokens"] == 300
    assert runs["bindings"]["chat"] == {sample: "Short"}
    shot(page, "chat-profile")

    page.get_by_label("Bind this chat to").select_option("")
    expect(effective).to_contain_text("runs with the profile “Default”: the active profile")
    runs = api.get("/settings", params={"chat": sample}).json()
    assert (runs["profile"], runs["bindings"]["chat"]) == ("Default", {})


def test_memory_off_removes_the_injection(
    page: Page, server: Proxy, api: httpx.Client, recapped: str
) -> None:
    page.goto(chat_url(server, recapped, "preview"))
    # the running recap, and what the newest message recalls
    expect(page.locator(".pmsg.injected")).to_have_count(2)
    expect(page.locator("#preview-memory")).to_have_text("Memory is on")

    page.get_by_role("tab", name="Memory").click()
    page.get_by_label("Off").check()
    expect(page.locator("#memory-effective")).to_contain_text("Memory is off")
    expect(page.locator("#memory-chip")).to_have_text("Memory off")
    assert api.get(f"/chats/{quote(recapped)}/memory").json()["chat"] is False

    page.get_by_role("tab", name="Prompt preview").click()
    expect(page.locator("#preview-memory")).to_contain_text("Memory is off")
    expect(page.locator(".pmsg.injected")).to_have_count(0)

    page.get_by_role("tab", name="Memory").click()
    page.get_by_label("Default").check()
    page.get_by_role("tab", name="Prompt preview").click()
    expect(page.locator(".pmsg.injected")).to_have_count(2)


def edit_recap(page: Page, url: str, index: int) -> tuple[Locator, Locator]:
    """Open the chat at message `index` and its recap editor: (the row, the editor)."""
    page.goto(url)
    row = page.locator(f".msg-row[data-index='{index}']")
    row.get_by_role("button", name=f"Edit recap of message {index}").click()
    return row, row.get_by_role("textbox", name=f"Recap of message {index}")


def test_an_edited_recap_survives_a_reload(
    page: Page, server: Proxy, api: httpx.Client, recapped: str
) -> None:
    row, editor = edit_recap(page, chat_url(server, recapped, message=150), 150)
    expect(editor).to_be_focused()
    editor.fill("Mira hid the brass key under the chart table.")
    editor.press("Enter")
    expect(row.locator(".recap-text")).to_have_text("Mira hid the brass key under the chart table.")
    expect(row.locator(".recap")).to_contain_text("edited")

    page.reload()
    row = page.locator(".msg-row[data-index='150']")
    expect(row.locator(".recap-text")).to_have_text("Mira hid the brass key under the chart table.")
    expect(row.locator(".recap")).to_contain_text("edited")
    message = api.get(f"/chats/{quote(recapped)}/messages/150").json()
    assert message["recap"] == "Mira hid the brass key under the chart table."
    assert message["edited"] is True


def test_an_edit_made_in_another_tab_meanwhile_is_not_overwritten_unseen(
    page: Page, server: Proxy, api: httpx.Client, recapped: str
) -> None:
    row, editor = edit_recap(page, chat_url(server, recapped, message=150), 150)
    # Another tab saves first.
    elsewhere = "Tomas counted the crates twice."
    changed = api.patch(f"/chats/{quote(recapped)}/messages/150", json={"recap": elsewhere})
    assert changed.status_code == 200
    editor.fill("Mira hid the brass key under the chart table.")
    editor.press("Enter")
    expect(row.locator(".field-error")).to_contain_text("changed elsewhere")
    expect(row.locator(".field-error")).to_contain_text(elsewhere)
    assert api.get(f"/chats/{quote(recapped)}/messages/150").json()["recap"] == elsewhere
    editor.press("Enter")  # seen: saving again replaces it
    expect(row.locator(".recap-text")).to_have_text("Mira hid the brass key under the chart table.")
    message = api.get(f"/chats/{quote(recapped)}/messages/150").json()
    assert message["recap"] == "Mira hid the brass key under the chart table."


def test_escape_cancels_an_edit_and_exclude_toggles(
    page: Page, server: Proxy, api: httpx.Client, recapped: str
) -> None:
    page.goto(chat_url(server, recapped, message=190))
    row = page.locator(".msg-row[data-index='190']")
    before = row.locator(".recap-text").inner_text()
    row.get_by_role("button", name="Edit recap of message 190").click()
    row.get_by_role("textbox").fill("not kept")
    row.get_by_role("textbox").press("Escape")
    expect(row.get_by_role("textbox")).to_have_count(0)
    expect(row.locator(".recap-text")).to_have_text(before)

    exclude = row.get_by_role("button", name="Exclude message 190 from memory")
    exclude.click()
    expect(exclude).to_have_attribute("aria-pressed", "true")
    expect(row.locator(".recap")).to_have_class("recap status-excluded")
    expect(row.locator(".status-label")).to_have_text("Excluded by you")  # not "past the limit"
    assert api.get(f"/chats/{quote(recapped)}/messages/190").json()["exclude"] is True
    row.get_by_role("button", name="Exclude message 190 from memory").click()
    expect(row.locator(".recap")).to_have_class("recap status-included")


def test_edit_and_delete_running_recap_versions_and_regenerate_a_recap(
    page: Page, server: Proxy, api: httpx.Client, recapped: str
) -> None:
    before = api.get(f"/chats/{quote(recapped)}/running").json()["versions"]
    page.goto(chat_url(server, recapped, "running"))
    items = page.locator(".version")
    expect(items).to_have_count(len(before))
    newest = before[0]["version"]
    page.get_by_role("button", name=f"Edit running recap version {newest}").click()
    editor = page.get_by_role("textbox", name=f"Edit running recap version {newest}")
    expect(editor).to_be_focused()
    editor.fill("The crew of the Kestrel reached Aster Hollow and came home.")
    editor.press("Enter")
    expect(items).to_have_count(len(before) + 1)
    expect(items.first).to_contain_text("The crew of the Kestrel reached Aster Hollow")
    running = api.get(f"/chats/{quote(recapped)}/running").json()
    assert running["versions"][0]["content"].startswith("The crew of the Kestrel")
    assert running["selected"] == running["versions"][0]["version"]

    oldest = before[-1]["version"]
    page.get_by_role("button", name=f"Delete running recap version {oldest}").click()
    page.get_by_role("dialog").get_by_role("button", name="Delete").click()
    expect(items).to_have_count(len(before))
    versions = api.get(f"/chats/{quote(recapped)}/running").json()["versions"]
    assert oldest not in [v["version"] for v in versions]

    row = page.locator(".msg-row[data-index='198']")
    row.get_by_role("button", name="Regenerate recap of message 198").click()
    expect(page.locator(".toast").last).to_contain_text("queued")
    wait_for_jobs(api)
    kinds = [job["kind"] for job in api.get("/jobs", params={"state": "done"}).json()["jobs"]]
    assert kinds, "the regenerate job ran"
    expect(row.locator(".recap")).to_have_class("recap status-included")


def test_an_unknown_chat_says_so(page: Page, server: Proxy) -> None:
    page.goto(chat_url(server, "no such chat"))
    expect(page.get_by_role("heading", level=1)).to_have_text("Chat not found")
    expect(page.get_by_role("alert")).to_contain_text("There is no chat “no such chat”")
    expect(page.get_by_role("alert")).not_to_contain_text("/api/")
    page.get_by_role("link", name="Back to the chats").click()
    expect(page.get_by_role("heading", level=1)).to_have_text("Chats")


def test_the_preview_shows_what_a_question_recalls(
    page: Page, server: Proxy, recapped: str, shot: Callable[[Page, str], None]
) -> None:
    page.goto(chat_url(server, recapped, "preview"))
    # on by default: the newest user message is the query until another is typed
    expect(page.locator("#preview-recall")).to_contain_text("Recall is on; looked for:")

    # (a price the running recap does not carry: recall leaves out what it says already)
    page.get_by_label("Recall for").fill(
        "How much did Mira first ask for my passage, there and back?"
    )
    page.get_by_label("Recall for").press("Enter")
    pieces = page.locator(".recall-piece")
    expect(pieces.first).to_be_visible()
    fare = pieces.filter(has_text="Sixty crowns for passage")
    expect(fare).to_have_count(1)
    expect(fare).to_contain_text("scene ")
    expect(fare).to_contain_text("score ")
    # Placed in the prompt just before the newest message, marked as injected.
    injected = page.locator(".pmsg.injected").filter(has_text="Sixty crowns for passage")
    expect(injected).to_have_count(1)
    shot(page, "preview-recall")


def test_a_pinned_recap_goes_into_the_long_term_slot(
    page: Page, server: Proxy, api: httpx.Client, recapped: str
) -> None:
    assert api.patch("/settings", json={"long_term_enabled": True}).status_code == 200
    try:
        _pin_and_unpin(page, server, api, recapped)
    finally:  # the server is shared with the other tests
        api.patch("/settings", json={"long_term_enabled": False})


def _pin_and_unpin(page: Page, server: Proxy, api: httpx.Client, recapped: str) -> None:
    page.goto(chat_url(server, recapped, message=14))
    row = page.locator(".msg-row[data-index='14']")
    remember = row.get_by_role("button", name="Remember message 14 in long-term memory")
    expect(remember).to_have_attribute("aria-pressed", "false")
    remember.click()
    expect(remember).to_have_attribute("aria-pressed", "true")
    expect(row.locator(".badge", has_text="pinned")).to_be_visible()
    assert api.get(f"/chats/{quote(recapped)}/messages/14").json()["remember"] is True
    recap = api.get(f"/chats/{quote(recapped)}/messages/14").json()["recap"]

    page.get_by_role("tab", name="Prompt preview").click()
    expect(page.locator(".injections")).to_contain_text("auto_recap_memory_long")
    expect(page.locator(".pmsg.injected").filter(has_text="Things to remember")).to_contain_text(
        recap[:40]
    )
    page.get_by_role("tab", name="Memory").click()
    row.get_by_role("button", name="Remember message 14 in long-term memory").click()
    expect(row.locator(".badge", has_text="pinned")).to_have_count(0)
    assert api.get(f"/chats/{quote(recapped)}/messages/14").json()["remember"] is False


def test_combined_recap_versions_are_listed_and_selected(
    page: Page, server: Proxy, api: httpx.Client, recapped: str
) -> None:
    assert api.patch("/settings", json={"combined_recap_enabled": True}).status_code == 200
    try:
        _make_two_combined_versions(api, recapped)
        page.goto(chat_url(server, recapped, "running"))
        items = page.locator(".combined-version")
        expect(items).to_have_count(2)
        use_old = page.get_by_role("button", name="Use combined recap version 0")
        expect(use_old).to_have_attribute("aria-pressed", "false")
        use_old.click()
        expect(use_old).to_have_attribute("aria-pressed", "true")
        assert api.get(f"/chats/{quote(recapped)}/combined").json()["selected"] == 0
    finally:  # the server is shared with the other tests
        api.patch("/settings", json={"combined_recap_enabled": False})


def _make_two_combined_versions(api: httpx.Client, chat: str) -> None:
    for attempt in range(2):
        if attempt:  # an edited recap makes the next version at the next running recap job
            patched = api.patch(f"/chats/{quote(chat)}/messages/3", json={"recap": "Mira hid it."})
            assert patched.status_code == 200
        scenes = api.get(f"/chats/{quote(chat)}/scenes").json()["scenes"]
        end = next(s["break_index"] for s in scenes if s["break_index"] is not None)
        assert api.post(f"/chats/{quote(chat)}/scenes/{end}/regenerate").status_code == 200
        wait_for_jobs(api)
    assert len(api.get(f"/chats/{quote(chat)}/combined").json()["versions"]) == 2


def test_a_version_made_before_the_scene_breaks_changed_says_so(
    page: Page, server: Proxy, api: httpx.Client, recapped: str
) -> None:
    # "Covers N scenes" was counted from the breaks the chat has now (found by a newcomer test).
    versions = api.get(f"/chats/{quote(recapped)}/running").json()["versions"]
    oldest = versions[-1]
    first_end = oldest["scenes"][0]
    marked = api.post(f"/chats/{quote(recapped)}/scenes", json={"index": first_end - 3})
    assert marked.is_success
    page.goto(chat_url(server, recapped, "running"))
    expect(page.locator(".version").last).to_contain_text(
        f"1 scene, up to message #{first_end} (the scene breaks have changed since)"
    )
