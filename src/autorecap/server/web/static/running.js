// The running recap: its versions newest first, the scenes each covers; select, edit, delete.

import { api, chatPath } from "./api.js";
import { confirmDialog, fill, formatDate, h, textEditor, toast } from "./dom.js";

export class RunningPanel {
  constructor(view) {
    this.view = view;
    this.data = null;
    this.editing = null; // version number being edited
    this.body = h("div", { class: "running-versions" });
    this.combined = h("section", { class: "combined", id: "combined-recap", "aria-labelledby": "combined-title" });
    this.el = h(
      "section",
      { class: "panel running", "aria-labelledby": "running-title" },
      h(
        "div",
        { class: "panel-head" },
        h("h2", { id: "running-title" }, "Running recap"),
        h("button", { type: "button", onclick: () => this.refresh() }, "Reload"),
      ),
      h(
        "p",
        { class: "muted" },
        "The selected version is injected into every prompt. Editing saves a new version.",
      ),
      this.body,
      this.combined,
    );
  }

  show() {
    this.visible = true;
    this.refresh();
  }

  async refresh() {
    try {
      this.data = await api.get(chatPath(this.view.chat, "running"));
    } catch (error) {
      fill(this.body, h("p", { class: "field-error" }, error.message));
      return;
    }
    this.render();
    this.refreshCombined();
  }

  /** The combined recap (every message recap merged), when it has versions or the tier is on. */
  async refreshCombined() {
    let data;
    try {
      data = await api.get(chatPath(this.view.chat, "combined"));
    } catch (error) {
      fill(this.combined, h("p", { class: "field-error" }, error.message));
      return;
    }
    const versions = data.versions || [];
    if (!versions.length && !data.enabled) {
      fill(this.combined);
      return;
    }
    fill(
      this.combined,
      h("h3", { id: "combined-title" }, "Combined recap"),
      h(
        "p",
        { class: "muted" },
        data.enabled
          ? "Every message recap merged into one narrative; the selected version is injected."
          : "Not injected: combined_recap_enabled is off.",
      ),
      versions.length
        ? h(
            "ol",
            { class: "combined-versions" },
            versions.map((version) =>
              h(
                "li",
                { class: "combined-version" },
                h(
                  "div",
                  { class: "pmsg-head" },
                  h("span", {}, `Version ${version.version} · ${version.message_count} recaps`),
                  h(
                    "button",
                    {
                      type: "button",
                      "aria-pressed": version.version === data.selected ? "true" : "false",
                      "aria-label": `Use combined recap version ${version.version}`,
                      onclick: () => this.selectCombined(version.version),
                    },
                    version.version === data.selected ? "In use" : "Use",
                  ),
                ),
                h("div", { class: "pmsg-content" }, version.content || ""),
              ),
            ),
          )
        : h("p", {}, "No version yet: it is made with the recaps."),
    );
  }

  async selectCombined(number) {
    try {
      await api.patch(chatPath(this.view.chat, "combined"), { selected: number });
    } catch (error) {
      toast(error.message, "error");
      return;
    }
    await this.refreshCombined();
    this.view.changed();
  }

  scenesChanged() {
    if (this.data) this.render();
  }

  /** "3 scenes: Harbour · Squall · Widow" from the break indexes a version covers. */
  coverage(breaks, version = {}) {
    const made = version.scene_count;
    if (typeof made === "number" && breaks && made !== breaks.length) {
      // Made from other scene breaks than the chat has now: what it was made from, in numbers.
      return `${made} scene${made === 1 ? "" : "s"}, up to message #${version.new_scene_index} (the scene breaks have changed since)`;
    }
    if (!breaks || !breaks.length) return "no scenes";
    const byBreak = new Map(this.view.scenes.map((scene, i) => [scene.break_index, [scene, i]]));
    const names = breaks.map((index) => {
      const found = byBreak.get(index);
      if (!found) return `the scene ending at #${index}`;
      const [scene, i] = found;
      return scene.name || `scene ${i + 1}`;
    });
    return `${breaks.length} scene${breaks.length === 1 ? "" : "s"}: ${names.join(" · ")}`;
  }

  render() {
    const { versions, selected } = this.data;
    if (!versions.length) {
      fill(
        this.body,
        h("p", { class: "empty" }, "No running recap yet. “Recap chat” makes one once a scene is closed."),
      );
      return;
    }
    const items = versions.map((version) => {
      const isSelected = version.version === selected;
      const editing = this.editing === version.version;
      return h(
        "li",
        {
          class: `version${isSelected ? " is-selected" : ""}`,
          dataset: { version: version.version },
          "aria-current": isSelected ? "true" : false,
        },
        h(
          "div",
          { class: "version-head" },
          h("h3", {}, `Version ${version.version}`),
          isSelected ? h("span", { class: "badge badge-on" }, "injected") : null,
          h("span", { class: "muted" }, formatDate(version.created_at)),
        ),
        h("p", { class: "version-covers" }, `Covers ${this.coverage(version.scenes, version)}`),
        editing
          ? textEditor({
              label: `Edit running recap version ${version.version}`,
              value: version.content,
              rows: 10,
              onSave: (text) => this.save(text),
              onCancel: () => {
                this.editing = null;
                this.render();
              },
            })
          : h("div", { class: "version-content" }, version.content),
        editing
          ? null
          : h(
              "div",
              { class: "row-actions" },
              h(
                "button",
                {
                  type: "button",
                  class: isSelected ? "" : "primary",
                  "aria-pressed": isSelected ? "true" : "false",
                  "aria-label": `Use running recap version ${version.version}`,
                  onclick: () => this.select(version.version),
                },
                isSelected ? "In use" : "Use this version",
              ),
              h(
                "button",
                {
                  type: "button",
                  "aria-label": `Edit running recap version ${version.version}`,
                  onclick: () => {
                    this.editing = version.version;
                    this.render();
                  },
                },
                "Edit",
              ),
              h(
                "button",
                {
                  type: "button",
                  class: "danger-text",
                  "aria-label": `Delete running recap version ${version.version}`,
                  onclick: () => this.remove(version.version),
                },
                "Delete",
              ),
            ),
      );
    });
    fill(this.body, h("ol", { class: "version-list", reversed: true }, items));
  }

  async select(version) {
    try {
      this.data = await api.patch(chatPath(this.view.chat, "running"), { selected: version });
      toast(`Running recap version ${version} is in use`);
    } catch (error) {
      toast(error.message, "error");
      return;
    }
    this.render();
    this.view.panels.preview.stale = true;
  }

  async save(content) {
    this.data = await api.patch(chatPath(this.view.chat, "running"), { content });
    this.editing = null;
    toast("Running recap saved as a new version");
    this.render();
    this.view.panels.preview.stale = true;
    const head = this.body.querySelector(".version h3");
    if (head) {
      head.tabIndex = -1;
      head.focus();
    }
  }

  async remove(version) {
    if (!(await confirmDialog(`Delete running recap version ${version}?`))) return;
    try {
      await api.del(chatPath(this.view.chat, "running", version));
      toast(`Version ${version} deleted`);
    } catch (error) {
      toast(error.message, "error");
    }
    this.refresh();
  }
}
