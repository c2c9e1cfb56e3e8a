"""Recaps through any OpenAI-compatible chat-completions server (llama.cpp, vLLM, Ollama,
KoboldCpp, OpenRouter, OpenAI): the prompts of each tier, and the checks of what comes back.
The calls themselves (the key, retries, the cost) are `chat_client.ChatClient`'s.

May import: core, errors, recap (answers, backend, chat_client, offline), settings.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Sequence
from typing import Any

from autorecap.core.out_of_character import recapped_text
from autorecap.core.template import render
from autorecap.errors import AutorecapError
from autorecap.recap.answers import (
    BadAnswerError,
    check_recap,
    extract_json,
    new_scene,
    numbered_lines,
    prompt_labels,
    repeated_lines,
)
from autorecap.recap.backend import (
    CombineRequest,
    LLMError,
    MergeRequest,
    RecapBackend,
    RecapRequest,
    RecapResult,
    SceneBreakRequest,
    SceneMessage,
    SceneRecapRequest,
)
from autorecap.recap.chat_client import ChatClient
from autorecap.recap.offline.engine import OfflineBackend
from autorecap.recap.offline.when import day_text
from autorecap.settings import Settings

log = logging.getLogger("autorecap.llm")

KEPT_SHARE = 0.5
"""The share of a condensed running recap that its newest lines may keep word for word."""

TRIM_SHARE = 1.25
"""A scene whose message recaps together run at most this far over the scene cap is trimmed
by the offline selection (its least telling sentences dropped) instead of a call: a call
would read every recap to write back a little less (on a generated 1,000-message chat, one
scene in six, and 0.06 prompt tokens per chat token)."""


class OpenAICompatBackend(RecapBackend):
    """Recaps asked of an OpenAI-compatible server (`client`). See the module docstring."""

    condense_to = 0.5
    """Condensed to half the cap: the next scenes are appended with no call until it is full
    again (on a 1,000-message chat this takes the running recap from about 0.6 to 0.4 prompt
    tokens per chat token; `combine` sending only the oldest lines takes it to about 0.3)."""

    name = "openai"

    def __init__(
        self,
        *,
        message_prompt: str | None = None,
        batch_prompt: str | None = None,
        scene_prompt: str | None = None,
        running_prompt: str | None = None,
        break_prompt: str | None = None,
        combined_prompt: str | None = None,
        break_retries: int = 2,
        answer_retries: int = 2,
        batch_tokens: int = 3000,
        own_recap_tokens: int = 24,
        prefill: str = "",
        **server: Any,
    ) -> None:
        """`server`: what `ChatClient` takes (`base_url`, `model`, `api_key_env` or `key`,
        `temperature`, `max_tokens`, `timeout_s`, `retries`, `headers`, `http`, ...); the
        rest are the prompts and how answers are asked for."""
        self.client = ChatClient(**server, usage=self.usage)
        """The server the recaps are asked of; what its calls cost is this backend's `usage`."""
        self.max_tokens = self.client.max_tokens
        defaults = Settings()
        self.message_prompt = message_prompt or defaults.message_recap_prompt
        self.batch_prompt = batch_prompt or defaults.message_batch_prompt
        self.scene_prompt = scene_prompt or defaults.scene_recap_prompt
        self.running_prompt = running_prompt or defaults.running_recap_prompt
        self.break_prompt = break_prompt or defaults.scene_break_prompt
        self.combined_prompt = combined_prompt or defaults.combined_recap_prompt
        self.break_retries = break_retries
        self.answer_retries = answer_retries
        self.batch_tokens = batch_tokens
        self.own_recap_tokens = own_recap_tokens
        """A message of at most this many tokens is its own recap, with no call (0: every one
        is asked): an LLM's recap of "Sam: 6 til 2" is no shorter, and a chat of short
        messages cost more than twice its tokens to recap (2.0-3.2 prompt tokens per chat
        token on the texting and dialogue chats of the eval, 1.4-1.8 with 24)."""
        self.prefill = prefill
        self.counter = self.client.counter

    @property
    def calls(self) -> int:
        """HTTP requests sent so far (retries included)."""
        return self.usage.calls

    # --- recaps ------------------------------------------------------------------------------

    def message_recap(self, request: RecapRequest) -> RecapResult:
        own = self._own_recap(request)
        if own is not None:
            return own
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
        labels = prompt_labels(self.message_prompt)

        def ask() -> RecapResult:
            text, reasoning = self.client.chat(
                [{"role": "user", "content": prompt}],
                prefill=self.prefill,
                max_tokens=min(self.max_tokens, max(request.max_tokens * 4, 64)),
            )
            memory = check_recap(
                text, labels=labels, sources=[request.text], prompt=self.message_prompt
            )
            return RecapResult(memory=memory, reasoning=reasoning, prefill=self.prefill or None)

        return self._retrying(ask)

    def _own_recap(self, request: RecapRequest) -> RecapResult | None:
        """A message of at most `own_recap_tokens` is its own recap, with no call."""
        if self.counter.count(request.text) > self.own_recap_tokens:
            return None
        text = " ".join(recapped_text(request.text).split())
        return RecapResult(memory=f"{request.name}: {text}" if request.name else text)

    def message_recaps(
        self, requests: Sequence[RecapRequest]
    ) -> list[RecapResult | AutorecapError]:
        """Consecutive messages recapped in one call (`message_batch_prompt`): one numbered
        line each, except the short ones, which are their own recaps. Lines missing or
        refused are asked again, `answer_retries` times; what a batch still lacks is then
        asked one message per call (a model too weak for numbered lines may still write one
        recap), and what fails there is kept as an error."""
        own = [self._own_recap(request) for request in requests]
        asked = [request for request, mine in zip(requests, own, strict=True) if mine is None]
        answers = iter(self._recap_batch(asked))
        return [o if o is not None else next(answers) for o in own]

    def _recap_batch(self, requests: Sequence[RecapRequest]) -> list[RecapResult | AutorecapError]:
        """`message_recaps` for the messages that are asked."""
        if not requests:
            return []
        if len(requests) <= 1:
            return super().message_recaps(requests)
        results: dict[int, RecapResult | AutorecapError] = {}
        labels = prompt_labels(self.batch_prompt)
        todo = list(range(len(requests)))
        for attempt in range(1 + self.answer_retries):
            if len(todo) == 1:
                results[todo[0]] = super().message_recaps([requests[todo[0]]])[0]
                return [results[i] for i in range(len(requests))]
            asked = [requests[i] for i in todo]
            lines = "\n".join(
                f"[{n}] {r.name}: {' '.join(r.text.split())}" for n, r in enumerate(asked, 1)
            )
            earlier = " ".join(asked[0].earlier_recaps[-2:]) or "(the chat begins here)"
            prompt = render(
                self.batch_prompt,
                {
                    "messages": lines,
                    "earlier": earlier,
                    "count": str(len(asked)),
                    "user": asked[0].user,
                    "char": asked[0].char,
                },
            )
            longest = max(r.max_tokens for r in asked)
            try:
                text, reasoning = self.client.chat(
                    [{"role": "user", "content": prompt}],
                    max_tokens=min(4000, max(128, len(asked) * longest * 2)),
                )
            except AutorecapError as error:
                for i in todo:
                    results[i] = error
                break
            answered = numbered_lines(text)
            repeated = repeated_lines(
                answered, {n: requests[i].text for n, i in enumerate(todo, 1)}
            )
            left = []
            for n, i in enumerate(todo, 1):
                try:
                    line, opens = new_scene(answered.get(n, ""))
                    memory = check_recap(
                        line,
                        labels=labels,
                        sources=[requests[i].text],
                        prompt=self.batch_prompt,
                    )
                    if n in repeated:
                        raise BadAnswerError("the LLM gave the same line for several messages")
                    results[i] = RecapResult(
                        memory=memory, reasoning=reasoning, extras={"scene_start": opens}
                    )
                except BadAnswerError as error:
                    results[i] = (
                        error
                        if n in answered
                        else BadAnswerError(f"the LLM gave no line for this message ({error})")
                    )
                    left.append(i)
            if not left:
                break
            log.info("batch answer %d left %d messages without a recap", attempt + 1, len(left))
            todo = left
        else:
            alone = super().message_recaps([requests[i] for i in todo])
            results.update(zip(todo, alone, strict=True))
        return [results[i] for i in range(len(requests))]

    def scene_recap(self, request: SceneRecapRequest) -> RecapResult:
        """A scene from its messages, or from their recaps when every message has one and
        they are shorter (the same facts for fewer tokens); no call at all when the recaps
        together already fit the cap."""
        recaps = [m.recap for m in request.messages]
        texts = [m.text for m in request.messages]
        day = day_text(request.day) if request.day else ""
        parts = [part for part in (day, request.place) if part]
        when = ", ".join(parts)
        joined = " ".join(_scene_line(m, True) for m in request.messages)
        if parts:
            joined = f"[{' · '.join(parts)}] {joined}"  # as the offline engine heads a scene
        if all(recaps) and self.counter.count(joined) <= request.max_tokens:
            # The messages' recaps already fit a scene recap: asking for one would pay to
            # read them and get fewer facts back.
            return RecapResult(memory=joined)
        if all(recaps) and self.counter.count(joined) <= request.max_tokens * TRIM_SHARE:
            shortened = OfflineBackend(self.counter).shorten(joined, request.max_tokens)
            return RecapResult(memory=shortened)
        use_recaps = all(recaps) and self.counter.count("\n".join(recaps)) < self.counter.count(
            "\n".join(texts)
        )
        lines = "\n".join(_scene_line(m, use_recaps) for m in request.messages)
        prompt = render(
            self.scene_prompt,
            {
                "messages": lines,
                "name": request.name or "the scene",
                "when": when or "not said",
                "source": "recaps of its messages" if use_recaps else "its messages",
                "user": request.user,
                "char": request.char,
                "max_tokens": str(request.max_tokens),
            },
        )
        labels = prompt_labels(self.scene_prompt)

        def ask() -> RecapResult:
            text, reasoning = self.client.chat(
                [{"role": "user", "content": prompt}], max_tokens=max(64, request.max_tokens * 2)
            )
            memory = check_recap(text, labels=labels, prompt=self.scene_prompt)
            return RecapResult(memory=memory, reasoning=reasoning)

        return self._retrying(ask)

    def combine(self, request: CombineRequest) -> RecapResult:
        """The running recap condensed to `max_tokens` with the new scene's line (asked only
        when it does not fit). Only the oldest lines are sent, to be rewritten shorter: the
        newest, up to `KEPT_SHARE` of the answer, stay word for word, so each call reads a
        line about once instead of the whole recap (on a 1,000-message chat, 0.4 prompt
        tokens per chat token fell to about 0.25)."""
        lines = [line for line in request.previous.splitlines() if line.strip()]
        kept = [request.line]
        room = round(request.max_tokens * KEPT_SHARE) - self.counter.count(request.line)
        while len(lines) > 1 and self.counter.count(lines[-1]) <= room:
            room -= self.counter.count(lines[-1]) + 1
            kept.insert(0, lines.pop())
        if not lines:
            if self.counter.count(request.line) <= request.max_tokens:
                return RecapResult(memory=request.line)
            lines, kept = [request.line], []  # the first scene alone is too long: condense it
        target = max(50, request.max_tokens - self.counter.count("\n".join(kept)))
        prompt = render(
            self.running_prompt,
            {
                "previous": "\n".join(lines),
                "scene": request.scene_recap,
                "name": request.scene_name,
                "max_tokens": str(target),
            },
        )
        labels = prompt_labels(self.running_prompt)

        def ask() -> RecapResult:
            text, reasoning = self.client.chat(
                [{"role": "user", "content": prompt}], max_tokens=max(128, target + 200)
            )
            condensed = check_recap(text, labels=labels)
            return RecapResult(memory="\n".join([condensed, *kept]), reasoning=reasoning)

        return self._retrying(ask)

    def merge_recaps(self, request: MergeRequest) -> RecapResult:
        """The combined recap: the message recaps merged by the model (`combined_prompt`)."""
        prompt = render(
            self.combined_prompt,
            {
                "recaps": "\n".join(" ".join(r.split()) for r in request.recaps if r.strip()),
                "max_tokens": str(request.max_tokens),
            },
        )
        labels = prompt_labels(self.combined_prompt)

        def ask() -> RecapResult:
            text, reasoning = self.client.chat(
                [{"role": "user", "content": prompt}], max_tokens=request.max_tokens + 200
            )
            return RecapResult(memory=check_recap(text, labels=labels), reasoning=reasoning)

        return self._retrying(ask)

    def find_scene_breaks(self, request: SceneBreakRequest) -> list[int]:
        """Ask where scenes end (each message shown by its recap when it has one: the same
        story for fewer tokens); an answer that is not JSON is asked again (`break_retries`
        times) and then taken as no break; numbers out of range are left out."""
        lines = "\n".join(
            f"[{m.index}] {m.name}: {' '.join((m.recap or m.text).split())}"
            for m in request.messages
        )
        prompt = render(
            self.break_prompt,
            {
                "messages": lines,
                "earliest": str(request.earliest),
                "latest": str(request.latest),
                "minimum": str(request.minimum),
            },
        )
        for attempt in range(self.break_retries + 1):
            text, _ = self.client.chat([{"role": "user", "content": prompt}], max_tokens=200)
            try:
                answer = extract_json(text)
            except LLMError:
                log.info("scene-break answer %d was not JSON; asking again", attempt + 1)
                continue
            value = answer.get("scene_breaks_at") if isinstance(answer, dict) else answer
            if value is None or value is False:
                return []
            values = value if isinstance(value, list) else [value]
            found = sorted(
                {
                    int(v)
                    for v in values
                    if isinstance(v, int | float | str) and str(v).strip().lstrip("-").isdigit()
                }
            )
            kept = [i for i in found if request.earliest <= i <= request.latest]
            if found and not kept:
                log.info("scene-break answer %r is out of range; asking again", value)
                continue
            return kept
        return []

    def _retrying(self, ask: Callable[[], RecapResult]) -> RecapResult:
        """`ask()` again when its answer is refused, `answer_retries` times."""
        for attempt in range(self.answer_retries + 1):
            try:
                return ask()
            except BadAnswerError as error:
                if attempt == self.answer_retries:
                    raise
                log.info("answer %d refused (%s); asking again", attempt + 1, error)
        raise AssertionError("unreachable")  # pragma: no cover

    def close(self) -> None:
        self.client.close()


def _scene_line(message: SceneMessage, use_recap: bool) -> str:
    """A message as a scene prompt shows it: "Name: text", or its recap, named only when the
    recap does not already say who (the name is paid for once per message)."""
    if not use_recap:
        return f"{message.name}: {' '.join(message.text.split())}"
    recap = " ".join(message.recap.split())
    words = set(re.findall(r"\w+", recap))
    named = any(part in words for part in message.name.split() if len(part) > 2)
    return recap if named else f"{message.name}: {recap}"
