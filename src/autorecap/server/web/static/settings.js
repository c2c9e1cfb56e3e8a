// The settings form, generated from the JSON schema that GET /api/settings returns. The API
// validates a patch as a whole; its error names the `field`, shown next to that field.

import { api } from "./api.js";
import { fill, h, toast } from "./dom.js";

// Sections of the form, by setting name (a setting no rule takes goes to "Other").
const GROUPS = [
  ["Memory switches", (k) => /^(default_chat_enabled|use_global_toggle_state|global_toggle_state|chats_enabled|disabled_group_characters)$/.test(k)],
  ["Which messages count", (k) => k.startsWith("include_") || k === "message_length_threshold"],
  ["Token budget", (k) => /^(message_recap_context_limit|message_recap_context_type|context_size|tokenizer)$/.test(k)],
  ["Running recap injection", (k) => k.startsWith("running_scene_recap_")],
  ["Message recap injection", (k) => /^message_recap_(injection_enabled|template|position|depth|role|scan)$/.test(k)],
  ["Auto-hide and scene breaks", (k) => k.startsWith("auto_")],
  ["Recap backend", (k) => k === "recap_backend" || k.startsWith("llm_")],
  ["Prompts and recap sizes", (k) => /(_prompt|_prefill|_context_messages|_max_tokens|_retries)$/.test(k)],
  ["Other", () => true],
];

/** `{"type": "integer"}`, or the non-null branch of `anyOf` (an optional setting). */
function baseSchema(schema, root) {
  let s = schema;
  if (s.$ref) s = root.$defs?.[s.$ref.split("/").pop()] ?? s;
  if (s.anyOf) {
    const branch = s.anyOf.find((b) => b.type !== "null");
    if (branch) s = { ...s, ...baseSchema(branch, root), nullable: true };
  }
  if (s.allOf && s.allOf.length === 1) s = { ...s, ...baseSchema(s.allOf[0], root) };
  return s;
}

/** Labels of integer choices from a description such as "0 system, 1 user, 2 assistant." */
function choiceLabels(description) {
  const labels = {};
  for (const match of (description || "").matchAll(/(-?\d+) ([a-z][^,.;]*)/gi)) {
    labels[match[1]] = match[2].trim();
  }
  return labels;
}

export class SettingsView {
  constructor(main) {
    this.main = main;
    this.fields = new Map(); // key -> {kind, input, error, schema}
  }

  async mount() {
    document.title = "Settings · autorecap";
    this.form = h("form", { class: "settings-form", id: "settings-form", novalidate: true });
    this.form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.save();
    });
    this.profileBar = h("div", { class: "profile-bar" });
    this.formError = h("p", { class: "field-error", id: "settings-error", role: "alert" });
    fill(
      this.main,
      h(
        "section",
        { class: "page settings-page" },
        h("div", { class: "page-head" }, h("h1", { tabindex: "-1" }, "Settings")),
        this.profileBar,
        this.form,
      ),
    );
    await this.load();
  }

  async load() {
    try {
      this.data = await api.get("/api/settings");
    } catch (error) {
      fill(this.form, h("p", { class: "field-error" }, error.message));
      return;
    }
    this.renderProfiles();
    this.renderForm();
  }

  renderProfiles() {
    const { profiles = [], active_profile: active, profile } = this.data;
    const select = h(
      "select",
      { id: "profile-select" },
      profiles.map((name) => h("option", { value: name, selected: name === (active || profile) }, name)),
    );
    const newName = h("input", { type: "text", id: "profile-new", autocomplete: "off", placeholder: "name" });
    fill(
      this.profileBar,
      h(
        "div",
        { class: "field" },
        h("label", { for: "profile-select" }, "Profile"),
        h(
          "div",
          { class: "inline" },
          select,
          h("button", { type: "button", onclick: () => this.profileAction("load", select.value) }, "Load"),
          h("button", { type: "button", class: "danger-text", onclick: () => this.profileAction("delete", select.value) }, "Delete"),
        ),
        h("p", { class: "hint" }, `Editing the active profile: ${active || profile || "Default"}.`),
      ),
      h(
        "div",
        { class: "field" },
        h("label", { for: "profile-new" }, "Save these settings as a new profile"),
        h(
          "div",
          { class: "inline" },
          newName,
          h("button", { type: "button", onclick: () => this.profileAction("save", newName.value.trim()) }, "Save as profile"),
        ),
      ),
    );
  }

  async profileAction(action, name) {
    if (!name) return;
    try {
      if (action === "load") await api.post(`/api/profiles/${encodeURIComponent(name)}/load`);
      else if (action === "delete") await api.del(`/api/profiles/${encodeURIComponent(name)}`);
      else await api.post("/api/profiles", { name, source: this.data.active_profile || this.data.profile });
      toast(`Profile ${name}: ${action === "save" ? "saved" : action === "load" ? "loaded" : "deleted"}`);
    } catch (error) {
      toast(error.message, "error");
      return;
    }
    await this.load();
  }

  renderForm() {
    const { schema, values } = this.data;
    const properties = schema.properties || {};
    const grouped = new Map(GROUPS.map(([name]) => [name, []]));
    for (const key of Object.keys(properties)) {
      const [group] = GROUPS.find(([, test]) => test(key));
      grouped.get(group).push(key);
    }
    this.fields.clear();
    const sections = [];
    for (const [group, keys] of grouped) {
      if (!keys.length) continue;
      sections.push(
        h(
          "fieldset",
          { class: "settings-group" },
          h("legend", {}, group),
          keys.map((key) => this.field(key, baseSchema(properties[key], schema), values[key])),
        ),
      );
    }
    fill(
      this.form,
      sections,
      h(
        "div",
        { class: "form-actions" },
        this.formError,
        h("button", { type: "submit", class: "primary", id: "settings-save" }, "Save settings"),
        h("button", { type: "button", onclick: () => this.renderForm() }, "Discard changes"),
      ),
    );
  }

  field(key, schema, value) {
    const id = `setting-${key}`;
    const helpId = `${id}-help`;
    const errorId = `${id}-error`;
    const label = schema.title || key;
    const describedBy = `${helpId} ${errorId}`;
    let kind;
    let input;
    if (schema.enum) {
      kind = typeof schema.enum[0] === "number" ? "enum-number" : "enum";
      const labels = choiceLabels(schema.description);
      input = h(
        "select",
        { id, name: key, "aria-describedby": describedBy },
        schema.enum.map((option) =>
          h("option", { value: String(option), selected: option === value }, labels[option] ? `${option}: ${labels[option]}` : String(option)),
        ),
      );
    } else if (schema.type === "boolean") {
      kind = "boolean";
      input = h("input", { type: "checkbox", id, name: key, checked: Boolean(value), "aria-describedby": describedBy });
    } else if (schema.type === "integer" || schema.type === "number") {
      kind = schema.type;
      input = h("input", {
        type: "number",
        id,
        name: key,
        inputmode: schema.type === "integer" ? "numeric" : "decimal",
        step: schema.type === "integer" ? "1" : "any",
        min: schema.minimum ?? schema.exclusiveMinimum,
        max: schema.maximum ?? schema.exclusiveMaximum,
        "aria-describedby": describedBy,
      });
      input.value = value ?? "";
    } else if (schema.type === "string") {
      kind = "string";
      const long = /(_prompt|_template|_prefill)$/.test(key) || String(value ?? "").includes("\n");
      input = long
        ? h("textarea", { id, name: key, rows: 5, "aria-describedby": describedBy, spellcheck: "false" })
        : h("input", { type: "text", id, name: key, "aria-describedby": describedBy, spellcheck: "false" });
      input.value = value ?? "";
    } else {
      kind = "json";
      input = h("textarea", { id, name: key, rows: 3, class: "mono", "aria-describedby": describedBy, spellcheck: "false" });
      input.value = JSON.stringify(value ?? null, null, 1);
    }
    const error = h("p", { class: "field-error", id: errorId });
    const defaultText =
      schema.default === undefined
        ? ""
        : ` Default: ${typeof schema.default === "string" && schema.default.length > 40 ? "(long text)" : JSON.stringify(schema.default)}.`;
    this.fields.set(key, { kind, input, error, schema, original: value });
    const reset = h(
      "button",
      { type: "button", class: "link-button", "aria-label": `Reset ${label} to its default`, onclick: () => this.reset(key) },
      "Reset",
    );
    const global = (this.data.global_keys || []).includes(key);
    const labelEl = h(
      "label",
      { for: id },
      label,
      global ? [" ", h("span", { class: "badge", title: "Shared by every profile" }, "global")] : null,
    );
    const help = h("p", { class: "hint", id: helpId }, h("code", {}, key), ` ${schema.description || ""}${defaultText}`);
    if (kind === "boolean") {
      return h("div", { class: "field setting check", dataset: { field: key } }, input, labelEl, reset, help, error);
    }
    return h("div", { class: "field setting", dataset: { field: key } }, h("div", { class: "label-row" }, labelEl, reset), input, help, error);
  }

  /** The value an input holds, or throws Error(message) for what cannot be sent at all. */
  read(field) {
    const { kind, input } = field;
    if (kind === "boolean") return input.checked;
    if (kind === "enum-number") return Number(input.value);
    if (kind === "enum" || kind === "string") return input.value;
    if (kind === "integer" || kind === "number") {
      if (input.value.trim() === "") throw new Error("A number is needed.");
      const number = Number(input.value);
      if (!Number.isFinite(number)) throw new Error("A number is needed.");
      return number;
    }
    try {
      return JSON.parse(input.value);
    } catch {
      throw new Error("This must be valid JSON.");
    }
  }

  clearErrors() {
    this.formError.textContent = "";
    for (const field of this.fields.values()) {
      field.error.textContent = "";
      field.input.removeAttribute("aria-invalid");
    }
  }

  showError(key, message) {
    const field = this.fields.get(key);
    if (!field) {
      this.formError.textContent = message;
      return;
    }
    field.error.textContent = message;
    field.input.setAttribute("aria-invalid", "true");
    field.input.focus({ preventScroll: true });
    // Not under the sticky save bar: the field and its message in the middle of the screen.
    field.input.scrollIntoView({ block: "center" });
    this.formError.textContent = `${key}: ${message}`;
  }

  async save() {
    this.clearErrors();
    const patch = {};
    for (const [key, field] of this.fields) {
      let value;
      try {
        value = this.read(field);
      } catch (error) {
        this.showError(key, error.message);
        return;
      }
      if (JSON.stringify(value) !== JSON.stringify(field.original)) patch[key] = value;
    }
    if (!Object.keys(patch).length) {
      toast("Nothing changed");
      return;
    }
    try {
      await api.patch("/api/settings", patch);
    } catch (error) {
      if (error.field) this.showError(error.field, error.message);
      else this.formError.textContent = error.message;
      return;
    }
    toast(`Saved ${Object.keys(patch).length} setting${Object.keys(patch).length === 1 ? "" : "s"}`);
    await this.load();
  }

  async reset(key) {
    try {
      await api.del(`/api/settings/${encodeURIComponent(key)}`);
      toast(`${key} reset to its default`);
    } catch (error) {
      this.showError(key, error.message);
      return;
    }
    await this.load();
    this.fields.get(key)?.input.focus();
  }
}
