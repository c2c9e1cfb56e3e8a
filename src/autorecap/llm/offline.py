"""The offline extractive engine: recaps with no model at all.

A message recap picks the message's most informative sentences, scored by what a memory needs
to keep: numbers and amounts, names and places (capitalised words inside a sentence), salient
events (promises, debts, discoveries, injuries, betrayals), and position (openings set the
scene). Sentences that repeat one another, or the recaps just before, are dropped. The chosen
sentences keep their order and are cut to a hard token cap. Deterministic and fast: regular
expressions and arithmetic, nothing learned.
"""

from __future__ import annotations

import re
from dataclasses import dataclass

from autorecap.core.tokens import TokenCounter, get_counter
from autorecap.llm.base import RecapBackend, RecapRequest, RecapResult

_SENTENCE = re.compile(r"[^.!?…]+(?:[.!?…]+[\"'”’)\]]*|$)")
# Abbreviations whose full stop does not end a sentence ("Mr. Pell"): glued before splitting.
_ABBREVIATION = re.compile(r"\b(Mr|Mrs|Ms|Dr|St|Capt|Lt|Sgt|Prof|Mt|No|vs|etc)\.(?=\s)")
_WORD = re.compile(r"[A-Za-zÀ-ÖØ-öø-ÿ][A-Za-zÀ-ÖØ-öø-ÿ'’-]*")
_NUMBER = re.compile(r"\d[\d,.:/-]*\d|\d")
_MARKUP = re.compile(r"[*_~`]+")
_SPACE = re.compile(r"\s+")

SALIENT = frozenset(
    """
    promise promised promises swear swore vow vowed owe owes owed debt debts pay paid pays
    buy bought sell sold sells steal stole stolen give gives gave take took taken find found
    finds lose lost hide hid hidden reveal reveals revealed secret secrets betray betrayed
    traitor kill killed dead dies died death wound wounded injured hurt bleeding burned
    broken love loves kiss kissed marry married hate hates fear afraid escape escaped flee
    fled attack attacked fight fought capture captured prisoner rescue rescued arrive
    arrived leave left return returned meet met name named called key map chart letter ring
    sword gold crowns coins treasure plan plans agree agreed deal bargain warn warned threat
    threatens spy lie lied truth remember forgot poison cure storm ship fire
    """.split()
)
"""Words that mark events a memory should keep."""
STOPWORDS = frozenset(
    """
    a an the and or but if then so of to in on at by for with from into onto over under as
    is are was were be been being it its this that these those there here he she they we you
    i me him her them us my your his their our not no yes do does did have has had will
    would can could should may might just very too also only even still again what who whom
    whose which when where why how all any some more most much many one ones own same such
    than up down out off about after before while because though although
    """.split()
)
_PRONOUNS = frozenset({"I", "I'm", "I’m", "I'll", "I’ll", "I've", "I’ve", "I'd", "I’d"})


@dataclass(frozen=True)
class _Sentence:
    index: int
    text: str
    score: float
    words: frozenset[str]


class OfflineBackend(RecapBackend):
    """Extractive recaps with no model. See the module docstring."""

    name = "offline"

    def __init__(self, counter: TokenCounter | None = None) -> None:
        self.counter = counter or get_counter()

    def message_recap(self, request: RecapRequest) -> RecapResult:
        text = _clean(request.text)
        if not text:
            return RecapResult(memory="")
        sentences = self._score(text)
        seen = [_content_words(recap) for recap in request.earlier_recaps]
        # A recap is a fraction of its message (that is what makes memory fit a budget), but
        # never longer than the hard cap.
        cap = min(request.max_tokens, max(24, round(0.4 * self.counter.count(text))))
        name = request.name.strip()
        prefix = f"{name}: " if name else ""
        budget = cap - self.counter.count(prefix)
        chosen: list[_Sentence] = []
        used = 0
        for sentence in sorted(sentences, key=lambda s: (-s.score, s.index)):
            if _repeats(sentence.words, [c.words for c in chosen] + seen):
                continue
            cost = self.counter.count(sentence.text) + (1 if chosen else 0)
            if used + cost <= budget:
                chosen.append(sentence)
                used += cost
        if not chosen:  # nothing fits whole (or all repeats): cut the best sentence to size
            best = max(sentences, key=lambda s: (s.score, -s.index))
            chosen = [_truncated(best, budget, self.counter)]
        body = " ".join(_balanced(s.text) for s in sorted(chosen, key=lambda s: s.index))
        return RecapResult(memory=f"{prefix}{body}".strip())

    def _score(self, text: str) -> list[_Sentence]:
        glued = _ABBREVIATION.sub(lambda m: m.group(1) + "\u2024", text)  # one-dot leader
        raw = [s.strip().replace("\u2024", ".") for s in _SENTENCE.findall(glued) if s.strip()]
        if not raw:
            raw = [text]
        last = len(raw) - 1
        scored = []
        for index, sentence in enumerate(raw):
            words = _WORD.findall(sentence)
            lowered = [w.lower() for w in words]
            numbers = len(_NUMBER.findall(sentence))
            # Names and places: capitalised words past the first (which any sentence has).
            names = sum(1 for w in words[1:] if w[0].isupper() and w not in _PRONOUNS)
            salient = sum(1 for w in lowered if w in SALIENT)
            content = [w for w in lowered if w not in STOPWORDS]
            score = 3.0 * min(numbers, 3) + 2.0 * min(names, 4) + 1.5 * min(salient, 4)
            score += 0.15 * min(len(content), 12)
            if index == 0:
                score += 1.0
            elif index == last:
                score += 0.3
            if len(words) < 4:
                score -= 1.5
            if sentence.rstrip("\"'”’)").endswith("?"):
                score -= 0.5
            scored.append(_Sentence(index, sentence, score, frozenset(content)))
        return scored


def _clean(text: str) -> str:
    text = _MARKUP.sub("", text)
    return _SPACE.sub(" ", text).strip()


def _balanced(sentence: str) -> str:
    """A sentence cut out of dialogue may keep half a pair of quotes: drop them then."""
    if sentence.count('"') % 2:
        sentence = sentence.replace('"', "")
    for opening, closing in (("“", "”"), ("(", ")")):
        if sentence.count(opening) != sentence.count(closing):
            sentence = sentence.replace(opening, "").replace(closing, "")
    return sentence.strip()


def _content_words(text: str) -> frozenset[str]:
    return frozenset(w.lower() for w in _WORD.findall(text) if w.lower() not in STOPWORDS)


def _repeats(words: frozenset[str], others: list[frozenset[str]]) -> bool:
    if not words:
        return False
    return any(other and len(words & other) / len(words) >= 0.8 for other in others)


def _truncated(sentence: _Sentence, budget: int, counter: TokenCounter) -> _Sentence:
    if counter.count(sentence.text) <= budget:
        return sentence
    words = sentence.text.split()
    low, high = 1, len(words)
    while low < high:  # the longest prefix of words (plus an ellipsis) that fits
        middle = (low + high + 1) // 2
        if counter.count(" ".join(words[:middle]) + "…") <= budget:
            low = middle
        else:
            high = middle - 1
    return _Sentence(sentence.index, " ".join(words[:low]) + "…", sentence.score, sentence.words)
