"""The web UI's routes: `GET /` is the page, `GET /ui/...` its static files.

The files live in `autorecap/server/web/static/` and ship in the wheel. They are served with
`Cache-Control: no-cache` and an ETag: a browser revalidates every file (a 304 costs one
round trip on loopback) so that an upgraded autorecap never runs a stale mix of modules. The
UI speaks only to the REST API under `/api`; these routes need no API key (the page asks for
one when the API answers 401).
"""

from __future__ import annotations

import hashlib
from pathlib import Path

from fastapi import APIRouter, Request
from fastapi.responses import Response

WEB_DIR = Path(__file__).with_name("static")

_TYPES = {
    ".html": "text/html; charset=utf-8",
    ".js": "text/javascript; charset=utf-8",
    ".css": "text/css; charset=utf-8",
    ".svg": "image/svg+xml",
    ".json": "application/json",
    ".png": "image/png",
    ".ico": "image/x-icon",
}
_SECURITY = {
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
}
# Everything is served by autorecap itself: no CDN, no inline script.
_PAGE_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
    "connect-src 'self'; object-src 'none'; base-uri 'none'; frame-ancestors 'none'"
)


def web_router() -> APIRouter:
    """The routes of the web UI (mounted by `create_app`)."""
    router = APIRouter(include_in_schema=False)

    @router.api_route("/", methods=["GET", "HEAD"])
    def index(request: Request) -> Response:
        return _file(request, WEB_DIR / "index.html", {"Content-Security-Policy": _PAGE_POLICY})

    @router.api_route("/ui/{path:path}", methods=["GET", "HEAD"])
    def asset(path: str, request: Request) -> Response:
        target = (WEB_DIR / path).resolve()
        if not target.is_relative_to(WEB_DIR.resolve()) or not target.is_file():
            return Response("not found", status_code=404, media_type="text/plain")
        return _file(request, target)

    return router


def _file(request: Request, path: Path, extra: dict[str, str] | None = None) -> Response:
    media = _TYPES.get(path.suffix)
    if media is None:
        return Response("not found", status_code=404, media_type="text/plain")
    body = path.read_bytes()
    etag = '"' + hashlib.sha256(body).hexdigest()[:20] + '"'
    headers = {"ETag": etag, "Cache-Control": "no-cache", **_SECURITY, **(extra or {})}
    if etag in request.headers.get("if-none-match", ""):
        return Response(status_code=304, headers=headers)
    return Response(body, media_type=media, headers=headers)
