"""The REST API's errors: the statuses the library's own errors do not carry, and FastAPI's own
errors (a body that fails validation, a route that does not exist) in the one error shape."""

from __future__ import annotations

from http import HTTPStatus
from typing import Any

from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from starlette.exceptions import HTTPException
from starlette.requests import Request

from autorecap.errors import AutorecapError
from autorecap.server.errors import error_response


class ApiError(AutorecapError):
    """A request the API cannot do as asked; `field` names the parameter at fault."""

    def __init__(self, message: str, *, field: str | None = None) -> None:
        super().__init__(message)
        self.field = field


class NotFoundError(ApiError):
    """An unknown chat, message, scene or version (also a chat of another key)."""

    http_status = 404


class ConflictError(ApiError):
    """What the request asks for clashes with the chat's state (an id already taken)."""

    http_status = 409


class TooLargeError(ApiError):
    """An upload over the size limit."""

    http_status = 413


class InvalidValueError(ApiError):
    """A value of the right type that cannot be used (an empty recap text)."""

    http_status = 422


_PLACES = {"query": "query parameter", "path": "path parameter", "header": "header"}


def validation_error_response(error: RequestValidationError) -> JSONResponse:
    """FastAPI's 422 for a request that does not fit the route, in the one error shape: the
    first problem, the parameter it is about, and what to do."""
    problems: list[Any] = list(error.errors())
    if not problems:
        return error_response(422, "the request does not fit this route: see /docs")
    first = problems[0]
    location = [str(part) for part in first.get("loc", ())]
    message = str(first.get("msg", "is not valid"))
    if first.get("type") == "json_invalid":
        return error_response(
            422, f"the request body is not valid JSON ({message}): send a JSON object"
        )
    place = location[0] if location else "body"
    names = location[1:]
    field = names[-1] if names else None
    if place == "body" and not names:
        text = f"the request body: {message}; send a JSON object as /docs describes"
    elif place == "body":
        text = f"body field {'.'.join(names)!r}: {message}; fix it and send the request again"
    else:
        shown = _PLACES.get(place, place)
        text = f"{shown} {'.'.join(names)!r}: {message}; fix it and send the request again"
    more = len(problems) - 1
    if more:
        text += f" ({more} more problem(s) in this request)"
    return error_response(422, text, field)


def http_error_response(request: Request, error: HTTPException) -> JSONResponse:
    """Starlette's own errors (an unknown route, a method a route does not take) in the one
    error shape."""
    default = error.detail == HTTPStatus(error.status_code).phrase
    if error.status_code == 404 and default:
        message = f"no route {request.method} {request.url.path}: /docs lists the API's routes"
    elif error.status_code == 405 and default:
        message = (
            f"{request.method} is not allowed on {request.url.path}: /docs lists the methods "
            "each route takes"
        )
    else:
        message = str(error.detail)
    response = error_response(error.status_code, message)
    for name, value in (error.headers or {}).items():
        response.headers[name] = value
    return response
