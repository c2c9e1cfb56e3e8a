// The chat list: import a SillyTavern chat file by upload, open, export, delete.

import { api, chatPath, request } from "./api.js";
import { confirmDialog, fill, formatCount, formatDate, h, toast } from "./dom.js";

/** Download a chat as SillyTavern JSONL (fetched with the API key, saved from a blob). */
export async function exportChat(chat) {
  try {
    const response = await request("GET", chatPath(chat, "export"), {
      raw: true,
      headers: { Accept: "application/x-ndjson" },
    });
    const blob = await response.blob();
    const link = h("a", { href: URL.createObjectURL(blob), download: `${chat}.jsonl`, hidden: true });
    document.body.append(link);
    link.click();
    link.remove();
    setTimeout(() => URL.revokeObjectURL(link.href), 10_000);
    toast(`Exported ${chat}.jsonl`);
  } catch (error) {
    toast(`Export failed: ${error.message}`, "error");
  }
}

export class ChatListView {
  constructor(main) {
    this.main = main;
  }

  async mount() {
    document.title = "Chats · autorecap";
    this.file = h("input", { type: "file", id: "import-file", accept: ".jsonl,application/x-ndjson,application/json" });
    this.idInput = h("input", { type: "text", id: "import-id", autocomplete: "off", spellcheck: "false" });
    this.replace = h("input", { type: "checkbox", id: "import-replace" });
    this.result = h("div", { class: "import-result", id: "import-result", "aria-live": "polite" });
    this.file.addEventListener("change", () => {
      const file = this.file.files[0];
      if (file && !this.idInput.value) this.idInput.value = file.name.replace(/\.jsonl?$/i, "");
    });
    const form = h(
      "form",
      { class: "import-form", id: "import-form", "aria-labelledby": "import-title" },
      h("h2", { id: "import-title" }, "Import a SillyTavern chat"),
      h(
        "div",
        { class: "form-row" },
        h("div", { class: "field" }, h("label", { for: "import-file" }, "Chat file (.jsonl)"), this.file),
        h(
          "div",
          { class: "field" },
          h("label", { for: "import-id" }, "Chat id"),
          this.idInput,
          h("p", { class: "hint" }, "Defaults to the file name."),
        ),
        h(
          "div",
          { class: "field check" },
          this.replace,
          h("label", { for: "import-replace" }, "Replace a chat with this id"),
        ),
        h("button", { type: "submit", class: "primary", id: "import-submit" }, "Import"),
      ),
      this.result,
    );
    form.addEventListener("submit", (event) => {
      event.preventDefault();
      this.upload();
    });
    this.list = h("div", { class: "chat-table-wrap" });
    fill(
      this.main,
      h(
        "section",
        { class: "page chats-page" },
        h("div", { class: "page-head" }, h("h1", { tabindex: "-1" }, "Chats")),
        form,
        h("h2", { id: "chats-title" }, "Stored chats"),
        this.list,
      ),
    );
    await this.refresh();
  }

  async refresh() {
    let data;
    try {
      data = await api.get("/api/chats");
    } catch (error) {
      fill(this.list, h("p", { class: "field-error" }, error.message));
      return;
    }
    const chats = data.chats || [];
    if (!chats.length) {
      fill(
        this.list,
        h("p", { class: "empty" }, "No chats yet. Import a chat file above, or point a frontend at this server's /v1."),
      );
      return;
    }
    const rows = chats.map((chat) => {
      const href = `#/chat/${encodeURIComponent(chat.id)}`;
      return h(
        "tr",
        { dataset: { chat: chat.id } },
        h("th", { scope: "row" }, h("a", { href, class: "chat-link" }, chat.id)),
        h("td", {}, chat.character ?? ""),
        h("td", {}, chat.user ?? ""),
        h("td", { class: "num" }, formatCount(chat.messages)),
        h(
          "td",
          {},
          chat.enabled === undefined ? "" : h("span", { class: `pill ${chat.enabled ? "on" : "off"}` }, chat.enabled ? "on" : "off"),
        ),
        h("td", { class: "num" }, chat.running_versions ?? ""),
        h("td", {}, formatDate(chat.updated_at)),
        h(
          "td",
          { class: "row-actions" },
          h("button", { type: "button", "aria-label": `Export ${chat.id}`, onclick: () => exportChat(chat.id) }, "Export"),
          h(
            "button",
            { type: "button", class: "danger-text", "aria-label": `Delete ${chat.id}`, onclick: () => this.remove(chat.id) },
            "Delete",
          ),
        ),
      );
    });
    fill(
      this.list,
      h(
        "table",
        { class: "table chats", "aria-labelledby": "chats-title" },
        h(
          "thead",
          {},
          h(
            "tr",
            {},
            ["Chat", "Character", "User", "Messages", "Memory", "Running recap versions", "Updated", "Actions"].map((name) =>
              h("th", { scope: "col" }, name),
            ),
          ),
        ),
        h("tbody", {}, rows),
      ),
    );
  }

  async upload() {
    const file = this.file.files[0];
    if (!file) {
      fill(this.result, h("p", { class: "field-error", role: "alert" }, "Choose a chat file first."));
      this.file.focus();
      return;
    }
    const id = this.idInput.value.trim() || file.name.replace(/\.jsonl?$/i, "");
    fill(this.result, h("p", { class: "muted" }, `Importing ${file.name}…`));
    let data;
    try {
      data = await request("POST", "/api/chats", {
        body: file,
        query: { id, replace: this.replace.checked ? "true" : null },
        headers: { "Content-Type": "application/x-ndjson" },
      });
    } catch (error) {
      // The API's words for a taken id name its query parameters: say it as the form does.
      const said =
        error.status === 409
          ? `A chat “${id}” is stored already: give this one another id, or tick “Replace a chat with this id” to overwrite it.`
          : error.message;
      fill(this.result, h("p", { class: "field-error", role: "alert" }, said));
      return;
    }
    const chat = data.chat || {};
    const problems = data.problems || [];
    fill(
      this.result,
      h(
        "p",
        { class: "success", id: "import-done" },
        `Imported “${chat.id ?? id}”: ${formatCount(chat.messages ?? 0)} messages. `,
        h("a", { href: `#/chat/${encodeURIComponent(chat.id ?? id)}` }, "Open it"),
      ),
      problems.length
        ? h(
            "details",
            { open: true },
            h("summary", {}, `${problems.length} line${problems.length === 1 ? "" : "s"} kept as they were`),
            h("ul", {}, problems.map((p) => h("li", {}, `line ${p.line}: ${p.message}`))),
          )
        : null,
    );
    this.file.value = "";
    this.idInput.value = "";
    this.replace.checked = false;
    await this.refresh();
  }

  async remove(chat) {
    if (!(await confirmDialog(`Delete the chat “${chat}” and all its recaps? This cannot be undone.`))) {
      return;
    }
    try {
      await api.del(chatPath(chat));
      toast(`Deleted ${chat}`);
    } catch (error) {
      toast(error.message, "error");
    }
    await this.refresh();
  }
}
