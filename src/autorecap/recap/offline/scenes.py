"""The offline engine's scene work: finding scene breaks, recapping scenes, folding scene
recaps into the running recap. No model: text cues, statistics and the same sentence scoring
as message recaps.

Scene breaks are found from what marks them in real roleplay: a message that opens with a change
of time or place ("The next morning…", "Two days later…", "By nightfall the Kestrel reaches…"),
a narrator stepping in, a long pause between messages, and a change of vocabulary (the words of
the messages after differ from those before). Candidates are scored and the best ones kept at
least a minimum scene length apart.
"""

from __future__ import annotations

import itertools
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from autorecap.core.tokens import TokenCounter
from autorecap.pacing import pause

_WORD = re.compile(r"[A-Za-zÀ-ÖØ-öø-ÿ][A-Za-zÀ-ÖØ-öø-ÿ'’-]*")
_MARKUP = re.compile(r"[*_~`\"“”]+")
_TIME_CUE = re.compile(
    r"^\W*(?:"
    r"(?:by\s+)?the\s+(?:next|following)\s+(?:morning|day|evening|night|afternoon|dawn|week)"
    r"|(?:a|one|two|three|four|five|six|seven|several|some|many|a\s+few)\s+"
    r"(?:hours?|days?|nights?|weeks?|months?|years?)\s+later"
    r"|(?:hours|days|weeks|much|some\s+time)\s+later|later\s+that\b"
    r"|(?:a|one|two|three|four|five|six|seven|several|some)\s+(?:hours?|days?|nights?|weeks?)"
    r"\s+(?:past|after|out|on)\b"
    r"|(?:on\s+)?the\s+(?:[a-z]+-)?[a-z]+(?:st|nd|rd|th)\s+of\s+[A-Z][a-z]+"
    r"|meanwhile\b|elsewhere\b|afterwards?\b"
    r"|(?:just\s+)?(?:before|after)\s+(?:dawn|dusk|sunrise|sunset|noon|midnight|nightfall)"
    r"|(?:at|around|by)\s+(?:dawn|dusk|sunrise|sunset|first\s+light|nightfall|noon|midnight"
    r"|morning|evening|midday|the\s+time)"
    r"|that\s+(?:same\s+)?(?:night|evening|afternoon|morning|day)"
    r"|(?:early|late)\s+(?:the\s+next|that|in\s+the)"
    r")"
    r"|\bwith\s+[^.!?]{1,40}\s+far\s+behind\b",
    re.IGNORECASE,
)
_STOP = frozenset(
    "a an the and or but of to in on at by for with from into as is are was were be been it its "
    "this that these those there here he she they we you i me him her them us my your his their "
    "our not no do does did have has had will would can could just very too also only even still "
    "what who which when where why how all any some more most one up down out off about after "
    "before while then than so if".split()
)


@dataclass(frozen=True)
class BreakCandidate:
    """A message that may open a new scene, with why."""

    index: int
    score: float
    cue: bool


def _words(text: str) -> set[str]:
    return {w.lower() for w in _WORD.findall(text)} - _STOP


def score_scene_starts(
    texts: Sequence[str],
    *,
    narrators: Sequence[bool],
    times: Sequence[datetime | None],
    window: int = 6,
) -> list[BreakCandidate]:
    """How likely each message is to open a new scene (index 0 never is)."""
    count = len(texts)
    words = [_words(t) for t in texts]
    gaps = _gaps(times)
    positive = sorted(g for g in gaps if g is not None and g > 0)
    typical = positive[len(positive) // 2] if positive else None
    scored: list[BreakCandidate] = []
    for index in range(1, count):
        if index % 64 == 0:
            pause()
        opening = _MARKUP.sub("", texts[index])[:160]
        cue = bool(_TIME_CUE.search(opening))
        before: set[str] = set().union(*words[max(0, index - window) : index])
        after: set[str] = set().union(*words[index : index + window])
        union = before | after
        similarity = len(before & after) / len(union) if union else 1.0
        score = 3.0 * cue + 1.2 * narrators[index] + 4.0 * (1.0 - similarity) - 2.5
        gap = gaps[index]
        if gap is not None and typical:
            score += max(0.0, min(3.0, math.log10(max(gap, 1e-3) / typical)))
        scored.append(BreakCandidate(index, score, cue))
    return scored


def pick_scene_starts(
    candidates: Sequence[BreakCandidate],
    *,
    count: int,
    minimum_length: int,
    threshold: float = 3.2,
    first_allowed: int = 1,
    last_allowed: int | None = None,
    existing_starts: Sequence[int] = (),
) -> list[int]:
    """The best candidates above the threshold, each at least `minimum_length` messages from
    another start (and from the chat's ends), strongest first."""
    last = count - 1 if last_allowed is None else last_allowed
    chosen: list[int] = list(existing_starts)
    for candidate in sorted(candidates, key=lambda c: (-c.score, c.index)):
        if candidate.score < threshold:
            break
        index = candidate.index
        if not first_allowed <= index <= last:
            continue
        if index < minimum_length:
            continue
        if any(abs(index - other) < minimum_length for other in chosen):
            continue
        chosen.append(index)
    return sorted(set(chosen) - set(existing_starts))


def _gaps(times: Sequence[datetime | None]) -> list[float | None]:
    gaps: list[float | None] = [None]
    for previous, current in itertools.pairwise(times):
        try:
            gap = (current - previous).total_seconds() if previous and current else None
        except TypeError:  # one aware, one naive: send_date forms mixed in one chat
            gap = None
        gaps.append(gap)
    return gaps


# --- scene recaps and the running recap ---------------------------------------------------------


def pick_sentences(
    sentences: Sequence[tuple[float, str]], budget: int, counter: TokenCounter
) -> list[str]:
    """The highest-scoring sentences that fit `budget` tokens together, in their order."""
    order = sorted(range(len(sentences)), key=lambda i: (-sentences[i][0], i))
    chosen: list[int] = []
    used = 0
    for i in order:
        cost = counter.count(sentences[i][1]) + (1 if chosen else 0)
        if used + cost <= budget:
            chosen.append(i)
            used += cost
    return [sentences[i][1] for i in sorted(chosen)]


def fit_lines(
    lines: list[str],
    budget: int,
    counter: TokenCounter,
    shrink: Callable[[str, frozenset[str]], str],
) -> list[str]:
    """Make `lines` fit `budget` tokens: shorten the oldest first, and drop the oldest whole
    only when shortening every older one is not enough. The newest line is never touched.
    `shrink(line, known)` gets the capitalised words the other lines mention."""

    def total() -> int:
        return sum(counter.count(line) for line in lines) + max(0, len(lines) - 1)

    if total() <= budget:
        return lines
    for index in range(len(lines) - 1):
        pause()
        others = " ".join(lines[:index] + lines[index + 1 :])
        known = frozenset(w for w in _WORD.findall(others) if w[0].isupper())
        lines[index] = shrink(lines[index], known)
        if total() <= budget:
            return lines
    while len(lines) > 1 and total() > budget:
        del lines[0]
    return lines
