// Small DOM helpers: element building (text is always set as text, never parsed as HTML),
// toasts, a confirm dialog and formatting.

/**
 * h("button", {class: "x", onclick: fn, "aria-label": "..."}, "text", child...)
 * Attributes starting with "on" become listeners; `dataset`/`props` objects are assigned;
 * false/null/undefined attributes are left out; children may be strings, nodes or arrays.
 */
export function h(tag, attrs = {}, ...children) {
  const el = document.createElement(tag);
  for (const [key, value] of Object.entries(attrs || {})) {
    if (value === false || value === null || value === undefined) continue;
    if (key.startsWith("on") && typeof value === "function") {
      el.addEventListener(key.slice(2), value);
    } else if (key === "dataset") {
      Object.assign(el.dataset, value);
    } else if (key === "props") {
      Object.assign(el, value);
    } else if (key === "class") {
      el.className = value;
    } else {
      el.setAttribute(key, value === true ? "" : String(value));
    }
  }
  append(el, children);
  return el;
}

function append(el, children) {
  for (const child of children) {
    if (child === null || child === undefined || child === false) continue;
    if (Array.isArray(child)) append(el, child);
    else el.append(child instanceof Node ? child : String(child));
  }
}

/** Replace an element's children. */
export function fill(el, ...children) {
  el.replaceChildren();
  append(el, children);
  return el;
}

let toastSeq = 0;

/** A short notice in the polite live region; errors stay longer. */
export function toast(text, kind = "info") {
  const box = document.getElementById("toasts");
  const item = h("div", { class: `toast toast-${kind}`, id: `toast-${++toastSeq}` }, text);
  box.append(item);
  setTimeout(() => item.remove(), kind === "error" ? 8000 : 3000);
}

/** Ask before something destructive; resolves true when confirmed. Escape cancels. */
export function confirmDialog(text, okLabel = "Delete") {
  const dialog = document.getElementById("confirm-dialog");
  document.getElementById("confirm-text").textContent = text;
  document.getElementById("confirm-ok").textContent = okLabel;
  dialog.returnValue = "cancel";
  const opener = document.activeElement;
  dialog.showModal();
  document.getElementById("confirm-ok").focus();
  return new Promise((resolve) => {
    dialog.addEventListener(
      "close",
      () => {
        if (opener instanceof HTMLElement) opener.focus();
        resolve(dialog.returnValue === "ok");
      },
      { once: true },
    );
  });
}

const dateFormat = new Intl.DateTimeFormat(undefined, { dateStyle: "medium", timeStyle: "short" });

/** A date string or epoch seconds as local text ("" when missing or unreadable). */
export function formatDate(value) {
  if (value === null || value === undefined || value === "") return "";
  const date = typeof value === "number" ? new Date(value * 1000) : new Date(value);
  return Number.isNaN(date.getTime()) ? String(value) : dateFormat.format(date);
}

/** 12345 -> "12,345". */
export function formatCount(n) {
  return typeof n === "number" ? n.toLocaleString("en-US") : String(n ?? "");
}

/** [1,2,3,7,9,10] -> "1–3, 7, 9–10". */
export function ranges(indexes) {
  const sorted = [...indexes].sort((a, b) => a - b);
  const parts = [];
  let i = 0;
  while (i < sorted.length) {
    let j = i;
    while (j + 1 < sorted.length && sorted[j + 1] === sorted[j] + 1) j++;
    parts.push(i === j ? `${sorted[i]}` : `${sorted[i]}–${sorted[j]}`);
    i = j + 1;
  }
  return parts.join(", ");
}

/**
 * SillyTavern message text as nodes: `*actions*` in italics, the rest as plain text
 * (white-space is kept by CSS). Never HTML.
 */
export function richText(text) {
  const nodes = [];
  const pattern = /\*([^*\n]+)\*/g;
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    if (match.index > last) nodes.push(text.slice(last, match.index));
    nodes.push(h("em", {}, match[1]));
    last = match.index + match[0].length;
  }
  if (last < text.length) nodes.push(text.slice(last));
  return nodes;
}

/**
 * A text editor: a textarea with Save/Cancel. Enter saves (Shift+Enter is a new line),
 * Escape cancels. `onSave(text)` may throw to keep the editor open (its message is shown).
 */
export function textEditor({ label, value, onSave, onCancel, rows = 4, id }) {
  const error = h("p", { class: "field-error", role: "alert" });
  const area = h("textarea", { "aria-label": label, rows, id }, "");
  area.value = value ?? "";
  const save = async () => {
    saveButton.disabled = true;
    try {
      await onSave(area.value);
    } catch (err) {
      error.textContent = err.message || String(err);
      saveButton.disabled = false;
      area.focus();
    }
  };
  area.addEventListener("keydown", (event) => {
    if (event.key === "Enter" && !event.shiftKey && !event.isComposing) {
      event.preventDefault();
      save();
    } else if (event.key === "Escape") {
      event.preventDefault();
      event.stopPropagation();
      onCancel();
    }
  });
  const saveButton = h("button", { type: "button", class: "primary", onclick: save }, "Save");
  const box = h(
    "div",
    { class: "editor" },
    area,
    h("p", { class: "hint" }, "Enter saves, Shift+Enter adds a line, Escape cancels."),
    error,
    h(
      "div",
      { class: "actions" },
      saveButton,
      h("button", { type: "button", onclick: () => onCancel() }, "Cancel"),
    ),
  );
  queueMicrotask(() => {
    area.focus();
    area.setSelectionRange(area.value.length, area.value.length);
  });
  return box;
}
