// One row of the message list: the message, its recap coloured by inclusion status, and the
// scene break it closes, with their actions.

import { formatDate, h, richText, textEditor } from "./dom.js";

export const STATUS_LABELS = {
  included: "In memory",
  excluded: "Excluded (past the token limit)",
  error: "Recap failed",
  none: "No recap",
};

/** A placeholder while the row's page is on its way. */
export function placeholderRow(index) {
  return h(
    "article",
    { class: "msg-row msg-placeholder", "aria-busy": "true", tabindex: "-1" },
    h("p", { class: "muted" }, `Loading message ${index}…`),
  );
}

/**
 * @param {object} message  a Message of the API
 * @param {object} view     the chat view: `editing`, `total` and the action methods
 */
export function messageRow(message, view) {
  const i = message.index;
  const headId = `msg-${i}-head`;
  const badges = [];
  if (message.is_user) badges.push(h("span", { class: "badge badge-user" }, "user"));
  if (message.is_system && !message.hidden) badges.push(h("span", { class: "badge" }, "system"));
  if (message.hidden && !message.auto_hidden) {
    badges.push(h("span", { class: "badge badge-hidden", title: "Hidden in SillyTavern" }, "hidden"));
  }
  if (message.auto_hidden) {
    badges.push(
      h(
        "span",
        { class: "badge badge-hidden", title: "Hidden by auto-hide: left out of the prompt" },
        "auto-hidden",
      ),
    );
  }
  if (message.swipes > 1) {
    badges.push(h("span", { class: "badge" }, `swipe ${message.swipe_id + 1}/${message.swipes}`));
  }
  const row = h(
    "article",
    {
      class: `msg-row${message.hidden || message.auto_hidden ? " is-hidden" : ""}`,
      "aria-labelledby": headId,
      "aria-posinset": i + 1,
      "aria-setsize": view.total,
      tabindex: view.active === i ? "0" : "-1",
      dataset: { loaded: "1", status: message.status },
    },
    h(
      "header",
      { class: "msg-head" },
      h(
        "h3",
        { id: headId, class: "msg-title" },
        h("span", { class: "msg-index" }, `#${i}`),
        " ",
        h("span", { class: "msg-name" }, message.name || "(no name)"),
      ),
      badges,
      h("time", { class: "msg-date", datetime: message.send_date || "" }, formatDate(message.send_date)),
    ),
    h("div", { class: "msg-text" }, richText(message.text || "")),
    recapBlock(message, view),
    message.scene_break ? sceneBlock(message, view) : null,
  );
  return row;
}

function recapBlock(message, view) {
  const i = message.index;
  const status = message.status || "none";
  const editing = view.editing && view.editing.index === i && view.editing.kind === "recap";
  // Excluded by the user, or left out because it did not fit the short-term budget.
  const said = status === "excluded" && message.exclude ? "Excluded by you" : STATUS_LABELS[status] || status;
  const label = h("span", { class: "status-label" }, said);
  const body = editing
    ? textEditor({
        label: `Recap of message ${i}`,
        value: message.recap || "",
        onSave: (text) => view.saveRecap(i, text, message.recap ?? ""),
        onCancel: () => view.stopEditing(),
      })
    : h(
        "p",
        { class: "recap-text" },
        message.recap ?? (status === "error" ? "" : "No recap yet."),
        message.error ? h("span", { class: "recap-error" }, ` ${message.error}`) : null,
      );
  return h(
    "section",
    { class: `recap status-${status}`, "aria-label": `Recap of message ${i}: ${said}` },
    h(
      "div",
      { class: "recap-head" },
      label,
      message.edited ? h("span", { class: "badge" }, "edited") : null,
      message.exclude ? h("span", { class: "badge" }, "excluded by you") : null,
      message.remember ? h("span", { class: "badge badge-on" }, "pinned") : null,
      editing
        ? null
        : h(
            "div",
            { class: "row-actions" },
            h(
              "button",
              { type: "button", "aria-label": `Edit recap of message ${i}`, onclick: () => view.startEditing(i, "recap") },
              "Edit",
            ),
            h(
              "button",
              { type: "button", "aria-label": `Regenerate recap of message ${i}`, onclick: () => view.regenerate(i) },
              "Regenerate",
            ),
            h(
              "button",
              {
                type: "button",
                "aria-pressed": message.exclude ? "true" : "false",
                "aria-label": `Exclude message ${i} from memory`,
                onclick: () => view.toggleFlag(i, "exclude"),
              },
              "Exclude",
            ),
            h(
              "button",
              {
                type: "button",
                "aria-pressed": message.remember ? "true" : "false",
                "aria-label": `Remember message ${i} in long-term memory`,
                title: "Pinned recaps are injected on every turn when the long-term tier is on",
                onclick: () => view.toggleFlag(i, "remember"),
              },
              "Remember",
            ),
            message.scene_break
              ? null
              : h(
                  "button",
                  { type: "button", "aria-label": `Mark a scene break after message ${i}`, onclick: () => view.markBreak(i) },
                  "Mark break",
                ),
          ),
    ),
    body,
  );
}

// Why a break is where it is (`scene_break.cause`), as the scene's head says it.
const BREAK_CAUSES = {
  cues: "found by the scene cues",
  llm: "found by the LLM",
  length: "closed at the length limit",
  user: "marked by hand",
};

function sceneBlock(message, view) {
  const i = message.index;
  const scene = message.scene_break;
  const editing = view.editing && view.editing.index === i ? view.editing.kind : null;
  const name = scene.name || "(unnamed scene)";
  let title;
  if (editing === "scene-name") {
    const input = h("input", { type: "text", "aria-label": `Name of the scene ending at message ${i}` });
    input.value = scene.name || "";
    const save = () =>
      view.renameBreak(i, input.value).catch((error) => {
        input.setAttribute("aria-invalid", "true");
        input.title = error.message;
      });
    input.addEventListener("keydown", (event) => {
      if (event.key === "Enter") {
        event.preventDefault();
        save();
      } else if (event.key === "Escape") {
        event.preventDefault();
        event.stopPropagation();
        view.stopEditing();
      }
    });
    queueMicrotask(() => input.select());
    title = h(
      "div",
      { class: "rename" },
      input,
      h("button", { type: "button", class: "primary", onclick: save }, "Save"),
      h("button", { type: "button", onclick: () => view.stopEditing() }, "Cancel"),
    );
  } else {
    title = h(
      "h4",
      { class: "scene-name" },
      h("span", { class: "muted" }, scene.visible === false ? "Hidden scene break · " : "Scene break · "),
      name,
    );
  }
  const cause = BREAK_CAUSES[scene.cause];
  const versions = [];
  for (let k = 0; k < scene.versions; k++) {
    versions.push(h("option", { value: k, selected: k === scene.selected }, `version ${k + 1} of ${scene.versions}`));
  }
  const select =
    scene.versions > 1
      ? h(
          "select",
          {
            "aria-label": `Scene recap version for the scene ending at message ${i}`,
            onchange: (event) => view.selectSceneVersion(i, Number(event.target.value)),
          },
          versions,
        )
      : scene.versions === 1
        ? h("span", { class: "muted" }, "1 version")
        : null;
  const recap =
    editing === "scene-recap"
      ? textEditor({
          label: `Recap of the scene ending at message ${i}`,
          value: scene.recap || "",
          onSave: (text) => view.saveSceneRecap(i, text),
          onCancel: () => view.stopEditing(),
          rows: 6,
        })
      : h("p", { class: "scene-recap" }, scene.recap || "No scene recap yet.");
  return h(
    "section",
    { class: `scene-break${scene.visible === false ? " is-hidden" : ""}`, "aria-label": `Scene break: ${name}` },
    h(
      "div",
      { class: "scene-head" },
      title,
      cause ? h("span", { class: "muted scene-cause", title: "Why the scene ends here" }, cause) : null,
      select,
    ),
    recap,
    editing
      ? null
      : h(
          "div",
          { class: "row-actions" },
          h(
            "button",
            { type: "button", "aria-label": `Rename the scene ending at message ${i}`, onclick: () => view.startEditing(i, "scene-name") },
            "Rename",
          ),
          h(
            "button",
            { type: "button", "aria-label": `Edit the recap of the scene ending at message ${i}`, onclick: () => view.startEditing(i, "scene-recap") },
            "Edit recap",
          ),
          h(
            "button",
            { type: "button", "aria-label": `Regenerate the recap of the scene ending at message ${i}`, onclick: () => view.regenerateScene(i) },
            "Regenerate",
          ),
          h(
            "button",
            {
              type: "button",
              "aria-pressed": scene.visible === false ? "true" : "false",
              "aria-label": `Hide the scene break after message ${i}`,
              title: "A hidden break does not count for auto-hide",
              onclick: () => view.setBreakVisible(i, scene.visible === false),
            },
            "Hide break",
          ),
          h(
            "button",
            { type: "button", class: "danger-text", "aria-label": `Remove the scene break after message ${i}`, onclick: () => view.unmarkBreak(i) },
            "Remove break",
          ),
        ),
  );
}
