"""`autorecap serve`: the OpenAI-compatible memory proxy, its REST API and its web UI.

- `proxy/`: the request path. A request is matched to its chat (`matching`), reconciled and given
  its memory (`turns`, `outgoing`, the fast path in `repeats`), sent upstream and relayed
  (`upstream`, `key_mask`), and its reply recorded (`replies`); `routes` ties them together.
- `api/`: the REST API under `/api`. `web/`: the web UI (static files, no build).
- `chats/`: the open chats the three share with the recap worker: loading, locks, saving, what
  other processes save, memory refreshes, the collector's schedule.
- `app` assembles them; `access` (API keys) and `errors` (the one error shape) serve all.

Imports flow one way: `app` -> `proxy`, `api`, `web` -> `chats` -> the services (`session`, `jobs`,
`recap`, `store`, `profiles`, `settings`) -> `core`. `proxy` and `api` never import each other.
"""
