"""The one exception hierarchy of autorecap.

Every error a user can meet is an `AutorecapError` whose message says what went wrong and what to
do about it. The CLI prints that message; the HTTP layer turns it into a JSON error body.
"""

from __future__ import annotations

from dataclasses import dataclass


class AutorecapError(Exception):
    """The root of every error autorecap raises on purpose."""

    #: HTTP status the server answers with when this error reaches it.
    http_status: int = 400


@dataclass(frozen=True)
class LineProblem:
    """One problem found on one line of a chat file."""

    line: int
    """Line number, counting from 1; the header is line 1."""
    message: str
    """What is wrong, in words a user can act on."""
    severity: str = "error"
    """`"error"` when a strict read refuses the file, `"warning"` when it only looks odd."""


class ChatFileError(AutorecapError):
    """A chat file cannot be read or written as asked.

    `path` names the file, and `problems` lists every line-level problem that was found (empty
    for file-level errors such as a missing file).
    """

    def __init__(
        self, message: str, *, path: str | None = None, problems: tuple[LineProblem, ...] = ()
    ) -> None:
        super().__init__(message)
        self.path = path
        self.problems = problems


class MessageDataError(AutorecapError):
    """A message cannot hold extension data (no message, or an `extra` that is not an object)."""


class TokenizerError(AutorecapError):
    """An unknown tokenizer name, or a tokenizer that cannot be loaded."""
