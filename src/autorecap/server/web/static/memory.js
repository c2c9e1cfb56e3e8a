// The memory switches: this chat's own (on, off, or the default) and the global one.

import { api, chatPath } from "./api.js";
import { fill, h, toast } from "./dom.js";

export class MemoryPanel {
  constructor(view) {
    this.view = view;
    this.body = h("div", { class: "memory-body" });
    this.el = h(
      "section",
      { class: "panel memory", "aria-labelledby": "memory-title" },
      h("div", { class: "panel-head" }, h("h2", { id: "memory-title" }, "Memory")),
      h(
        "p",
        { class: "muted" },
        "With memory off, no recap is injected and no message is auto-hidden in this chat's prompts.",
      ),
      this.body,
    );
  }

  show() {
    this.refresh();
  }

  async refresh() {
    try {
      this.data = await api.get(chatPath(this.view.chat, "memory"));
    } catch (error) {
      fill(this.body, h("p", { class: "field-error" }, error.message));
      return;
    }
    this.render();
  }

  render() {
    const focused = this.body.contains(document.activeElement) ? document.activeElement.id : null;
    this.draw();
    if (focused) document.getElementById(focused)?.focus();
  }

  draw() {
    const { enabled, chat, global } = this.data;
    const name = "memory-chat";
    const choice = (value, label) => {
      const id = `memory-chat-${value}`;
      const input = h("input", {
        type: "radio",
        name,
        id,
        value,
        checked: String(chat) === value,
        onchange: () => this.setChat(value === "null" ? null : value === "true"),
      });
      return h("div", { class: "radio" }, input, h("label", { for: id }, label));
    };
    const useGlobal = h("input", {
      type: "checkbox",
      id: "memory-use-global",
      checked: Boolean(global.use_global_toggle_state),
      onchange: (event) => this.setGlobal({ use_global_toggle_state: event.target.checked }),
    });
    const globalState = h("input", {
      type: "checkbox",
      id: "memory-global-state",
      checked: Boolean(global.global_toggle_state),
      onchange: (event) => this.setGlobal({ global_toggle_state: event.target.checked }),
    });
    fill(
      this.body,
      h(
        "p",
        { class: `memory-state ${enabled ? "on" : "off"}`, id: "memory-effective" },
        enabled ? "Memory is on in this chat." : "Memory is off in this chat.",
        global.use_global_toggle_state ? " (The global switch decides.)" : "",
      ),
      h(
        "fieldset",
        {},
        h("legend", {}, "This chat"),
        choice("null", "Default"),
        choice("true", "On"),
        choice("false", "Off"),
      ),
      h(
        "fieldset",
        {},
        h("legend", {}, "Every chat"),
        h("div", { class: "check" }, useGlobal, h("label", { for: "memory-use-global" }, "One switch for every chat")),
        h(
          "div",
          { class: "check" },
          globalState,
          h("label", { for: "memory-global-state" }, "Memory on (the global switch)"),
        ),
      ),
    );
  }

  async setChat(value) {
    try {
      this.data = await api.patch(chatPath(this.view.chat, "memory"), { chat: value });
      toast(value === null ? "This chat follows the default" : `Memory ${value ? "on" : "off"} in this chat`);
    } catch (error) {
      toast(error.message, "error");
    }
    await this.refresh();
    this.view.changed();
  }

  async setGlobal(change) {
    try {
      await api.patch("/api/memory", change);
      toast("Global memory switch saved");
    } catch (error) {
      toast(error.message, "error");
    }
    await this.refresh();
    this.view.changed();
  }
}
