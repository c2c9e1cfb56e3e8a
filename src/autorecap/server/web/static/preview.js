// The prompt preview: what would go upstream for this chat now, the injected recap highlighted,
// the hidden messages listed, token counts against the context size.

import { api, chatPath } from "./api.js";
import { fill, formatCount, h, ranges } from "./dom.js";

const ROLE_NAMES = { system: "System", user: "User", assistant: "Assistant" };

export class PreviewPanel {
  constructor(view) {
    this.view = view;
    this.contextSize = h("input", {
      type: "number",
      min: 256,
      id: "preview-context",
      placeholder: "chat's setting",
    });
    this.contextSize.addEventListener("keydown", (event) => {
      if (event.key === "Enter") {
        event.preventDefault();
        this.refresh();
      }
    });
    this.query = h("input", {
      type: "search",
      id: "preview-query",
      placeholder: "newest user message",
      "aria-describedby": "preview-query-help",
    });
    this.query.addEventListener("keydown", (event) => {
      if (event.key === "Enter") {
        event.preventDefault();
        this.refresh();
      }
    });
    this.body = h("div", { class: "preview-body", "aria-live": "polite", "aria-busy": "false" });
    this.el = h(
      "section",
      { class: "panel preview", "aria-labelledby": "preview-title" },
      h(
        "div",
        { class: "panel-head" },
        h("h2", { id: "preview-title" }, "Prompt preview"),
        h("button", { type: "button", id: "preview-refresh", onclick: () => this.refresh() }, "Refresh"),
      ),
      h(
        "div",
        { class: "inline-field" },
        h("label", { for: "preview-context" }, "Context size"),
        this.contextSize,
      ),
      h(
        "div",
        { class: "inline-field" },
        h("label", { for: "preview-query" }, "Recall for"),
        this.query,
      ),
      h(
        "p",
        { class: "muted", id: "preview-query-help" },
        "What the recall tier looks for in the hidden messages and recaps (try a question about the past).",
      ),
      this.body,
    );
  }

  show() {
    this.refresh();
  }

  async refresh() {
    if (this.view.tabs.current !== "preview") {
      this.stale = true;
      return;
    }
    this.stale = false;
    this.body.setAttribute("aria-busy", "true");
    let data;
    try {
      data = await api.get(chatPath(this.view.chat, "preview"), {
        context_size: this.contextSize.value || null,
        query: this.query.value.trim() || null,
      });
    } catch (error) {
      fill(this.body, h("p", { class: "field-error" }, error.message));
      this.body.setAttribute("aria-busy", "false");
      return;
    }
    this.render(data);
    this.body.setAttribute("aria-busy", "false");
  }

  render(data) {
    const tokens = data.tokens || {};
    const size = tokens.context_size || 0;
    const total = tokens.total || 0;
    const over = size && total > size;
    const injections = data.injections || [];
    const hidden = data.hidden || [];
    const messages = data.messages || [];
    const summary = h(
      "div",
      { class: "preview-summary" },
      h(
        "p",
        { class: `memory-state ${data.enabled ? "on" : "off"}`, id: "preview-memory" },
        data.enabled ? "Memory is on" : "Memory is off: nothing is injected",
      ),
      h(
        "div",
        { class: "token-line" },
        h("label", { for: "preview-meter" }, `${formatCount(total)} of ${formatCount(size)} tokens`),
        h("meter", {
          id: "preview-meter",
          min: 0,
          max: size || 1,
          value: total,
          high: size ? size * 0.9 : undefined,
          optimum: 0,
        }),
      ),
      h(
        "dl",
        { class: "token-table" },
        h("dt", {}, "Injected"),
        h("dd", { id: "preview-injected-tokens" }, formatCount(tokens.injected || 0)),
        h("dt", {}, "History"),
        h("dd", {}, formatCount(tokens.history || 0)),
        h("dt", {}, "Messages sent"),
        h("dd", {}, formatCount(messages.length)),
      ),
      over ? h("p", { class: "field-error" }, "Over the context size: the frontend would cut the oldest messages.") : null,
      h(
        "p",
        { class: "hidden-list", id: "preview-hidden" },
        hidden.length
          ? [
              `${formatCount(hidden.length)} hidden message${hidden.length === 1 ? "" : "s"} left out: `,
              h("span", { class: "mono" }, ranges(hidden)),
            ]
          : "No message is hidden.",
      ),
      injections.length
        ? h(
            "ul",
            { class: "injections" },
            injections.map((item) =>
              h(
                "li",
                {},
                h("span", { class: "badge badge-on" }, item.key),
                ` ${item.position}${item.position === "in_chat" ? ` at depth ${item.depth}` : ""}, as ${item.role}`,
              ),
            ),
          )
        : null,
    );
    let list;
    if (data.format === "text" && typeof data.text === "string") {
      list = h("pre", { class: "preview-text" }, data.text);
    } else {
      list = h(
        "ol",
        { class: "preview-messages", "aria-label": "Messages sent upstream" },
        messages.map((message) =>
          h(
            "li",
            { class: `pmsg role-${message.role}${message.injected ? " injected" : ""}` },
            h(
              "div",
              { class: "pmsg-head" },
              h("span", { class: "pmsg-role" }, ROLE_NAMES[message.role] || message.role),
              message.name ? h("span", { class: "muted" }, ` ${message.name}`) : null,
              message.injected ? h("mark", { class: "badge badge-on" }, "injected recap") : null,
            ),
            h("div", { class: "pmsg-content" }, String(message.content ?? "")),
          ),
        ),
      );
    }
    fill(this.body, summary, this.recalled(data.recall), list);
  }

  recalled(recall) {
    if (!recall) return null;
    const pieces = recall.pieces || [];
    const typed = this.query.value.trim();
    const state = recall.enabled
      ? "Recall is on"
      : typed
        ? "Recall is off (shown for the query above)"
        : "Recall is off";
    return h(
      "section",
      { class: "recall", id: "preview-recall", "aria-label": "Recalled" },
      h("h3", {}, `Recalled: ${pieces.length} piece${pieces.length === 1 ? "" : "s"}`),
      h("p", { class: "muted" }, recall.query ? `${state}; looked for: “${recall.query.slice(0, 160)}”` : state),
      pieces.length
        ? h(
            "ol",
            { class: "recall-pieces" },
            pieces.map((piece) =>
              h(
                "li",
                { class: `recall-piece kind-${piece.kind}` },
                h(
                  "div",
                  { class: "pmsg-head" },
                  h("span", { class: "mono" }, piece.source),
                  h("span", { class: "badge", title: "BM25 score: higher matched better" }, `score ${piece.score}`),
                ),
                h("div", { class: "pmsg-content" }, piece.text),
              ),
            ),
          )
        : h("p", {}, "Nothing hidden matches."),
    );
  }
}
