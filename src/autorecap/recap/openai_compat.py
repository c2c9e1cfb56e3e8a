"""Recaps through any OpenAI-compatible chat-completions server (llama.cpp, vLLM, Ollama,
KoboldCpp, OpenRouter, OpenAI).

The API key is read from a named environment variable at call time and goes only into the
`Authorization` header: it is never logged, never put in an error, and any echo of it in an
upstream error body is masked. 429, 5xx, timeouts and dropped connections are retried with
exponential backoff (honouring `Retry-After`). `<think>` blocks and `reasoning_content` are split
off into the `reasoning` key.
"""

from __future__ import annotations

import json
import logging
import os
import re
import time
from collections.abc import Callable
from typing import Any

import httpx

from autorecap.core.template import render
from autorecap.recap.backend import (
    CombineRequest,
    LLMError,
    RecapBackend,
    RecapRequest,
    RecapResult,
    SceneBreakRequest,
    SceneRecapRequest,
)
from autorecap.settings import Settings

log = logging.getLogger("autorecap.llm")

_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
MAX_BACKOFF_S = 30.0


class OpenAICompatBackend(RecapBackend):
    """A chat-completions client for recaps. See the module docstring."""

    name = "openai"

    def __init__(
        self,
        *,
        base_url: str,
        model: str = "",
        api_key_env: str = "OPENAI_API_KEY",
        temperature: float = 0.3,
        max_tokens: int = 400,
        timeout_s: float = 120.0,
        retries: int = 3,
        headers: dict[str, str] | None = None,
        message_prompt: str | None = None,
        scene_prompt: str | None = None,
        running_prompt: str | None = None,
        break_prompt: str | None = None,
        break_retries: int = 2,
        prefill: str = "",
        client: httpx.Client | None = None,
        sleep: Callable[[float], None] = time.sleep,
        backoff_s: float = 0.5,
    ) -> None:
        if not base_url.startswith(("http://", "https://")):
            raise LLMError(
                f"the LLM base URL {base_url!r} must start with http:// or https:// "
                "(for example http://127.0.0.1:8080/v1)"
            )
        self.base_url = base_url.rstrip("/")
        self.model = model
        self.api_key_env = api_key_env
        self.temperature = temperature
        self.max_tokens = max_tokens
        self.timeout_s = timeout_s
        self.retries = retries
        self.headers = dict(headers or {})
        defaults = Settings()
        self.message_prompt = message_prompt or defaults.message_recap_prompt
        self.scene_prompt = scene_prompt or defaults.scene_recap_prompt
        self.running_prompt = running_prompt or defaults.running_recap_prompt
        self.break_prompt = break_prompt or defaults.scene_break_prompt
        self.break_retries = break_retries
        self.prefill = prefill
        self._client = client or httpx.Client(timeout=timeout_s)
        self._owns_client = client is None
        self._sleep = sleep
        self._backoff_s = backoff_s
        self.calls = 0

    # --- recaps ------------------------------------------------------------------------------

    def message_recap(self, request: RecapRequest) -> RecapResult:
        context = "\n".join(f"{m.name}: {m.text}" for m in request.context) or "(none)"
        prompt = render(
            self.message_prompt,
            {
                "message": request.text,
                "name": request.name,
                "context": context,
                "user": request.user,
                "char": request.char,
            },
        )
        text, reasoning = self.chat(
            [{"role": "user", "content": prompt}],
            prefill=self.prefill,
            max_tokens=min(self.max_tokens, max(request.max_tokens * 4, 64)),
        )
        memory = text.strip()
        if not memory:
            raise LLMError("the LLM answered with an empty recap")
        return RecapResult(memory=memory, reasoning=reasoning, prefill=self.prefill or None)

    def scene_recap(self, request: SceneRecapRequest) -> RecapResult:
        lines = "\n".join(f"{m.name}: {m.text}" for m in request.messages)
        prompt = render(
            self.scene_prompt,
            {
                "messages": lines,
                "name": request.name or "the scene",
                "user": request.user,
                "char": request.char,
                "max_tokens": str(request.max_tokens),
            },
        )
        text, reasoning = self.chat(
            [{"role": "user", "content": prompt}], max_tokens=max(64, request.max_tokens * 2)
        )
        if not text.strip():
            raise LLMError("the LLM answered with an empty scene recap")
        return RecapResult(memory=text.strip(), reasoning=reasoning)

    def combine(self, request: CombineRequest) -> RecapResult:
        prompt = render(
            self.running_prompt,
            {
                "previous": request.previous or "(nothing yet: this is the first scene)",
                "scene": request.scene_recap,
                "name": request.scene_name,
                "max_tokens": str(request.max_tokens),
            },
        )
        text, reasoning = self.chat(
            [{"role": "user", "content": prompt}], max_tokens=max(128, request.max_tokens + 200)
        )
        if not text.strip():
            raise LLMError("the LLM answered with an empty running recap")
        return RecapResult(memory=text.strip(), reasoning=reasoning)

    def find_scene_break(self, request: SceneBreakRequest) -> int | None:
        """Ask for the end of a scene; an answer outside the allowed range, or not JSON, is
        asked again (`break_retries` times) and then treated as no break."""
        lines = "\n".join(f"[{m.index}] {m.name}: {m.text}" for m in request.messages)
        prompt = render(
            self.break_prompt,
            {"messages": lines, "earliest": str(request.earliest), "latest": str(request.latest)},
        )
        for attempt in range(self.break_retries + 1):
            text, _ = self.chat([{"role": "user", "content": prompt}], max_tokens=200)
            try:
                answer = extract_json(text)
            except LLMError:
                log.info("scene-break answer %d was not JSON; asking again", attempt + 1)
                continue
            value = answer.get("scene_break_at") if isinstance(answer, dict) else None
            if value is None or value is False:
                return None
            if isinstance(value, int | float | str) and str(value).strip().lstrip("-").isdigit():
                index = int(value)
                if request.earliest <= index <= request.latest:
                    return index
            log.info("scene-break answer %r is out of range; asking again", value)
        return None

    # --- the protocol ------------------------------------------------------------------------

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
        if self.model:
            payload["model"] = self.model
        data = self._post("/chat/completions", payload)
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

    def _post(self, path: str, payload: dict[str, Any]) -> dict[str, Any]:
        url = f"{self.base_url}{path}"
        headers = {"Content-Type": "application/json", **self.headers}
        key = os.environ.get(self.api_key_env, "") if self.api_key_env else ""
        if key:
            headers["Authorization"] = f"Bearer {key}"
        attempt = 0
        while True:
            attempt += 1
            self.calls += 1
            try:
                response = self._client.post(
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
                    try:
                        parsed = response.json()
                    except ValueError:
                        raise LLMError(
                            f"the LLM server at {self.base_url} answered with something that is "
                            "not JSON"
                        ) from None
                    if not isinstance(parsed, dict):
                        raise LLMError("the LLM server's answer is not a JSON object")
                    return parsed
                error = self._status_error(response, key)
                retry_after = _retry_after(response)
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
            hint = f": check the API key in ${self.api_key_env}"
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
        if self._owns_client:
            self._client.close()


def split_reasoning(text: str) -> tuple[str, list[str]]:
    """Take `<think>...</think>` blocks (and an unclosed leading one) out of a model's answer."""
    thoughts = [m.group(1) for m in _THINK.finditer(text)]
    text = _THINK.sub("", text)
    lowered = text.lower()
    if "<think>" in lowered and "</think>" not in lowered:
        start = lowered.index("<think>")
        thoughts.append(text[start + len("<think>") :])
        text = text[:start]
    elif "</think>" in lowered:  # the opening tag was in the prefill or cut off
        end = lowered.index("</think>")
        thoughts.append(text[:end])
        text = text[end + len("</think>") :]
    return text.strip(), thoughts


def extract_json(text: str) -> Any:
    """The first JSON value in an LLM's answer: inside a code fence or not, after a preamble,
    before trailing text. Raises `LLMError` when there is none."""
    candidates = [m.group(1) for m in _FENCE.finditer(text)] + [text]
    decoder = json.JSONDecoder()
    for candidate in candidates:
        for index, char in enumerate(candidate):
            if char not in "{[":
                continue
            try:
                value, _ = decoder.raw_decode(candidate, index)
            except ValueError:
                continue
            return value
    raise LLMError("the LLM's answer holds no JSON object; retry, or use a stronger model")


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
