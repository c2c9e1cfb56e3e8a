"""Offline token counting: bundled encodings, SillyTavern's guesstimate, the cache."""

from __future__ import annotations

import math

import pytest
import quicktok

from autorecap import TOKENIZERS, TokenCounter, TokenizerError, count_tokens
from autorecap.core.tokens import guesstimate

TEXTS = [
    "hello world",
    "The wind is rising. Should we reef the sails? 风越来越大了 🌊",
    "*She unrolls the chart on the capstan.* Genuine or not, we sail.",
    "<|endoftext|> special tokens count as plain text",
]


@pytest.mark.parametrize(
    ("tokenizer", "encoding"),
    [("cl100k", "cl100k_base"), ("o200k", "o200k_base"), ("llama3", "llama3"), ("qwen3", "qwen3")],
)
def test_counts_match_the_bundled_encoding(tokenizer: str, encoding: str) -> None:
    counter = TokenCounter(tokenizer)
    raw = quicktok.get_encoding(encoding)
    for text in TEXTS:
        assert counter.count(text) == len(raw.encode_ordinary(text))


def test_known_cl100k_counts() -> None:
    # Values tiktoken gives for cl100k_base.
    assert count_tokens("hello world") == 2
    assert count_tokens("hello world", "cl100k") == 2
    assert count_tokens("The quick brown fox jumps over the lazy dog.") == 10


def test_encodings_differ() -> None:
    text = TEXTS[1]
    counts = {name: TokenCounter(name).count(text) for name in ("cl100k", "o200k")}
    assert counts["cl100k"] != counts["o200k"]


# SillyTavern tokenizers.js: guesstimate(str) = Math.ceil(str.length / 3.35)
@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("a", 1),
        ("abc", 1),
        ("abcd", 2),
        ("x" * 67, 20),
        ("x" * 68, 21),
        ("🌊", 1),  # one code point, two UTF-16 units: ceil(2 / 3.35)
        ("🌊" * 5, math.ceil(10 / 3.35)),
        ("风越来越大了", math.ceil(6 / 3.35)),
    ],
)
def test_bytes_tokenizer_is_sillytaverns_guesstimate(text: str, expected: int) -> None:
    assert guesstimate(text) == expected
    assert TokenCounter("bytes").count(text) == expected


def test_non_text_values_count_by_their_text_form() -> None:
    counter = TokenCounter("cl100k")
    assert counter.count(None) == 0
    assert counter.count("") == 0
    assert counter.count(42) == counter.count("42")


def test_lone_surrogates_are_counted_not_rejected() -> None:
    assert TokenCounter("cl100k").count("a\ud800b") >= 2


def test_cache_is_keyed_by_text() -> None:
    counter = TokenCounter("cl100k")
    counter.count("one two three")
    counter.count("one two three")
    counter.count("four")
    assert (counter.hits, counter.misses) == (1, 2)
    counter.clear_cache()
    counter.count("four")
    assert counter.misses == 3


def test_cache_is_bounded() -> None:
    counter = TokenCounter("bytes", cache_limit=10)
    for i in range(25):
        counter.count(f"text number {i}")
    assert len(counter._cache) <= 10
    assert counter.count("text number 24") == guesstimate("text number 24")


def test_unknown_tokenizer_names_the_allowed_ones() -> None:
    with pytest.raises(TokenizerError, match="unknown tokenizer 'gpt2': use one of cl100k"):
        TokenCounter("gpt2")
    with pytest.raises(TokenizerError):
        count_tokens("x", "nope")
    assert TOKENIZERS == ("cl100k", "o200k", "llama3", "qwen3", "bytes")
