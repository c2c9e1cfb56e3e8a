// The REST API client (docs/API.md). Every call sends the stored API key, if any; a 401 asks
// for a key once (a dialog), stores it in localStorage and retries.

const KEY_STORAGE = "autorecap.apiKey";

/** An error answer of the API: `{"error": {"message", "code", "field"?}}`. */
export class ApiError extends Error {
  constructor(status, message, field = null) {
    super(message);
    this.name = "ApiError";
    this.status = status;
    this.field = field;
  }
}

export function apiKey() {
  try {
    return localStorage.getItem(KEY_STORAGE) || "";
  } catch {
    return "";
  }
}

export function forgetKey() {
  localStorage.removeItem(KEY_STORAGE);
  document.getElementById("forget-key").hidden = true;
}

export function showKeyState() {
  document.getElementById("forget-key").hidden = !apiKey();
}

let asking = null;

/** Ask for a key (one dialog however many requests failed at once). */
function askForKey(message) {
  if (asking) return asking;
  const dialog = document.getElementById("key-dialog");
  const input = document.getElementById("key-input");
  document.getElementById("key-error").textContent = message || "";
  input.value = "";
  asking = new Promise((resolve) => {
    dialog.addEventListener(
      "close",
      () => {
        const key = input.value.trim();
        asking = null;
        if (key) {
          localStorage.setItem(KEY_STORAGE, key);
          showKeyState();
        }
        resolve(Boolean(key));
      },
      { once: true },
    );
  });
  dialog.showModal();
  input.focus();
  return asking;
}

/** `/api/chats/{chat}`-style paths: each chat id segment URL-encoded. */
export function chatPath(chat, ...rest) {
  return ["/api/chats", encodeURIComponent(chat), ...rest.map(String)].join("/");
}

function url(path, query) {
  const params = new URLSearchParams();
  for (const [key, value] of Object.entries(query || {})) {
    if (value !== null && value !== undefined && value !== "") params.set(key, String(value));
  }
  const qs = params.toString();
  return qs ? `${path}?${qs}` : path;
}

/**
 * request("GET", "/api/chats", {query, json, body, raw}) -> parsed JSON (null for 204), or the
 * Response itself with `raw: true`; `background: true` for polls, which never ask for a key.
 * Throws ApiError.
 */
export async function request(method, path, options = {}) {
  for (;;) {
    const headers = { Accept: "application/json", ...(options.headers || {}) };
    const key = apiKey();
    if (key) headers.Authorization = `Bearer ${key}`;
    let body = options.body;
    if (options.json !== undefined) {
      headers["Content-Type"] = "application/json";
      body = JSON.stringify(options.json);
    }
    let response;
    try {
      response = await fetch(url(path, options.query), { method, headers, body });
    } catch (err) {
      throw new ApiError(0, `The server cannot be reached (${err.message}).`);
    }
    if (response.status === 401 && !options.background) {
      const message = await errorMessage(response);
      if (key) localStorage.removeItem(KEY_STORAGE);
      if (await askForKey(key ? "That key was refused: " + message : message)) continue;
    }
    if (!response.ok) {
      const data = await response.json().catch(() => null);
      const error = data && data.error;
      if (error && typeof error === "object") {
        throw new ApiError(response.status, error.message || response.statusText, error.field);
      }
      const detail = data && data.detail;
      const text = typeof detail === "string" ? detail : response.statusText;
      throw new ApiError(response.status, `${response.status} ${text}`.trim());
    }
    if (options.raw) return response;
    if (response.status === 204) return null;
    const text = await response.text();
    return text ? JSON.parse(text) : null;
  }
}

async function errorMessage(response) {
  const data = await response.json().catch(() => null);
  return (data && data.error && data.error.message) || "This server needs an API key.";
}

export const api = {
  get: (path, query) => request("GET", path, { query }),
  post: (path, json, query) => request("POST", path, { json, query }),
  patch: (path, json, query) => request("PATCH", path, { json, query }),
  put: (path, json, query) => request("PUT", path, { json, query }),
  del: (path, query) => request("DELETE", path, { query }),
};
