"""Recap backends: any OpenAI-compatible LLM, and the offline extractive engine."""

from autorecap.llm.base import LLMError, RecapBackend, RecapRequest, RecapResult
from autorecap.llm.offline import OfflineBackend
from autorecap.llm.openai_compat import OpenAICompatBackend, make_backend

__all__ = [
    "LLMError",
    "OfflineBackend",
    "OpenAICompatBackend",
    "RecapBackend",
    "RecapRequest",
    "RecapResult",
    "make_backend",
]
