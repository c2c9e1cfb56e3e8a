// The chat view: header (memory state, recap, export), the scene navigator, the virtualised
// message list with recaps and scene breaks, and the side panel (running recap, prompt preview,
// memory switches).

import { ApiError, api, chatPath } from "./api.js";
import { MessageCache, PAGE } from "./cache.js";
import { exportChat } from "./chatlist.js";
import { confirmDialog, fill, formatCount, h, toast } from "./dom.js";
import { monitor } from "./jobs.js";
import { MemoryPanel } from "./memory.js";
import { messageRow, placeholderRow } from "./messages.js";
import { PreviewPanel } from "./preview.js";
import { RunningPanel } from "./running.js";
import { Tabs } from "./tabs.js";
import { VirtualList } from "./vlist.js";

const TABS = [
  { id: "running", label: "Running recap" },
  { id: "preview", label: "Prompt preview" },
  { id: "memory", label: "Memory" },
];

/**
 * The list is one tab stop: only the active message's controls are in the tab order (Tab
 * from the message goes through its buttons, then on out of the list).
 */
function rowControls(row, on) {
  for (const control of row.querySelectorAll("button, input, select, textarea, a[href]")) {
    control.tabIndex = on ? 0 : -1;
  }
}

export class ChatView {
  constructor(main, chat, route) {
    this.main = main;
    this.chat = chat;
    this.route = route;
    this.editing = null;
    this.active = -1;
    this.total = 0;
    this.scenes = [];
    this.busyTicks = 0;
    this.chatActive = 0;
    this.disposed = false;
  }

  async mount() {
    document.title = `${this.chat} · autorecap`;
    // The summary (slower: it counts jobs and scenes) and the messages are asked for at once:
    // the rows need only the chat's length.
    const summary = api.get(chatPath(this.chat));
    summary.catch(() => {}); // reported below, once the view exists
    const at = this.route.message;
    const first = await api.get(chatPath(this.chat, "messages"), {
      start: at !== null ? Math.max(0, at - (at % PAGE)) : 0,
      limit: at !== null ? PAGE : 1,
    });
    if (this.disposed) return;
    this.total = first.total;
    this.summary = { messages: first.total };
    this.build();
    summary.then(
      (data) => {
        this.summary = data;
        this.showSummary();
      },
      (error) => toast(error.message, "error"),
    );
    this.cache = new MessageCache(
      this.chat,
      (start, end, total) => this.loaded(start, end, total),
      (error) => toast(`Messages: ${error.message}`, "error"),
    );
    for (const message of first.messages) this.cache.set(message);
    this.list = new VirtualList({
      scroller: this.scroller,
      count: this.total,
      renderRow: (index) => this.renderRow(index),
      onRange: (from, to) => this.inRange(from, to),
    });
    // A chat opens at its newest message, as in SillyTavern, unless a message was asked for.
    const start = at !== null && at < this.total ? at : Math.max(0, this.total - 1);
    if (!this.cache.get(start) && this.total) await this.cache.loadPage(Math.floor(start / PAGE));
    if (this.disposed) return;
    this.list.scrollToIndex(start, at !== null ? "start" : "end");
    this.setActive(start, false);
    this.loadScenes();
    this.tabs.select(this.route.tab || "running", false);
    this.globalDone = monitor.state.done;
    this.chatDone = (this.summary.jobs || {}).done;
    this.unsubscribe = monitor.subscribe((state) => this.onJobs(state));
  }

  build() {
    this.jobsChip = h("span", { class: "chip", id: "chat-jobs", "aria-live": "polite" });
    this.cancelJobs = h(
      "button",
      { type: "button", id: "cancel-chat-jobs", hidden: true, onclick: () => this.cancelChatJobs() },
      "Cancel jobs",
    );
    this.retryJobs = h(
      "button",
      { type: "button", id: "retry-chat-jobs", hidden: true, onclick: () => this.retryChatJobs() },
      "Retry failed",
    );
    this.memoryChip = h("button", {
      type: "button",
      class: "chip",
      id: "memory-chip",
      title: "Memory switches",
      onclick: () => this.tabs.select("memory", true),
    });
    this.force = h("input", { type: "checkbox", id: "recap-force" });
    const jump = h("input", {
      type: "number",
      min: 0,
      id: "jump-to",
      class: "jump-input",
      "aria-label": "Go to message number",
      placeholder: "#",
    });
    jump.addEventListener("keydown", (event) => {
      if (event.key === "Enter" && jump.value !== "") {
        event.preventDefault();
        this.focusRow(Number(jump.value), "start");
      }
    });
    this.meta = h("p", { class: "muted chat-meta" });
    const header = h(
      "header",
      { class: "chat-head" },
      h(
        "div",
        { class: "chat-title" },
        h("a", { href: "#/", class: "back" }, "← Chats"),
        h("h1", { id: "chat-title", tabindex: "-1", title: this.chat }, this.chat),
        this.meta,
      ),
      h(
        "div",
        { class: "toolbar" },
        this.memoryChip,
        this.jobsChip,
        this.cancelJobs,
        this.retryJobs,
        h("label", { class: "inline" }, this.force, "redo edited recaps"),
        h("button", { type: "button", class: "primary", id: "recap-chat", onclick: () => this.recapChat() }, "Recap chat"),
        h("button", { type: "button", onclick: () => exportChat(this.chat) }, "Export"),
        jump,
      ),
    );
    this.sceneList = h("ol", { class: "scene-list" });
    const nav = h(
      "nav",
      { class: "scene-nav", "aria-labelledby": "scenes-title" },
      h("h2", { id: "scenes-title" }, "Scenes"),
      this.sceneList,
    );
    this.scroller = h("div", {
      class: "vlist",
      id: "messages",
      role: "feed",
      "aria-label": "Messages (j/k or arrows to move, Enter to edit a recap)",
      "aria-busy": "false",
    });
    this.scroller.addEventListener("keydown", (event) => this.onKey(event));
    this.scroller.addEventListener("focusin", (event) => {
      const row = event.target.closest(".vlist-row");
      if (row) this.setActive(Number(row.dataset.index), false);
    });
    const panels = {
      running: new RunningPanel(this),
      preview: new PreviewPanel(this),
      memory: new MemoryPanel(this),
    };
    this.panels = panels;
    this.tabs = new Tabs(TABS, "Chat panels", (id, userAction) => {
      panels[id].show();
      if (userAction) {
        history.replaceState(null, "", `#/chat/${encodeURIComponent(this.chat)}/${id}`);
      }
    });
    for (const tab of TABS) this.tabs.panel(tab.id).append(panels[tab.id].el);
    const aside = h("aside", { class: "side", "aria-label": "Memory of this chat" }, this.tabs.el);
    fill(
      this.main,
      h(
        "section",
        { class: "chat-view" },
        header,
        h("div", { class: "chat-body" }, nav, h("div", { class: "messages-pane" }, this.scroller), aside),
      ),
    );
    this.showSummary();
  }

  showSummary() {
    const s = this.summary;
    const parts = [`${formatCount(s.messages)} messages`];
    if (s.character) parts.push(s.character);
    if (s.user) parts.push(`with ${s.user}`);
    if (typeof s.scenes === "number") parts.push(`${s.scenes} scenes`);
    this.meta.textContent = parts.join(" · ");
    this.memoryChip.textContent = s.enabled === undefined ? "" : s.enabled ? "Memory on" : "Memory off";
    this.memoryChip.dataset.on = s.enabled === false ? "0" : "1";
    this.showChatJobs(s.jobs);
  }

  showChatJobs(jobs) {
    if (!jobs) {
      this.jobsChip.textContent = "";
      return;
    }
    const parts = [];
    if (jobs.running) parts.push(`${jobs.running} running`);
    if (jobs.queued) parts.push(`${jobs.queued} queued`);
    if (jobs.failed) parts.push(`${jobs.failed} failed`);
    this.jobsChip.textContent = parts.length ? `Jobs: ${parts.join(", ")}` : "No jobs waiting";
    const active = (jobs.running || 0) + (jobs.queued || 0);
    this.jobsChip.dataset.active = String(active);
    this.cancelJobs.hidden = !active;
    this.retryJobs.hidden = !jobs.failed;
  }

  /** Queue this chat's failed jobs again (after fixing the recap model, key or URL). */
  async retryChatJobs() {
    const data = await this.act(() => api.post(chatPath(this.chat, "jobs", "retry")));
    if (!data) return;
    toast(`Queued ${formatCount(data.retried)} failed jobs of this chat again`);
    this.showChatJobs({ queued: data.retried, running: 0, failed: 0 });
    monitor.kick();
  }

  /** Cancel this chat's waiting and running jobs (a recap of a long chat on a paid LLM). */
  async cancelChatJobs() {
    const data = await this.act(() => api.post(chatPath(this.chat, "jobs", "cancel")));
    if (!data) return;
    toast(`Cancelled ${formatCount(data.cancelled)} jobs of this chat; what they did is kept`);
    this.showChatJobs({ queued: 0, running: 0 });
    monitor.kick();
  }

  /** The router calls this when only the tab or the message in the address changed. */
  update(route) {
    this.route = route;
    if (route.tab) this.tabs.select(route.tab, false);
    if (route.message !== null) this.focusRow(route.message, "start");
  }

  // --- the list -----------------------------------------------------------------------------

  renderRow(index) {
    const message = this.cache.get(index);
    if (!message) return { el: placeholderRow(index), measured: false };
    const el = messageRow(message, this);
    if (index !== this.active) rowControls(el, false);
    const refocus = this.refocus;
    if (refocus && refocus.index === index) {
      const button = [...el.querySelectorAll("button")].find((b) => b.getAttribute("aria-label") === refocus.label);
      if (button) queueMicrotask(() => el.isConnected && button.focus());
    }
    return { el, measured: true };
  }

  inRange(first, last) {
    this.cache.ensure(first, last);
    this.scroller.setAttribute("aria-busy", this.cache.loading.size ? "true" : "false");
    this.highlightScene(first, last);
    if (!this.scroller.contains(document.activeElement)) {
      // Tab into the list lands on a row in view, not on one far away.
      const top = this.list.indexAt(this.scroller.scrollTop + 1);
      if (top !== this.active) this.setActive(Math.min(top + 1, this.total - 1), false);
    }
  }

  loaded(start, end, total) {
    if (total !== this.total) {
      this.total = total;
      this.list.setCount(total);
    }
    for (let i = start; i < end; i++) {
      if (this.list.rows.has(i) && !(this.editing && this.editing.index === i)) this.list.refreshRow(i);
    }
    this.scroller.setAttribute("aria-busy", this.cache.loading.size > 1 ? "true" : "false");
  }

  setActive(index, focus) {
    if (index < 0 || index >= this.total) return;
    if (this.refocus && this.refocus.index !== index) this.refocus = null;
    const old = this.list.rowElement(this.active);
    if (old && index !== this.active) {
      old.tabIndex = -1;
      rowControls(old, false);
    }
    this.active = index;
    this.repin();
    if (focus) {
      this.list.scrollToIndex(index, "nearest");
    }
    const row = this.list.rowElement(index);
    if (row) {
      row.tabIndex = 0;
      rowControls(row, true);
      if (focus) row.focus({ preventScroll: true });
    }
    this.highlightScene(index);
    if (focus) {
      // A reload comes back to this message (the router reads ?m=).
      const path = location.hash.split("?")[0] || `#/chat/${encodeURIComponent(this.chat)}`;
      history.replaceState(null, "", `${path}?m=${index}`);
    }
  }

  repin() {
    this.list.pin(this.active, this.editing && this.editing.index);
  }

  /** Scroll to message `index` and give it the focus. */
  focusRow(index, align = "nearest") {
    if (!this.total) return;
    index = Math.max(0, Math.min(this.total - 1, index));
    this.list.pin(index, this.editing && this.editing.index);
    this.list.scrollToIndex(index, align);
    this.setActive(index, true);
    this.cache.ensure(this.list.first, this.list.last, { now: true });
  }

  onKey(event) {
    const target = event.target;
    if (!(target instanceof HTMLElement) || !target.classList.contains("vlist-row")) return;
    const page = Math.max(1, this.list.last - this.list.first - 2);
    const moves = { j: 1, ArrowDown: 1, k: -1, ArrowUp: -1, PageDown: page, PageUp: -page };
    if (event.key in moves && !event.ctrlKey && !event.metaKey && !event.altKey) {
      event.preventDefault();
      this.focusRow(this.active + moves[event.key]);
    } else if (event.key === "Home") {
      event.preventDefault();
      this.focusRow(0, "start");
    } else if (event.key === "End") {
      event.preventDefault();
      this.focusRow(this.total - 1, "end");
    } else if (event.key === "Enter" || event.key === "e") {
      event.preventDefault();
      if (this.cache.get(this.active)) this.startEditing(this.active, "recap");
    }
  }

  // --- editing and actions (called by the rows) ------------------------------------------------

  startEditing(index, kind) {
    const previous = this.editing;
    this.editing = { index, kind };
    if (previous && previous.index !== index) this.list.refreshRow(previous.index);
    this.repin();
    this.list.refreshRow(index);
  }

  stopEditing() {
    const previous = this.editing;
    this.editing = null;
    if (previous) {
      this.list.refreshRow(previous.index);
      this.setActive(previous.index, true);
    }
  }

  async act(work, done) {
    try {
      const result = await work();
      if (done) toast(done);
      return result;
    } catch (error) {
      toast(error.message, "error");
      throw error;
    }
  }

  /** Save an edited recap; `was` is the recap the edit began from. If another tab changed it
   * meanwhile the server refuses (409) and says so in the editor; saving again replaces it. */
  async saveRecap(index, text, was) {
    const base = this.seenElsewhere && this.seenElsewhere.index === index ? this.seenElsewhere.recap : was;
    let message;
    try {
      message = await api.patch(chatPath(this.chat, "messages", index), { recap: text, was: base });
    } catch (error) {
      if (error.status === 409) {
        const fresh = await api.get(chatPath(this.chat, "messages", index));
        this.seenElsewhere = { index, recap: fresh.recap ?? "" };
        error.message = `${error.message}. It now reads: “${(fresh.recap ?? "").slice(0, 300)}”`;
      }
      throw error;
    }
    this.seenElsewhere = null;
    this.cache.set(message);
    this.editing = null;
    this.list.refreshRow(index);
    this.setActive(index, true);
    toast(`Recap of message ${index} saved`);
    this.changed();
  }

  async regenerate(index) {
    await this.act(() => api.post(chatPath(this.chat, "messages", index, "regenerate")), `Recap of message ${index} queued`);
    this.chatActive = Math.max(this.chatActive, 1);
    monitor.kick();
  }

  /** Flip one of a message's memory flags (`exclude`, `remember`) through the API. */
  async toggleFlag(index, flag) {
    const message = this.cache.get(index);
    const updated = await this.act(() =>
      api.patch(chatPath(this.chat, "messages", index), { [flag]: !message[flag] }),
    );
    this.cache.set(updated);
    // The row is drawn anew (now, and when the statuses reload): the keyboard stays on the
    // button it pressed (`renderRow`).
    const pressed = document.activeElement && document.activeElement.getAttribute("aria-label");
    this.refocus = pressed ? { index, label: pressed } : null;
    const kept = this.refocus;
    setTimeout(() => {
      if (this.refocus === kept) this.refocus = null; // the statuses have been reloaded
    }, 3000);
    this.list.refreshRow(index);
    this.changed();
  }

  async markBreak(index) {
    const data = await this.act(() => api.post(chatPath(this.chat, "scenes"), { index }), `Scene break after message ${index}`);
    this.showScenes(data.scenes);
    await this.reloadRow(index);
    this.startEditing(index, "scene-name");
    this.changed();
  }

  async unmarkBreak(index) {
    const asked =
      `Remove the scene break after message ${index}? Its scene joins the next one in the ` +
      "running recap. Its recap versions are kept: marking the break again brings them back.";
    if (!(await confirmDialog(asked, "Remove"))) return;
    await this.act(() => api.del(chatPath(this.chat, "scenes", index)), `Scene break after message ${index} removed`);
    this.editing = null;
    await this.reloadRow(index);
    this.setActive(index, true);
    this.loadScenes();
    this.changed();
  }

  async renameBreak(index, name) {
    await api.patch(chatPath(this.chat, "scenes", index), { name });
    this.editing = null;
    await this.reloadRow(index);
    this.setActive(index, true);
    toast(`Scene renamed to “${name}”`);
    this.loadScenes();
  }

  async setBreakVisible(index, visible) {
    const said = visible ? `Scene break after message ${index} shown` : `Scene break after message ${index} hidden: it no longer counts for auto-hide`;
    await this.act(() => api.patch(chatPath(this.chat, "scenes", index), { visible }), said);
    await this.reloadRow(index);
    this.setActive(index, true);
    this.loadScenes();
    this.changed();
  }

  async selectSceneVersion(index, selected) {
    await this.act(() => api.patch(chatPath(this.chat, "scenes", index), { selected }), `Scene recap version ${selected + 1} selected`);
    await this.reloadRow(index);
    this.loadScenes();
    this.changed();
  }

  async saveSceneRecap(index, recap) {
    await api.patch(chatPath(this.chat, "scenes", index), { recap });
    this.editing = null;
    await this.reloadRow(index);
    this.setActive(index, true);
    toast("Scene recap saved as a new version");
    this.loadScenes();
    this.changed();
  }

  async regenerateScene(index) {
    await this.act(() => api.post(chatPath(this.chat, "scenes", index, "regenerate")), "Scene recap queued");
    this.chatActive = Math.max(this.chatActive, 1);
    monitor.kick();
  }

  async recapChat() {
    const data = await this.act(() =>
      api.post(chatPath(this.chat, "recap"), undefined, { force: this.force.checked ? "true" : "false" }),
    );
    toast(`Queued ${formatCount(data.jobs)} recap jobs`);
    this.showChatJobs({ queued: data.jobs });
    this.chatActive = Math.max(this.chatActive, data.jobs || 0);
    monitor.kick();
  }

  async reloadRow(index) {
    try {
      const message = await api.get(chatPath(this.chat, "messages", index));
      this.cache.set(message);
    } catch (error) {
      if (!(error instanceof ApiError)) throw error;
      toast(error.message, "error");
    }
    this.list.refreshRow(index);
  }

  /** Something in the chat's memory changed: statuses of other rows, the side panel. */
  changed() {
    this.cache.reload(this.list.first, this.list.last);
    this.tabs.current && this.panels[this.tabs.current].refresh();
    api.get(chatPath(this.chat)).then((summary) => {
      this.summary = summary;
      this.showSummary();
    }, () => {});
  }

  // --- scenes -------------------------------------------------------------------------------

  async loadScenes() {
    try {
      const data = await api.get(chatPath(this.chat, "scenes"));
      this.showScenes(data.scenes);
    } catch (error) {
      fill(this.sceneList, h("li", { class: "field-error" }, error.message));
    }
  }

  showScenes(scenes) {
    this.scenes = scenes;
    const items = scenes.map((scene, position) => {
      const name = scene.name || (scene.closed ? "(unnamed)" : "(open scene)");
      // Names made by the recap already say "Scene 3: …": no second number then.
      const numbered = !/^scene\b/i.test(name);
      return h(
        "li",
        {},
        h(
          "button",
          {
            type: "button",
            class: "scene-link",
            dataset: { start: scene.start, end: scene.end },
            "aria-label": `Scene ${position + 1}: ${scene.name || "unnamed"}, messages ${scene.start} to ${scene.end}`,
            onclick: () => this.focusRow(scene.start, "start"),
          },
          h("span", { class: "scene-number" }, numbered ? `${position + 1}.` : ""),
          h("span", { class: "scene-title" }, name),
          h("span", { class: "scene-range muted" }, `#${scene.start}–${scene.end}`),
        ),
      );
    });
    fill(this.sceneList, items.length ? items : h("li", { class: "muted" }, "No scenes yet."));
    this.highlightScene(this.list.first, this.list.last);
    this.panels.running.scenesChanged();
  }

  /** Mark the scene of the focused message (else of the message at the top of the view). */
  highlightScene(first) {
    let top = this.list ? this.list.indexAt(this.scroller.scrollTop + 1) : first;
    if (this.scroller.contains(document.activeElement) && this.active >= 0) top = this.active;
    for (const button of this.sceneList.querySelectorAll(".scene-link")) {
      const current = Number(button.dataset.start) <= top && top <= Number(button.dataset.end);
      if (current) button.setAttribute("aria-current", "true");
      else button.removeAttribute("aria-current");
    }
  }

  // --- jobs ---------------------------------------------------------------------------------

  /**
   * Follow this chat's jobs: reload the rows in view now and then while they run, and
   * everything once they are done. A pipeline step may queue the next ones a moment after it
   * ends, and a short step may run between two looks, so any change of the chat's count of
   * done jobs counts as "something finished" too.
   */
  async onJobs(state) {
    if (this.disposed) return;
    const globalDone = state.done;
    const moved = globalDone !== this.globalDone;
    this.globalDone = globalDone;
    if (!state.active && !this.chatActive && !moved) return;
    let summary;
    try {
      summary = await api.get(chatPath(this.chat));
    } catch {
      return;
    }
    if (this.disposed) return;
    this.summary = summary;
    this.showSummary();
    const jobs = summary.jobs || {};
    const active = (jobs.queued || 0) + (jobs.running || 0);
    const was = this.chatActive;
    const doneChanged = jobs.done !== this.chatDone && this.chatDone !== undefined;
    this.chatDone = jobs.done;
    this.chatActive = active;
    if (active) {
      if (++this.busyTicks % 2 === 0) this.cache.reload(this.list.first, this.list.last);
      return;
    }
    if (was || doneChanged) {
      this.busyTicks = 0;
      this.cache.reload(this.list.first, this.list.last);
      this.loadScenes();
      this.panels[this.tabs.current].refresh();
      this.main.querySelector(".chat-view").dataset.drained = "1";
    }
  }

  dispose() {
    this.disposed = true;
    if (this.unsubscribe) this.unsubscribe();
    if (this.list) this.list.destroy();
    for (const panel of Object.values(this.panels || {})) panel.dispose?.();
  }
}
