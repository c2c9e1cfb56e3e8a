"""What the evaluation measures: scene breaks found, and how much of the answers a text holds.

- **Breaks**: a true scene start counts as found when a detected start lies within `tolerance`
  messages of it (each detected start matches at most one true start); the detected starts left
  over are extra.
- **Answer recall**: for each question, the share of its answer's words (lower case, letters and
  digits, a few function words left out) that occur among the text's words; the mean over
  questions. A memory that holds "8 May 2023" gets two of the three words of "7 May 2023".
- **Planted facts**: how many planted answers occur in the text, as written (case aside).
- **Baseline**: the most recent visible messages that fit the same budget, as a plain context
  window keeps them.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from autorecap.core.model import Message
from autorecap.core.tokens import TokenCounter
from autorecap.evaluation.corpus import Question

_WORD = re.compile(r"[^\W_]+", re.UNICODE)
_FUNCTION_WORDS = frozenset(
    "a an the of to in on at by for and or with from as is was were be been it its that this "
    "their his her they he she".split()
)


@dataclass(frozen=True)
class BreakMatch:
    """Detected scene starts against true ones."""

    true: int
    found: int
    extra: int

    @property
    def found_share(self) -> float:
        return self.found / self.true if self.true else 1.0


def match_breaks(
    true_starts: Sequence[int], found_starts: Sequence[int], tolerance: int = 2
) -> BreakMatch:
    """Pair each true start with the nearest unused detected start within `tolerance`."""
    unused = sorted(found_starts)
    found = 0
    for start in sorted(true_starts):
        near = [s for s in unused if abs(s - start) <= tolerance]
        if near:
            unused.remove(min(near, key=lambda s: (abs(s - start), s)))
            found += 1
    return BreakMatch(len(true_starts), found, len(unused))


def words(text: str) -> set[str]:
    """The words of a text as recall counts them."""
    return {w.lower() for w in _WORD.findall(text)}


def answer_words(answer: str) -> list[str]:
    """An answer's words that recall counts (all of them when all are function words)."""
    found = [w.lower() for w in _WORD.findall(answer)]
    content = [w for w in found if w not in _FUNCTION_WORDS]
    return content or found


def answer_recall(questions: Sequence[Question], text: str) -> float:
    """The mean, over questions, of the share of the answer's words that the text holds."""
    scored = [q for q in questions if answer_words(q.answer)]
    if not scored:
        return 0.0
    held = words(text)
    total = 0.0
    for question in scored:
        wanted = answer_words(question.answer)
        total += sum(1 for w in wanted if w in held) / len(wanted)
    return total / len(scored)


def planted_found(questions: Sequence[Question], text: str) -> tuple[int, int]:
    """(planted answers the text holds, planted answers)."""
    planted = [q for q in questions if q.planted]
    lowered = text.lower()
    return sum(1 for q in planted if q.answer.lower() in lowered), len(planted)


def latest_messages(messages: Sequence[Message], budget: int, counter: TokenCounter) -> str:
    """The most recent visible messages (`Name: text` lines) that fit the budget."""
    lines: list[str] = []
    spent = 0
    for message in reversed(messages):
        if message.is_hidden:
            continue
        line = f"{message.name}: {message.text}"
        cost = counter.count(line) + (1 if lines else 0)
        if spent + cost > budget:
            break
        spent += cost
        lines.append(line)
    return "\n".join(reversed(lines))
