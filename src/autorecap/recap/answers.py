"""Reading an LLM's answers: its reasoning set apart, JSON found, numbered lines split, and
answers that are not recaps refused.

A small model often answers with the prompt's own scaffolding ("Earlier messages:\\n(none)"),
with the message copied back, or with nothing. Such an answer is refused (`BadAnswerError`):
the call is made again, and after the retries the message keeps the error, which the UI shows.
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Sequence
from difflib import SequenceMatcher
from typing import Any

from autorecap.recap.backend import LLMError

_THINK = re.compile(r"<think>(.*?)</think>", re.DOTALL | re.IGNORECASE)
_FENCE = re.compile(r"```(?:json|JSON)?\s*(.*?)```", re.DOTALL)
_PLACEHOLDER = re.compile(r"\{\{\s*\w+\s*\}\}")
_NUMBERED = re.compile(r"^\s*[\[(]?(\d{1,3})[\])\].:]\s*(.*\S)?\s*$")
_PLAIN = re.compile(r"[\W_]+")
_FILLERS = ("(none)", "none", "n/a", "nothing", "no recap", "...")
_LABEL = re.compile(r"^[^\W\d][\w'’. -]{0,40}:\s*")
"""A leading "Name:" (a speaker's, as the prompt writes its lines)."""
_ABOUT_THE_MESSAGE = re.compile(
    r"^\W*(?:\d+\s+)?(?:the\s+)?(?:(?:first|second|third|fourth|fifth|next|last|this|above)\s+)?"
    r"messages?\b(?:\s+\d+)?\s*[:\-]",
    re.IGNORECASE,
)
"""An answer that names the message it was given ("The first message: ...") instead of saying
what happened."""
_WORD = re.compile(r"[^\W\d_]{2,}")
_PREAMBLE = re.compile(r"^\s*(?:the\s+)?(?:note|recap|summary|answer)\s+is\s*:\s*", re.I)
""""The note is:" before the note itself: taken off."""
_SELF = re.compile(r"^(?:I|I'm|I am|I've|As an AI|You are|You're|You've|You have)\b")
"""A note speaks of the chat in the third person; this is the model speaking for itself or as a
character."""
_ACTION = re.compile(r"\*[^*\n]{3,}\*")
"""Roleplay's action markup ("*I glance at the chart*"): the chat's own voice, never a note's."""
_ABOUT_THE_NOTE = re.compile(r"^\W*(?:the|this|a|my)\s+(?:note|recap|summary)\b", re.I)
"""An answer about the note it should have written ("The note is a single sentence...")."""
_RUN = 10
"""Words in a row taken from the message that make an answer a copy of it."""
_INSTRUCTION_RUN = 6
"""Words in a row taken from the prompt's own instructions that make an answer an echo of them."""


class BadAnswerError(LLMError):
    """An answer that is not a recap (empty, the prompt's labels, the input copied back)."""

    http_status = 502


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


def prompt_labels(template: str) -> list[str]:
    """The section labels of a prompt template ("Earlier messages:", "The message, from
    {{name}}:"), as an answer that repeats them would show them (placeholders left out)."""
    labels = []
    for line in template.splitlines():
        stripped = line.strip()
        if not stripped.endswith(":") or len(stripped) > 80:
            continue
        label = _PLACEHOLDER.sub("", stripped[:-1]).strip(" ,.-")
        if len(label) >= 8 or len(label.split()) >= 2:
            labels.append(label)
    return labels


def check_recap(
    answer: str, *, labels: Sequence[str], sources: Sequence[str] = (), prompt: str = ""
) -> str:
    """The answer, stripped (and without a "The note is:" preamble), if it is a recap; else
    `BadAnswerError` saying why. `sources`: the texts recapped; `prompt`: the prompt template,
    whose instructions an answer must not echo."""
    text = _PREAMBLE.sub("", answer.strip(), count=1).strip()
    plain = _plain(text)
    if not plain or text.lower().strip(" .") in _FILLERS:
        raise BadAnswerError("the LLM answered with no recap")
    lowered = text.lower()
    for label in labels:
        if label.lower() in lowered:
            raise BadAnswerError(
                f"the LLM repeated the prompt's own label {label!r} instead of recapping"
            )
    if "(none)" in lowered:
        raise BadAnswerError("the LLM repeated the prompt's placeholder '(none)'")
    if _ABOUT_THE_MESSAGE.match(text):
        raise BadAnswerError("the LLM labelled the message instead of recapping it")
    body = _LABEL.sub("", _LABEL.sub("", text, count=1), count=1).strip()
    if not _WORD.search(body):
        raise BadAnswerError("the LLM's answer is too short to say what happened")
    # "*She leans over the wheel.*", or one quotation: the chat's own voice, no note.
    quoted = body[:1] in '"“' and body.rstrip(" .!?…")[-1:] in '"”'
    if body[:1] == "*" or quoted or _ACTION.search(text):
        raise BadAnswerError("the LLM went on with the chat instead of recapping it")
    if _ABOUT_THE_NOTE.match(text):
        raise BadAnswerError("the LLM wrote about the note instead of writing it")
    if _SELF.match(body):
        raise BadAnswerError("the LLM spoke as itself or a character instead of recapping")
    words = plain.split()
    if prompt and _runs(words, _INSTRUCTION_RUN) & _instruction_runs(prompt):
        raise BadAnswerError("the LLM repeated the prompt's instructions instead of recapping")
    for source in sources:
        original = _plain(source)
        if len(original.split()) < 12:
            continue
        if (
            original in plain
            or SequenceMatcher(None, original, plain).ratio() >= 0.85
            # Ten words in a row of a long message (a short one may be recapped in its words).
            or (
                len(original.split()) >= 3 * _RUN
                and _runs(words, _RUN) & _runs(original.split(), _RUN)
            )
        ):
            raise BadAnswerError("the LLM copied the message back instead of recapping it")
    return text


def _runs(words: Sequence[str], size: int) -> set[tuple[str, ...]]:
    return {tuple(words[i : i + size]) for i in range(len(words) - size + 1)}


@functools.lru_cache(maxsize=64)
def _instruction_runs(prompt: str) -> frozenset[tuple[str, ...]]:
    """The prompt's own wording, placeholders out, as runs of words."""
    runs: set[tuple[str, ...]] = set()
    for part in _PLACEHOLDER.split(prompt):
        runs |= _runs(_plain(part).split(), _INSTRUCTION_RUN)
    return frozenset(runs)


def repeated_lines(lines: dict[int, str], sources: dict[int, str]) -> set[int]:
    """The numbers of the lines that say, word for word, what a line for another, different
    message says (a model repeating itself); short ones ("Tomas agreed.") may repeat."""
    by_line: dict[str, set[str]] = {}
    for number, line in lines.items():
        if number in sources:
            by_line.setdefault(_plain(line), set()).add(sources[number])
    return {
        number
        for number, line in lines.items()
        if len(by_line.get(_plain(line), ())) > 1 and len(_plain(line).split()) >= 6
    }


def numbered_lines(answer: str) -> dict[int, str]:
    """`[1] ...` / `1. ...` / `(1) ...` lines of an answer, by number (a line without a number
    continues the one before)."""
    found: dict[int, str] = {}
    last: int | None = None
    for line in answer.splitlines():
        match = _NUMBERED.match(line)
        if match:
            last = int(match.group(1))
            found[last] = (match.group(2) or "").strip()
        elif last is not None and line.strip():
            found[last] = f"{found[last]} {line.strip()}".strip()
    return found


_NEW_SCENE = re.compile(r"^\W*new\s+scene\W*", re.IGNORECASE)


def new_scene(line: str) -> tuple[str, bool]:
    """A batch line without its "NEW SCENE:" mark, and whether it had one."""
    match = _NEW_SCENE.match(line)
    return (line[match.end() :].strip(), True) if match else (line, False)


def _plain(text: str) -> str:
    return " ".join(_PLAIN.sub(" ", text.lower()).split())
