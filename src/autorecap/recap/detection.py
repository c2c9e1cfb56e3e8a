"""Tier 2, scene detection: where scenes end, marked where ST-Auto-Recap keeps breaks.

Breaks are looked for after the last one, leaving the newest `auto_scene_break_message_offset`
messages alone and keeping scenes at least `auto_scene_break_minimum_scene_length` long; each
examined message is marked `auto_scene_break_checked`.
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import replace

from autorecap.core.data import get_data, get_memory, set_data
from autorecap.core.model import Chat, Message
from autorecap.core.names import said, spoken
from autorecap.core.out_of_character import without_tags, without_thoughts
from autorecap.core.scenes import break_indexes, mark_break
from autorecap.core.status_blocks import place_and_day, split_status
from autorecap.core.tokens import get_counter
from autorecap.pacing import pause
from autorecap.recap.backend import RecapBackend, SceneBreakRequest, SceneMessage
from autorecap.recap.offline.cues import (
    BreakCandidate,
    Turn,
    pick_scene_starts,
    score_scene_starts,
    threshold_for,
)
from autorecap.recap.offline.engine import OfflineBackend
from autorecap.settings import Settings

_CAPITALISED = re.compile(r"\b[A-ZÀ-Ý][a-zà-ÿ]+(?:\s+[A-ZÀ-Ý][a-zà-ÿ]+)*")
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+")
_COMMON = frozenset(
    {
        "The",
        "A",
        "An",
        "I",
        "She",
        "He",
        "They",
        "We",
        "You",
        "It",
        "Captain",
        "Mister",
        "Mr",
        "Mrs",
        "Miss",
        "Lady",
        "Lord",
        "Sir",
        "God",
        "Oh",
    }
)
_OPENERS = re.compile(r"\*+|(?<!\w)[\"“«]")
_CALENDAR = re.compile(
    r"(?:Monday|Tuesday|Wednesday|Thursday|Friday|Saturday|Sunday|January|February|March|"
    r"April|May|June|July|August|September|October|November|December)$"
)
_WINDOW = 60
_SCORE_CONTEXT = 50
"""Messages before the scanned range that the scorer sees (its window, and typical pauses)."""


def detect_scene_breaks(
    chat: Chat,
    backend: RecapBackend,
    settings: Settings,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> list[int]:
    """Find and mark scene breaks after the last one; returns the new break indexes.

    The offline cues (`recap.offline.cues`) find breaks with any backend. With
    `scene_break_detection` "llm" and an LLM backend, what the LLM said of each message as it
    recapped it in a batch (`scene_start`) counts as a strong cue (a short message that is its
    own recap gets no word from it); messages it did not recap are shown to it a window at a
    time (`find_scene_breaks`). A scene that runs past
    `scene_max_messages` or `scene_max_tokens` with no break is closed at its most likely point
    (`scene_break_cause: "length"`), so that memory never waits forever for a break."""
    messages = chat.messages
    existing = break_indexes(messages)
    start = existing[-1] + 1 if existing else 0
    end = len(messages) - 1 - settings.auto_scene_break_message_offset
    minimum = settings.auto_scene_break_minimum_scene_length
    if end - start + 1 < minimum:
        return []
    pause()
    use_llm = settings.scene_break_detection == "llm" and not isinstance(backend, OfflineBackend)
    candidates, threshold = _candidates(messages, start, end, hints=use_llm)
    cause = {c.index: "llm" if "llm" in c.cues else "cues" for c in candidates}
    starts = {
        s: cause[s]
        for s in pick_scene_starts(
            candidates,
            count=len(messages),
            minimum_length=minimum,
            threshold=threshold,
            first_allowed=start + 1,  # at the minimum length from `start`, as a start
            last_allowed=end + 1,
            existing_starts=[start] if start else [],
        )
    }
    recapped = any(get_memory(m) for m in messages[start : end + 1])
    if use_llm and not recapped:  # no batch recaps said where scenes start: ask by windows
        for index in _llm_breaks(messages, backend, start, end, minimum, progress):
            if all(abs(index + 1 - other) >= minimum for other in starts):
                starts[index + 1] = "llm"
    for forced in _length_limits(messages, sorted(starts), candidates, start, end, settings):
        starts[forced] = "length"
    found = sorted(s - 1 for s in starts)
    first = start
    title = ""
    for number, index in enumerate(found, start=len(existing)):
        title = scene_title(messages[first : index + 1], number, before=title)
        mark_break(messages[index], title, cause=starts[index + 1])
        first = index + 1
    for message in messages[start : end + 1]:
        if not get_data(message, "auto_scene_break_checked"):
            set_data(message, "auto_scene_break_checked", True)
    if progress is not None:
        progress(1, 1)
    return found


def _candidates(
    messages: list[Message], start: int, end: int, *, hints: bool = False
) -> tuple[list[BreakCandidate], float]:
    """The scored messages around `start..end`, and the score that opens a scene there."""
    # Only the part after the last break is scored (with the scorer's window around it): a long
    # chat's new messages cost what they are, not what the whole chat is.
    low = max(0, start - _SCORE_CONTEXT)
    part = messages[low : min(len(messages), end + 2 + _SCORE_CONTEXT)]
    turns = [
        Turn(
            without_tags(story or text),
            speaker,
            m.is_narrator,
            m.is_hidden,
            m.send_time,
            hint=hints and bool(get_data(m, "scene_start")),
            status_place=where,
            status_day=day,
        )
        for m in part
        for speaker, text in [spoken(m)]
        for story, fields in [split_status(without_thoughts(text))]
        for where, day in [place_and_day(fields)]
    ]
    scored = [replace(c, index=c.index + low) for c in score_scene_starts(turns)]
    return scored, threshold_for(turns)


def _length_limits(
    messages: list[Message],
    starts: list[int],
    candidates: list[BreakCandidate],
    start: int,
    end: int,
    settings: Settings,
) -> list[int]:
    """Scene starts that close scenes longer than the settings allow, each at the likeliest
    message (the best-scoring one) between the minimum length and the limit."""
    minimum = settings.auto_scene_break_minimum_scene_length
    score = {c.index: c.score for c in candidates}
    counter = get_counter(settings.tokenizer)
    forced: list[int] = []
    bounds = [start, *starts, end + 1]
    for first, following in itertools.pairwise(bounds):
        scene_start = first
        while True:
            limit = scene_start
            tokens = 0
            while limit < following and limit - scene_start < settings.scene_max_messages:
                tokens += counter.count(messages[limit].text)
                if tokens > settings.scene_max_tokens and limit - scene_start >= minimum:
                    break
                limit += 1
            if limit >= following or limit - scene_start < minimum:
                break  # the scene fits (or cannot be cut at the minimum length)
            # `limit` is the first message past the allowance: cut at or before it.
            choices = range(scene_start + minimum, limit + 1)
            best = max(choices, key=lambda i: (score.get(i, 0.0), i))
            if following - best < minimum and following <= end:
                best = max(scene_start + minimum, following - minimum)
                if best - scene_start < minimum or following - best < minimum:
                    break  # no cut leaves both parts their minimum length
            forced.append(best)
            scene_start = best
    return forced


def _llm_breaks(
    messages: list[Message],
    backend: RecapBackend,
    start: int,
    end: int,
    minimum: int,
    progress: Callable[[int, int], None] | None,
) -> list[int]:
    """Breaks the LLM finds, window by window (`_WINDOW` messages, each shown by its recap
    when it has one), every break of a window asked at once."""
    found: list[int] = []
    cursor = start
    while end - cursor + 1 >= minimum:
        window_end = min(end, cursor + _WINDOW - 1)
        window = tuple(
            SceneMessage(i, *said(messages[i]), get_memory(messages[i]))
            for i in range(cursor, min(len(messages), window_end + 2))
            if not messages[i].is_hidden
        )
        earliest = max(cursor + minimum - 1, found[-1] + minimum if found else 0)
        if earliest > window_end:
            break
        request = SceneBreakRequest(window, earliest, window_end, minimum)
        for index in backend.find_scene_breaks(request):
            if earliest <= index <= window_end and (not found or index - found[-1] >= minimum):
                found.append(index)
        if window_end >= end:
            break
        # The next window starts after this one's last break, or overlaps its end by a scene's
        # minimum length, so that a break near the edge is seen with messages on both sides.
        last = found[-1] + 1 if found and found[-1] >= window_end - minimum else 0
        cursor = max(cursor + 1, last, window_end - minimum + 2)
        if progress is not None:
            progress(cursor - start, end - start + 1)
    return found


def scene_title(messages: list[Message], number: int, *, before: str = "") -> str:
    """A name for a scene: the name or place it mentions most (capitalised words inside a
    sentence, not the speakers), unless the scene `before` it is named so (a journey's
    scenes all mention where it goes: "Scene 2: Cinder Line" after "Scene 1: Cinder Line")."""
    lines = [said(m) for m in messages]
    speakers = {name for name, _ in lines} | {w for name, _ in lines for w in name.split()}
    counts: Counter[str] = Counter()
    for _name, text in lines:
        # A gesture between asterisks and a quotation open sentences of their own.
        for sentence in _SENTENCE_SPLIT.split(_OPENERS.sub(". ", text)):
            for match in _CAPITALISED.finditer(sentence):
                phrase = match.group(0)
                if match.start() == len(sentence) - len(sentence.lstrip(" \"'“(")):
                    continue  # the sentence's first word is capitalised anyway
                words = phrase.split()
                if phrase in speakers or words[0] in speakers or words[0] in _COMMON:
                    continue
                if _CALENDAR.match(words[0]):
                    continue  # "on a Tuesday" names no scene
                counts[phrase] += 1
    taken = before.partition(": ")[2]
    if taken in counts and len(counts) > 1:
        del counts[taken]
    if counts:
        place, _ = max(counts.items(), key=lambda item: (item[1], len(item[0])))
        return f"Scene {number + 1}: {place}"
    return f"Scene {number + 1}"
