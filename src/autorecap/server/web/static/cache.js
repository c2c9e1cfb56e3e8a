// A chat's messages, fetched on demand in pages (GET /api/chats/{chat}/messages?start&limit).

import { api, chatPath } from "./api.js";

export const PAGE = 100;

export class MessageCache {
  /**
   * @param {string} chat
   * @param {(start: number, end: number, total: number) => void} onLoaded
   *   rows [start, end) arrived; `total` is the chat's length now
   * @param {(error: Error) => void} onError
   */
  constructor(chat, onLoaded, onError) {
    this.chat = chat;
    this.onLoaded = onLoaded;
    this.onError = onError;
    this.messages = new Map();
    this.loading = new Map(); // page -> promise
    this.timer = 0;
    this.want = null;
    this.generation = 0;
  }

  get(index) {
    return this.messages.get(index);
  }

  set(message) {
    this.messages.set(message.index, message);
  }

  /** Make sure rows first..last get loaded (soon: fast scrolling only loads where it stops). */
  ensure(first, last, { now = false } = {}) {
    this.want = [first, last];
    clearTimeout(this.timer);
    if (now) this.loadWanted();
    else this.timer = setTimeout(() => this.loadWanted(), 40);
  }

  loadWanted() {
    if (!this.want) return;
    const [first, last] = this.want;
    for (let page = Math.floor(first / PAGE); page <= Math.floor(last / PAGE); page++) {
      let missing = false;
      for (let i = page * PAGE; i < Math.min((page + 1) * PAGE, last + 1); i++) {
        if (i >= first && !this.messages.has(i)) {
          missing = true;
          break;
        }
      }
      if (missing) this.loadPage(page);
    }
  }

  /** Fetch one page (once at a time per page). Resolves when it has arrived. */
  loadPage(page) {
    if (this.loading.has(page)) return this.loading.get(page);
    const generation = this.generation;
    const start = page * PAGE;
    const promise = api
      .get(chatPath(this.chat, "messages"), { start, limit: PAGE })
      .then((data) => {
        if (generation !== this.generation) return;
        for (const message of data.messages) this.messages.set(message.index, message);
        this.onLoaded(start, start + data.messages.length, data.total);
      })
      .catch((error) => this.onError(error))
      .finally(() => this.loading.delete(page));
    this.loading.set(page, promise);
    return promise;
  }

  /**
   * Fetch again the pages around rows first..last (their recaps or statuses changed) and drop
   * every other page, which will be fetched when it comes into view.
   */
  reload(first, last) {
    this.generation++;
    this.loading.clear();
    const keep = new Set();
    for (let page = Math.floor(first / PAGE); page <= Math.floor(last / PAGE); page++) {
      keep.add(page);
    }
    for (const index of [...this.messages.keys()]) {
      if (!keep.has(Math.floor(index / PAGE))) this.messages.delete(index);
    }
    return Promise.all([...keep].map((page) => this.loadPage(page)));
  }
}
