"""The one error shape of the proxy and the REST API."""

from __future__ import annotations

from typing import Any

from fastapi.responses import JSONResponse


def error_response(status: int, message: str, field: str | None = None) -> JSONResponse:
    """OpenAI's `{"error": {"message", "type", "code"}}`, plus `field` naming the setting or
    parameter at fault when there is one. `message` says what went wrong and what to do."""
    error: dict[str, Any] = {"message": message, "type": "autorecap_error", "code": status}
    if field is not None:
        error["field"] = field
    return JSONResponse({"error": error}, status_code=status)
