"""One OpenAI-compatible chat-completions endpoint, through httpx: a call, its retries and its
cost.

The API key is read from a named environment variable at call time (or from what gives it, for
the proxy's client's key) and goes only into the `Authorization` header: it is never logged,
never put in an error, and any echo of it in an upstream answer or error body is masked. 429,
5xx, timeouts and dropped connections are retried with exponential backoff (honouring
`Retry-After`). `<think>` blocks and `reasoning_content` are split off as the reasoning. Every
call is counted in `usage`, by the server's own count when it gives one.

May import: core, recap (answers, backend) and httpx.
"""

from __future__ import annotations

import json
import logging
import os
import time
from collections.abc import Callable
from typing import Any

import httpx

from autorecap.core.tokens import TokenCounter, get_counter
from autorecap.recap.answers import split_reasoning
from autorecap.recap.backend import LLMError, Usage

log = logging.getLogger("autorecap.llm")

MAX_BACKOFF_S = 30.0


class ChatClient:
    """Chat completions from one server. See the module docstring."""

    def __init__(
        self,
        *,
        base_url: str,
        model: str | Callable[[], str] = "",
        api_key_env: str = "OPENAI_API_KEY",
        key: Callable[[], str] | None = None,
        temperature: float = 0.3,
        max_tokens: int = 400,
        timeout_s: float = 120.0,
        retries: int = 3,
        headers: dict[str, str] | None = None,
        http: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
        backoff_s: float = 0.5,
        counter: TokenCounter | None = None,
        usage: Usage | None = None,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise LLMError(
                f"the LLM base URL {base_url!r} must start with http:// or https:// "
                "(for example http://127.0.0.1:8080/v1)"
            )
        self.base_url = base_url.rstrip("/")
        self.model = model
        """The model, or what gives it at each call (the proxy's: the one its clients name)."""
        self.api_key_env = api_key_env
        self.key = key
        """What gives the key at each call when no variable names one (the proxy's: the one
        its client sent the upstream), never kept."""
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.retries = retries
        self.headers = dict(headers or {})
        self.counter = counter or get_counter()
        self.usage = usage if usage is not None else Usage()
        self._http = http or httpx.Client(timeout=timeout_s)
        self._owns_http = http is None
        """An httpx client passed in is the caller's to close; one made here is closed here."""
        self._sleep = sleep
        self._backoff_s = backoff_s

    def chat(
        self,
        messages: list[dict[str, str]],
        *,
        prefill: str = "",
        max_tokens: int | None = None,
    ) -> tuple[str, str | None]:
        """One chat completion: returns (answer text, reasoning or None). A prefill is sent as a
        trailing assistant message; the answer is what the model wrote after it."""
        payload: dict[str, Any] = {
            "messages": [
                *messages,
                *([{"role": "assistant", "content": prefill}] if prefill else []),
            ],
            "temperature": self.temperature,
            "max_tokens": max_tokens or self.max_tokens,
            "stream": False,
        }
        model = self.model() if callable(self.model) else self.model
        if model:
            payload["model"] = model
        data = self._post("/chat/completions", payload)
        self._count(data, payload["messages"])
        try:
            message = data["choices"][0]["message"]
        except (KeyError, IndexError, TypeError):
            raise LLMError(
                "the LLM server's answer has no choices[0].message: is the base URL an "
                "OpenAI-compatible /v1 endpoint?"
            ) from None
        content = message.get("content") or ""
        if not isinstance(content, str):
            content = json.dumps(content, ensure_ascii=False)
        reasoning_parts = [
            str(message[key]) for key in ("reasoning_content", "reasoning") if message.get(key)
        ]
        content, thoughts = split_reasoning(content)
        reasoning_parts.extend(thoughts)
        if prefill and content.startswith(prefill):
            content = content[len(prefill) :]  # some servers echo the prefill back
        reasoning = "\n\n".join(part.strip() for part in reasoning_parts if part.strip()) or None
        return content, reasoning

    def _count(self, data: dict[str, Any], messages: list[dict[str, str]]) -> None:
        """Add a call's tokens to `usage`: the server's own count when it gives one, else ours
        (a server may leave `usage` out)."""
        usage = data.get("usage") if isinstance(data.get("usage"), dict) else None
        prompt = usage.get("prompt_tokens") if usage else None
        completion = usage.get("completion_tokens") if usage else None
        if not isinstance(prompt, int):
            prompt = self._sent_tokens(messages)
        if not isinstance(completion, int):
            choices = data.get("choices")
            answer = ""
            if isinstance(choices, list) and choices and isinstance(choices[0], dict):
                answer = str((choices[0].get("message") or {}).get("content") or "")
            completion = self.counter.count(answer)
        self.usage.prompt_tokens += prompt
        self.usage.completion_tokens += completion

    def _post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.base_url}{path}"
        headers = {"Content-Type": "application/json", **self.headers}
        if self.api_key_env:
            key = os.environ.get(self.api_key_env, "")
        else:
            key = self.key() if self.key is not None else ""
        if key:
            headers["Authorization"] = f"Bearer {key}"
        attempt = 0
        while True:
            attempt += 1
            self.usage.calls += 1
            try:
                response = self._http.post(
                    url, json=payload, headers=headers, timeout=self.timeout_s
                )
            except httpx.TimeoutException:
                error = LLMError(
                    f"the LLM server at {self.base_url} did not answer within {self.timeout_s:g} s",
                    retryable=True,
                )
                retry_after = None
            except httpx.TransportError as failure:
                error = LLMError(
                    f"cannot reach the LLM server at {self.base_url} ({type(failure).__name__}): "
                    "is it running, and is the base URL right?",
                    retryable=True,
                )
                retry_after = None
            else:
                if response.status_code < 400:
                    return self._parsed(response, key, payload)
                error = self._status_error(response, key)
                retry_after = _retry_after(response)
            self._failed(payload)
            if not error.retryable or attempt > self.retries:
                if error.retryable and self.retries:
                    raise LLMError(
                        f"{error} (gave up after {attempt} attempts)",
                        status=error.status,
                        retryable=True,
                    )
                raise error
            backoff = self._backoff_s * 2 ** (attempt - 1)
            delay = min(MAX_BACKOFF_S, retry_after if retry_after is not None else backoff)
            log.warning("LLM call failed (%s); retrying in %.1f s", error, delay)
            self._sleep(delay)

    def _parsed(
        self, response: httpx.Response, key: str, payload: dict[str, Any]
    ) -> dict[str, Any]:
        """A successful answer's JSON object, the key masked wherever the model repeated it
        (so that no recap stores it)."""
        text = response.text
        if key and key in text:
            text = text.replace(key, "***")
        try:
            parsed = json.loads(text)
        except ValueError:
            self._failed(payload)
            kind = response.headers.get("content-type", "no content type")
            raise LLMError(
                f"the LLM server at {self.base_url} answered with something that is not JSON "
                f"({kind}): is the base URL the API's (it usually ends in /v1)?"
            ) from None
        if not isinstance(parsed, dict):
            self._failed(payload)
            raise LLMError("the LLM server's answer is not a JSON object")
        return parsed

    def _failed(self, payload: dict[str, Any]) -> None:
        """Count a call that got no answer, and what it sent."""
        self.usage.failed_calls += 1
        self.usage.failed_prompt_tokens += self._sent_tokens(payload.get("messages") or [])

    def _sent_tokens(self, messages: list[dict[str, str]]) -> int:
        """What messages sent cost, by our count (each message's few tokens of framing too)."""
        return sum(self.counter.count(str(m.get("content", ""))) + 4 for m in messages)

    def _status_error(self, response: httpx.Response, key: str) -> LLMError:
        status = response.status_code
        # A refused key's answer may quote (part of) the key: say nothing of its body.
        detail = "" if response.status_code in (401, 403) else _error_detail(response)
        if key:
            detail = detail.replace(key, "***")  # mask first, cut after: no key in part either
        detail = detail[:300]
        retryable = status == 429 or status >= 500
        hint = ""
        if status in (401, 403):
            hint = (
                f": check the API key in ${self.api_key_env}"
                if self.api_key_env
                else ": check the API key the client sent"  # the proxy's client's own key
            )
        elif status == 404:
            hint = ": check the base URL (it usually ends in /v1) and the model name"
        elif status == 429:
            hint = ": rate limited"
        return LLMError(
            f"the LLM server answered {status}{hint}" + (f" ({detail})" if detail else ""),
            status=status,
            retryable=retryable,
        )

    def close(self) -> None:
        if self._owns_http:
            self._http.close()


def _retry_after(response: httpx.Response) -> float | None:
    value = response.headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        return None


def _error_detail(response: httpx.Response) -> str:
    try:
        body = response.json()
    except ValueError:
        return response.text.strip()
    if isinstance(body, dict):
        error = body.get("error")
        if isinstance(error, dict) and error.get("message"):
            return str(error["message"])
        if isinstance(error, str):
            return error
        if body.get("message"):
            return str(body["message"])
    return json.dumps(body)
