// The memory switches: this chat's own (on, off, or the default) and the global one; and the
// settings profile the chat runs with (bound to it, or the active one).

import { api, chatPath, request } from "./api.js";
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
    // The profile part is read beside the switches: if it cannot be read, the switches stay.
    const settings = api.get("/api/settings", { chat: this.view.chat }).then(
      (data) => data,
      (error) => ({ error }),
    );
    try {
      this.data = await api.get(chatPath(this.view.chat, "memory"));
      this.settings = await settings;
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
      this.profileField(),
    );
  }

  /** Which settings profile this chat runs with, and a choice to bind it to another. */
  profileField() {
    if (this.settings.error) {
      return h(
        "fieldset",
        {},
        h("legend", {}, "Settings profile"),
        h("p", { class: "field-error" }, `The settings could not be read: ${this.settings.error.message}`),
      );
    }
    const { profile, profiles = [], active_profile: active, bindings = {} } = this.settings;
    const bound = (bindings.chat || {})[this.view.chat] || "";
    const how = bound
      ? "bound to this chat"
      : profile !== active
        ? "bound to its character"
        : "the active profile, as every chat without a binding";
    const select = h(
      "select",
      { id: "chat-profile", onchange: (event) => this.bindProfile(event.target.value, bound) },
      h("option", { value: "", selected: !bound }, `No binding: the active profile (${active})`),
      profiles.map((name) => h("option", { value: name, selected: name === bound }, name)),
    );
    return h(
      "fieldset",
      {},
      h("legend", {}, "Settings profile"),
      h("p", { id: "chat-profile-effective" }, `This chat runs with the profile “${profile}”: ${how}.`),
      h("label", { for: "chat-profile" }, "Bind this chat to"),
      select,
      h("p", { class: "hint" }, "Profiles are made and edited on the Settings page."),
    );
  }

  async bindProfile(name, bound) {
    try {
      if (name) {
        await api.put(`/api/profiles/${encodeURIComponent(name)}/bindings`, { chat: this.view.chat });
        toast(`This chat now runs with the profile “${name}”`);
      } else if (bound) {
        await request("DELETE", `/api/profiles/${encodeURIComponent(bound)}/bindings`, {
          json: { chat: this.view.chat },
        });
        toast("This chat now runs with the active profile");
      }
    } catch (error) {
      toast(error.message, "error");
    }
    await this.refresh();
    this.view.changed();
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
