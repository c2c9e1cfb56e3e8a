"""Every control of every view has an accessible name, and controls are what they look like
(buttons are <button>s, fields have labels)."""

from __future__ import annotations

import httpx
from playwright.sync_api import Page, expect

from tests.web.conftest import Proxy, chat_url

UNNAMED_JS = """() => {
  const named = (el) => {
    const by = el.getAttribute("aria-labelledby");
    if (by) {
      return by.split(/\\s+/).map((id) => document.getElementById(id)?.textContent || "").join(" ");
    }
    if (el.getAttribute("aria-label")) return el.getAttribute("aria-label");
    if (el.labels && el.labels.length) return [...el.labels].map((l) => l.textContent).join(" ");
    if (el.tagName === "INPUT" || el.tagName === "TEXTAREA" || el.tagName === "SELECT") return "";
    return el.textContent;
  };
  return [...document.querySelectorAll("button, input, select, textarea, a[href], [role=tab]")]
    .filter((el) => el.getClientRects().length > 0)
    .filter((el) => !(named(el) || "").trim())
    .map((el) => el.outerHTML.slice(0, 160));
}"""
CLICKABLE_DIVS_JS = """() => [...document.querySelectorAll("[onclick], [tabindex='0']")]
  .filter((el) => !["BUTTON", "A", "INPUT", "SELECT", "TEXTAREA"].includes(el.tagName))
  .filter((el) => !el.classList.contains("vlist-row") && el.getAttribute("role") !== "tab")
  .map((el) => el.outerHTML.slice(0, 120))"""


def unnamed(page: Page) -> list[str]:
    found: list[str] = page.evaluate(UNNAMED_JS)
    found += page.evaluate(CLICKABLE_DIVS_JS)
    return found


def test_every_control_has_an_accessible_name(
    page: Page, server: Proxy, api: httpx.Client, recapped: str
) -> None:
    page.goto(server.origin + "/")
    expect(page.get_by_role("link", name=recapped)).to_be_visible()
    assert unnamed(page) == []

    page.goto(chat_url(server, recapped))
    expect(page.locator(".msg-row[data-index='198'][data-loaded]")).to_be_visible()
    expect(page.locator(".version").first).to_be_visible()
    assert unnamed(page) == []
    for tab in ("Prompt preview", "Memory"):
        page.get_by_role("tab", name=tab).click()
        expect(page.get_by_role("tabpanel")).to_be_visible()
        assert unnamed(page) == [], tab

    page.goto(server.origin + "/#/settings")
    expect(page.get_by_role("button", name="Save settings")).to_be_visible()
    assert unnamed(page) == []

    page.goto(server.origin + "/#/jobs")
    page.get_by_label("done").check()
    expect(page.locator("tr.job").first).to_be_visible()
    assert unnamed(page) == []
