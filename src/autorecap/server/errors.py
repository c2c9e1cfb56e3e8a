"""The one error shape of the proxy and the REST API."""

from __future__ import annotations

import json
from typing import Any

from fastapi.responses import JSONResponse


class SafeJSONResponse(JSONResponse):
    """JSON that any chat can be sent as: a lone surrogate (a cut emoji, which SillyTavern's
    files can hold and the store keeps) is written as a `\\ud83d` escape instead of failing
    the response, as JavaScript's JSON.stringify does."""

    def render(self, content: Any) -> bytes:
        text = json.dumps(content, ensure_ascii=False, allow_nan=False, separators=(",", ":"))
        try:
            return text.encode("utf-8")
        except UnicodeEncodeError:
            return json.dumps(content, allow_nan=False, separators=(",", ":")).encode("ascii")


def error_response(status: int, message: str, field: str | None = None) -> JSONResponse:
    """OpenAI's `{"error": {"message", "type", "code"}}`, plus `field` naming the setting or
    parameter at fault when there is one. `message` says what went wrong and what to do."""
    error: dict[str, Any] = {"message": message, "type": "autorecap_error", "code": status}
    if field is not None:
        error["field"] = field
    return SafeJSONResponse({"error": error}, status_code=status)
