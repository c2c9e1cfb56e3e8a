"""The server's open chats, shared by the proxy's requests, the REST API and the recap worker:
one in-memory copy and one lock per chat (`registry`), what of each is not saved yet
(`pending_saves`), what other processes save read back in (`other_processes`), the memory kept
fresh on the worker's time (`refresh`), the requests in flight the worker yields to
(`activity`), and the garbage collector's schedule around them (`collector`).

May import `server.access` and the services below the server (session, jobs, recap, store,
profiles, settings, core); never `server.proxy`, `server.api` or `server.web`.
"""
