// The job queue: a monitor polling GET /api/jobs (fast while jobs run, slowly when idle) that
// drives the header's indicator, and the jobs page (running, queued and failed jobs, progress,
// retry, cancel, pause).

import { api, request } from "./api.js";
import { fill, formatCount, formatDate, h, toast } from "./dom.js";

const FAST_MS = 700;
const SLOW_MS = 5000;

function activeCount(data) {
  const counts = data.counts || {};
  if ("queued" in counts || "running" in counts) return (counts.queued || 0) + (counts.running || 0);
  return data.jobs.filter((job) => job.state === "queued" || job.state === "running").length;
}

class Monitor {
  constructor() {
    this.listeners = new Set();
    this.timer = 0;
    this.state = { active: 0, done: undefined, counts: {}, paused: false, jobs: [] };
    this.running = false;
  }

  start() {
    if (!this.running) {
      this.running = true;
      this.poll();
    }
  }

  subscribe(listener) {
    this.listeners.add(listener);
    return () => this.listeners.delete(listener);
  }

  /** Poll now (a job was just queued). */
  kick() {
    clearTimeout(this.timer);
    this.poll();
  }

  async poll() {
    clearTimeout(this.timer);
    let next = SLOW_MS;
    try {
      const data = await request("GET", "/api/jobs", {
        query: { state: "queued,running,failed" },
        background: true,
      });
      const active = activeCount(data);
      const counts = data.counts || {};
      // Jobs may start and finish between two looks: a change of the done count is activity too.
      const done = counts.done ?? null;
      const moved = done !== this.state.done && this.state.done !== undefined;
      this.state = { active, done, counts, paused: data.paused, jobs: data.jobs || [] };
      this.show();
      for (const listener of this.listeners) listener(this.state);
      if (active || moved) next = FAST_MS;
    } catch {
      next = SLOW_MS;
    }
    this.timer = setTimeout(() => this.poll(), next);
  }

  show() {
    const indicator = document.getElementById("jobs-indicator");
    const { active, counts, paused } = this.state;
    const failed = counts.failed || 0;
    let text = active ? `${formatCount(active)} waiting` : "idle";
    if (paused) text += ", paused";
    if (failed) text += `, ${formatCount(failed)} failed`;
    indicator.textContent = text;
    indicator.dataset.active = String(active);
    indicator.dataset.failed = String(failed);
  }
}

export const monitor = new Monitor();

const STATES = ["running", "queued", "failed", "done", "cancelled"];

export class JobsView {
  constructor(main) {
    this.main = main;
    this.states = new Set(["running", "queued", "failed"]);
  }

  async mount() {
    document.title = "Jobs · autorecap";
    this.table = h("div", { class: "jobs-table-wrap" });
    this.counts = h("p", { class: "muted", id: "jobs-counts", "aria-live": "polite" });
    this.pauseButton = h("button", { type: "button", id: "jobs-pause", onclick: () => this.togglePause() }, "Pause queue");
    const filters = STATES.map((state) => {
      const id = `jobs-state-${state}`;
      return h(
        "div",
        { class: "check" },
        h("input", {
          type: "checkbox",
          id,
          checked: this.states.has(state),
          onchange: (event) => {
            if (event.target.checked) this.states.add(state);
            else this.states.delete(state);
            this.refresh();
          },
        }),
        h("label", { for: id }, state),
      );
    });
    fill(
      this.main,
      h(
        "section",
        { class: "page jobs-page" },
        h(
          "div",
          { class: "page-head" },
          h("h1", { tabindex: "-1" }, "Jobs"),
          h("div", { class: "toolbar" }, this.pauseButton, h("button", { type: "button", onclick: () => this.refresh() }, "Refresh")),
        ),
        this.counts,
        h("fieldset", { class: "filters" }, h("legend", {}, "Show jobs that are"), filters),
        this.table,
      ),
    );
    await this.refresh();
    this.timer = setInterval(() => this.refresh(), 1000);
  }

  async refresh() {
    let data;
    try {
      data = await api.get("/api/jobs", { state: [...this.states].join(",") });
    } catch (error) {
      fill(this.table, h("p", { class: "field-error" }, error.message));
      return;
    }
    if (this.disposed) return;
    this.paused = data.paused;
    this.pauseButton.textContent = data.paused ? "Resume queue" : "Pause queue";
    this.pauseButton.setAttribute("aria-pressed", data.paused ? "true" : "false");
    const counts = Object.entries(data.counts || {})
      .map(([state, n]) => `${formatCount(n)} ${state}`)
      .join(" · ");
    this.counts.textContent = (counts || "No jobs.") + (data.paused ? " · the queue is paused" : "");
    this.render(data.jobs || []);
  }

  render(jobs) {
    const focused = this.table.contains(document.activeElement) ? document.activeElement.id : null;
    if (!jobs.length) {
      fill(this.table, h("p", { class: "empty", id: "jobs-empty" }, "No jobs in these states."));
      return;
    }
    const rows = jobs.map((job) => {
      const progress = typeof job.progress === "number" ? job.progress : null;
      return h(
        "tr",
        { class: `job state-${job.state}`, dataset: { id: job.id, state: job.state } },
        h("td", { class: "mono" }, String(job.id)),
        h("td", {}, job.kind),
        h("td", {}, job.chat ? h("a", { href: `#/chat/${encodeURIComponent(job.chat)}` }, job.chat) : ""),
        h("td", { class: "num" }, job.target_index ?? ""),
        h("td", {}, h("span", { class: `state state-${job.state}` }, job.state)),
        h(
          "td",
          {},
          progress === null
            ? ""
            : h("progress", { max: 1, value: progress, "aria-label": `Progress of job ${job.id}` }),
          job.note ? h("span", { class: "muted" }, ` ${job.note}`) : null,
        ),
        h("td", { class: "num" }, String(job.attempts ?? "")),
        h("td", { class: "job-error" }, job.error || ""),
        h("td", {}, formatDate(job.updated_at)),
        h(
          "td",
          { class: "row-actions" },
          job.state === "failed" || job.state === "cancelled"
            ? h("button", { type: "button", id: `job-retry-${job.id}`, "aria-label": `Retry job ${job.id}`, onclick: () => this.act(job.id, "retry") }, "Retry")
            : null,
          job.state === "queued" || job.state === "running"
            ? h("button", { type: "button", id: `job-cancel-${job.id}`, "aria-label": `Cancel job ${job.id}`, onclick: () => this.act(job.id, "cancel") }, "Cancel")
            : null,
        ),
      );
    });
    fill(
      this.table,
      h(
        "table",
        { class: "table jobs" },
        h("caption", { class: "visually-hidden" }, "Jobs, newest first"),
        h(
          "thead",
          {},
          h("tr", {}, ["Id", "Kind", "Chat", "Message", "State", "Progress", "Attempts", "Error", "Updated", "Actions"].map((name) => h("th", { scope: "col" }, name))),
        ),
        h("tbody", {}, rows),
      ),
    );
    if (focused) document.getElementById(focused)?.focus();
  }

  async act(id, action) {
    try {
      await api.post(`/api/jobs/${id}/${action}`);
      toast(`Job ${id}: ${action === "retry" ? "queued again" : "cancelled"}`);
    } catch (error) {
      toast(error.message, "error");
    }
    monitor.kick();
    this.refresh();
  }

  async togglePause() {
    try {
      await api.post(`/api/jobs/${this.paused ? "resume" : "pause"}`);
    } catch (error) {
      toast(error.message, "error");
    }
    this.refresh();
  }

  dispose() {
    this.disposed = true;
    clearInterval(this.timer);
  }
}
