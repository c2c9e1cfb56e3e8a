// Tabs after the WAI-ARIA pattern: one tab stop, arrows/Home/End move between tabs.

import { h } from "./dom.js";

let seq = 0;

export class Tabs {
  /**
   * @param {{id: string, label: string}[]} tabs
   * @param {string} label  the tab list's accessible name
   * @param {(id: string, userAction: boolean) => void} onSelect
   */
  constructor(tabs, label, onSelect) {
    const prefix = `tabs${++seq}`;
    this.onSelect = onSelect;
    this.current = null;
    this.buttons = new Map();
    this.panels = new Map();
    const list = h("div", { role: "tablist", "aria-label": label, class: "tablist" });
    const panels = [];
    for (const tab of tabs) {
      const button = h(
        "button",
        {
          type: "button",
          role: "tab",
          id: `${prefix}-${tab.id}`,
          "aria-controls": `${prefix}-${tab.id}-panel`,
          "aria-selected": "false",
          tabindex: "-1",
          dataset: { tab: tab.id },
          onclick: () => this.select(tab.id, true),
        },
        tab.label,
      );
      const panel = h("div", {
        role: "tabpanel",
        id: `${prefix}-${tab.id}-panel`,
        "aria-labelledby": button.id,
        class: "tabpanel",
        hidden: true,
      });
      this.buttons.set(tab.id, button);
      this.panels.set(tab.id, panel);
      list.append(button);
      panels.push(panel);
    }
    list.addEventListener("keydown", (event) => this.onKey(event, tabs));
    this.el = h("div", { class: "tabs" }, list, panels);
  }

  panel(id) {
    return this.panels.get(id);
  }

  select(id, userAction) {
    if (!this.buttons.has(id)) id = this.buttons.keys().next().value;
    if (this.current === id) return;
    for (const [key, button] of this.buttons) {
      const on = key === id;
      button.setAttribute("aria-selected", on ? "true" : "false");
      button.tabIndex = on ? 0 : -1;
      this.panels.get(key).hidden = !on;
    }
    this.current = id;
    this.onSelect(id, userAction);
  }

  onKey(event, tabs) {
    const ids = tabs.map((tab) => tab.id);
    const at = ids.indexOf(this.current);
    let next = null;
    if (event.key === "ArrowRight") next = ids[(at + 1) % ids.length];
    else if (event.key === "ArrowLeft") next = ids[(at - 1 + ids.length) % ids.length];
    else if (event.key === "Home") next = ids[0];
    else if (event.key === "End") next = ids[ids.length - 1];
    if (next === null) return;
    event.preventDefault();
    this.select(next, true);
    this.buttons.get(next).focus();
  }
}
