"""Offline token counting, with a cache keyed by text.

The BPE encodings come bundled with the `quicktok` package (ids identical to tiktoken's), so
nothing is downloaded at run time. `bytes` is SillyTavern's own fallback, `guesstimate()`:
`ceil(length / 3.35)`, where length is JavaScript's string length (UTF-16 code units, which equals
the byte count for ASCII text).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any, Final

from autorecap.errors import TokenizerError

CHARACTERS_PER_TOKEN_RATIO: Final = 3.35
"""SillyTavern's `CHARACTERS_PER_TOKEN_RATIO` (public/scripts/tokenizers.js)."""

ENCODINGS: Final[dict[str, str]] = {
    "cl100k": "cl100k_base",
    "o200k": "o200k_base",
    "llama3": "llama3",
    "qwen3": "qwen3",
}
"""Our tokenizer names and the bundled encodings they load."""
TOKENIZERS: Final[tuple[str, ...]] = (*ENCODINGS, "bytes")
"""Every accepted value of the `tokenizer` setting."""
DEFAULT_TOKENIZER: Final = "cl100k"

_CACHE_LIMIT = 200_000


def guesstimate(text: str) -> int:
    """SillyTavern's fallback estimate: UTF-16 length / 3.35, rounded up."""
    if not text:
        return 0
    utf16_units = (
        len(text) if text.isascii() else len(text.encode("utf-16-le", "surrogatepass")) // 2
    )
    return math.ceil(utf16_units / CHARACTERS_PER_TOKEN_RATIO)


class TokenCounter:
    """Counts tokens with one tokenizer and remembers each text's count.

    `count()` accepts any JSON value as SillyTavern's `getTokenCount` does: a string is counted,
    anything else (a number `mes`, null) is counted by its text form, and empty text is 0.
    """

    def __init__(self, tokenizer: str = DEFAULT_TOKENIZER, *, cache_limit: int = _CACHE_LIMIT):
        if tokenizer not in TOKENIZERS:
            raise TokenizerError(
                f"unknown tokenizer {tokenizer!r}: use one of {', '.join(TOKENIZERS)}"
            )
        self.name = tokenizer
        self._count_raw: Callable[[str], int] = (
            guesstimate if tokenizer == "bytes" else _load_encoding(tokenizer)
        )
        self._cache: dict[str, int] = {}
        self._cache_limit = max(1, cache_limit)
        self.hits = 0
        self.misses = 0

    def count(self, text: Any) -> int:
        """The number of tokens in `text` (cached)."""
        if not isinstance(text, str):
            text = "" if text is None else str(text)
        if not text:
            return 0
        cached = self._cache.get(text)
        if cached is not None:
            self.hits += 1
            return cached
        self.misses += 1
        result = self._count_raw(text)
        if len(self._cache) >= self._cache_limit:
            # Drop the older half; dicts keep insertion order, so this is FIFO eviction.
            for key in list(self._cache)[: self._cache_limit // 2 or 1]:
                del self._cache[key]
        self._cache[text] = result
        return result

    def count_uncached(self, text: str) -> int:
        """Count without touching the cache (benchmarks, one-off texts)."""
        return self._count_raw(text) if text else 0

    def clear_cache(self) -> None:
        """Forget every cached count."""
        self._cache.clear()

    def __repr__(self) -> str:
        return f"TokenCounter({self.name!r}, cached={len(self._cache)})"


_COUNTERS: dict[str, TokenCounter] = {}


def get_counter(tokenizer: str = DEFAULT_TOKENIZER) -> TokenCounter:
    """The shared counter (and cache) of one tokenizer."""
    counter = _COUNTERS.get(tokenizer)
    if counter is None:
        counter = _COUNTERS[tokenizer] = TokenCounter(tokenizer)
    return counter


def count_tokens(text: Any, tokenizer: str = DEFAULT_TOKENIZER) -> int:
    """Count the tokens of `text` with the named tokenizer, through its shared cache."""
    return get_counter(tokenizer).count(text)


def _load_encoding(tokenizer: str) -> Callable[[str], int]:
    try:
        import quicktok
    except ImportError as error:  # pragma: no cover - a broken install
        raise TokenizerError(
            "the quicktok package is missing, so BPE tokenizers cannot load: reinstall "
            "autorecap (pip install autorecap), or set the tokenizer to 'bytes'"
        ) from error
    try:
        encoding = quicktok.get_encoding(ENCODINGS[tokenizer])
    except Exception as error:  # quicktok raises RuntimeError and friends
        raise TokenizerError(
            f"could not load the bundled {ENCODINGS[tokenizer]} encoding ({error}); "
            "reinstall quicktok-v1, or set the tokenizer to 'bytes'"
        ) from error
    raw_count: Callable[[str], int] = encoding.count

    def count(text: str) -> int:
        try:
            return raw_count(text)
        except TypeError:
            # Lone surrogates (valid in JSON strings) cannot cross into the encoder; count them
            # as U+FFFD, as tiktoken does.
            return raw_count(text.encode("utf-16", "surrogatepass").decode("utf-16", "replace"))

    return count
