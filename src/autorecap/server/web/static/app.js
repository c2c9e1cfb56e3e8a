// autorecap's web UI: a hash router over the views. Plain ES modules, no build step; the page
// talks to nothing but the REST API under /api (docs/API.md).

import { forgetKey, showKeyState } from "./api.js";
import { ChatListView } from "./chatlist.js";
import { ChatView } from "./chatview.js";
import { fill, h } from "./dom.js";
import { JobsView, monitor } from "./jobs.js";
import { SettingsView } from "./settings.js";

const main = document.getElementById("main");
let current = null; // {key, view}

/** "#/chat/<id>/<tab>?m=12" -> {name: "chat", chat, tab, message}. */
function parse(hash) {
  const [path, query = ""] = hash.replace(/^#/, "").split("?");
  const parts = path.split("/").filter(Boolean);
  const params = new URLSearchParams(query);
  const m = params.get("m");
  if (parts[0] === "chat" && parts[1]) {
    return {
      name: "chat",
      chat: decodeURIComponent(parts[1]),
      tab: parts[2] || null,
      message: m !== null && m !== "" ? Number(m) : null,
    };
  }
  if (parts[0] === "settings") return { name: "settings" };
  if (parts[0] === "jobs") return { name: "jobs" };
  return { name: "chats" };
}

async function route(initial = false) {
  const target = parse(location.hash);
  const key = target.name === "chat" ? `chat:${target.chat}` : target.name;
  for (const link of document.querySelectorAll("[data-nav]")) {
    const on = link.dataset.nav === (target.name === "chat" ? "chats" : target.name);
    if (on) link.setAttribute("aria-current", "page");
    else link.removeAttribute("aria-current");
  }
  if (current && current.key === key && current.view.update) {
    current.view.update(target);
    return;
  }
  if (current) current.view.dispose?.();
  let view;
  if (target.name === "chat") view = new ChatView(main, target.chat, target);
  else if (target.name === "settings") view = new SettingsView(main);
  else if (target.name === "jobs") view = new JobsView(main);
  else view = new ChatListView(main);
  current = { key, view };
  main.dataset.view = target.name;
  try {
    await view.mount();
  } catch (error) {
    if (current.view !== view) return;
    // The API's words name its routes; a person opening a chat needs these.
    const missing = error.status === 404 && target.name === "chat";
    const said = missing
      ? `There is no chat “${target.chat}”: it may have been deleted, or be kept under another key.`
      : error.message;
    fill(
      main,
      h(
        "section",
        { class: "page" },
        h("h1", { tabindex: "-1" }, missing ? "Chat not found" : "Something went wrong"),
        h("p", { class: "field-error", role: "alert" }, said),
        h("p", {}, h("a", { href: "#/" }, "Back to the chats")),
      ),
    );
  }
  if (!initial && current.view === view) {
    // Move the focus to the new page's heading, as a page load would for a screen reader.
    const heading = main.querySelector("h1");
    if (heading) heading.focus({ preventScroll: true });
  }
  main.dataset.ready = "1";
}

document.getElementById("forget-key").addEventListener("click", () => {
  forgetKey();
  location.reload();
});
window.addEventListener("hashchange", () => {
  main.dataset.ready = "0";
  route(false);
});
showKeyState();
monitor.start();
route(true);
