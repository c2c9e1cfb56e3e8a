"""Which backend writes recaps: the settings' choice (`recap_backend`) made into an object."""

from __future__ import annotations

from typing import Any

from autorecap.core.tokens import get_counter
from autorecap.recap.backend import LLMError, RecapBackend
from autorecap.recap.offline.engine import OfflineBackend
from autorecap.recap.openai_compat import OpenAICompatBackend
from autorecap.settings import Settings


def make_backend(
    settings: Settings, *, backend: str | None = None, **overrides: Any
) -> RecapBackend:
    """The backend the settings (or `backend`: offline|openai) ask for."""
    choice = backend or settings.recap_backend
    if choice == "offline":
        return OfflineBackend()
    if choice != "openai":
        raise LLMError(f"unknown recap backend {choice!r}: use offline or openai")
    options: dict[str, Any] = {
        "base_url": settings.llm_base_url,
        "model": settings.llm_model,
        "api_key_env": settings.llm_api_key_env,
        "temperature": settings.llm_temperature,
        "max_tokens": settings.llm_max_tokens,
        "timeout_s": settings.llm_timeout_s,
        "retries": settings.llm_retries,
        "message_prompt": settings.message_recap_prompt,
        "batch_prompt": settings.message_batch_prompt,
        "batch_tokens": settings.llm_batch_tokens,
        "own_recap_tokens": settings.llm_own_recap_tokens,
        "answer_retries": settings.llm_answer_retries,
        "scene_prompt": settings.scene_recap_prompt,
        "running_prompt": settings.running_recap_prompt,
        "combined_prompt": settings.combined_recap_prompt,
        "break_prompt": settings.scene_break_prompt,
        "break_retries": settings.scene_break_retries,
        "prefill": settings.message_recap_prefill,
        "counter": get_counter(settings.tokenizer),
    }
    options.update({k: v for k, v in overrides.items() if v is not None})
    return OpenAICompatBackend(**options)
