"""The proxy's request path, in the order a request meets it: `routes` (where it arrives),
`matching` (which chat it belongs to), `turns` (reconciled with the chat: the seeds' events
fired), `outgoing` and `repeats` (where the memory is put in: in full, or on the request's own
bytes when it repeats the chat's last one), `upstream` and `key_mask` (sent on, the answer
relayed, the upstream key masked), `replies` (where the reply is recorded). `request_json`
reads requests as bytes; `changes` carries a reconciled plan out on the chat's session.

May import `server.chats`, `server.access`, `server.errors` and the services below the server;
never `server.api` or `server.web`.
"""
