"""The options that name an LLM (`recap`, `eval`, `worker`), the warning a remote one gets
when its key is missing, and the line that says what it was asked for."""

from __future__ import annotations

import os
from enum import StrEnum
from typing import Annotated
from urllib.parse import urlsplit

import typer

from autorecap.cli._app import LOOPBACK, err, out
from autorecap.recap.backend import RecapBackend
from autorecap.recap.openai_compat import OpenAICompatBackend


class Backend(StrEnum):
    offline = "offline"
    openai = "openai"


BackendOption = Annotated[
    Backend | None, typer.Option(help="offline (default) or openai (any compatible server).")
]
BaseUrlOption = Annotated[str | None, typer.Option(help="The LLM server's base URL (…/v1).")]
ModelOption = Annotated[str | None, typer.Option(help="Model name to ask for.")]
ApiKeyEnvOption = Annotated[
    str | None, typer.Option(help="Environment variable holding the API key.")
]


def warn_if_no_key(engine: RecapBackend) -> None:
    """A remote LLM server asked without a key answers 401 for every call: say so first."""
    if not isinstance(engine, OpenAICompatBackend) or not engine.client.api_key_env:
        return
    client = engine.client
    host = urlsplit(client.base_url).hostname or ""
    if host in LOOPBACK or os.environ.get(client.api_key_env):
        return
    err.print(
        f"warning: ${client.api_key_env} is not set: {client.base_url} gets no API key "
        "(set it, or name another variable with --api-key-env)",
        soft_wrap=True,
        markup=False,
    )


def print_usage(engine: RecapBackend, chat_tokens: int, whose: str = "the chat's") -> None:
    """One line of what the LLM was asked for (nothing for a backend that made no call):
    calls, prompt tokens (also per token of the chat or chats, `whose`), completion tokens,
    and the calls that got no answer."""
    usage = engine.usage
    if not usage.calls:
        return
    failed = (
        f"; {usage.failed_calls} call(s) got no answer, about "
        f"{usage.failed_prompt_tokens:,} prompt token(s) sent to them"
        if usage.failed_calls
        else ""
    )
    out.print(
        f"LLM: {usage.calls} call(s), {usage.prompt_tokens:,} prompt token(s) "
        f"({usage.prompt_tokens / max(chat_tokens, 1):.2f} per token of {whose} "
        f"{chat_tokens:,}), {usage.completion_tokens:,} completion token(s){failed}",
        soft_wrap=True,
    )
