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
from autorecap.pacing import pause
from autorecap.recap.backend import (
    CombineRequest,
    RecapBackend,
    RecapRequest,
    RecapResult,
    SceneBreakRequest,
    SceneRecapRequest,
)
from autorecap.recap.offline.scenes import (
    fit_lines,
    pick_scene_starts,
    pick_sentences,
    score_scene_starts,
)

_SENTENCE = re.compile(r"[^.!?…]+(?:[.!?…]+[\"'”’)\]]*|$)")
# Abbreviations whose full stop does not end a sentence ("Mr. Pell"): glued before splitting.
_ABBREVIATION = re.compile(r"\b(Mr|Mrs|Ms|Dr|St|Capt|Lt|Sgt|Prof|Mt|No|vs|etc)\.(?=\s)")
_WORD = re.compile(r"[A-Za-zÀ-ÖØ-öø-ÿ][A-Za-zÀ-ÖØ-öø-ÿ'’-]*")
_NUMBER = re.compile(r"\d[\d,.:/-]*\d|\d")
_MARKUP = re.compile(r"[*_~`]+")
_FIRST_PERSON = re.compile(r"\b(?:I|I'm|I’m|I'll|I’ll|I've|I’ve|I'd|I’d|me|my|mine|we|our|us)\b")
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
        known = _name_words(
            request.name, request.user, request.char, *(m.name for m in request.context)
        )
        sentences = self._score(text, known)
        seen = [_content_words(recap) for recap in request.earlier_recaps]
        # A recap is a fraction of its message (that is what makes memory fit a budget), but
        # never longer than the hard cap.
        cap = min(request.max_tokens, max(24, round(0.4 * self.counter.count(text))))
        name = request.name.strip()
        prefix = f"{name}: " if name else ""
        budget = cap - self.counter.count(prefix)
        # The best sentence always has room (up to the hard cap): it is why the recap exists.
        best = max(sentences, key=lambda s: (s.score, -s.index))
        hard = request.max_tokens - self.counter.count(prefix)
        budget = min(hard, max(budget, self.counter.count(best.text)))
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
        memory = f"{prefix}{body}".strip()
        if self.counter.count(memory) > request.max_tokens:  # no spaces to cut at, or a long name
            memory = cut_to(memory, request.max_tokens, self.counter)
        return RecapResult(memory=memory)

    def scene_recap(self, request: SceneRecapRequest) -> RecapResult:
        """The scene's most informative sentences (from its message recaps where it has them),
        without repeats, within the cap, in the order they happened."""
        candidates: list[tuple[float, str]] = []
        kept_words: list[frozenset[str]] = []
        known = _name_words(request.user, request.char, *(m.name for m in request.messages))
        for message in request.messages:
            pause()
            source = _strip_name(message.recap, message.name) if message.recap else message.text
            name = message.name.strip()
            for sentence in self._score(_clean(source), known):
                if _repeats(sentence.words, kept_words):
                    continue
                kept_words.append(sentence.words)
                text = _balanced(sentence.text)
                if name and _FIRST_PERSON.search(text):  # "I" needs saying who
                    text = f"{name}: {text}"
                candidates.append((sentence.score, text))
        chosen = pick_sentences(candidates, request.max_tokens, self.counter)
        if not chosen and candidates:
            best = max(candidates, key=lambda c: c[0])[1]
            chosen = [
                _truncated(
                    _Sentence(0, best, 0.0, frozenset()), request.max_tokens, self.counter
                ).text
            ]
        return RecapResult(memory=" ".join(chosen))

    def combine(self, request: CombineRequest) -> RecapResult:
        """One line per scene, newest last; when over the cap, the oldest lines are shortened
        (and only then dropped), never the newest."""
        lines = [line for line in request.previous.splitlines() if line.strip()]
        new_line = f"- {request.scene_name}: {request.scene_recap}".strip()
        lines.append(new_line)
        fitted = fit_lines(lines, request.max_tokens, self.counter, self.shrink_line)
        return RecapResult(memory="\n".join(fitted))

    def shrink_line(self, line: str, known: frozenset[str] = frozenset()) -> str:
        """A shorter version of one running recap line: its most informative sentence, where
        names the rest of the recap mentions (`known`) count for little. A line that is one
        sentence already stays as it is (cutting words loses facts)."""
        label, sep, body = line.partition(": ")
        if not sep:
            label, body = "", line
        sentences = self._score(body, known)
        if len(sentences) <= 1:
            return line
        best = max(sentences, key=lambda s: (s.score, -s.index))
        shorter = _balanced(best.text)
        return f"{label}{sep}{shorter}" if sep else shorter

    def find_scene_break(self, request: SceneBreakRequest) -> int | None:
        """The strongest scene start in the range, as the index of the message before it."""
        messages = request.messages
        if len(messages) < 2:
            return None
        candidates = score_scene_starts(
            [m.text for m in messages],
            narrators=[m.name.lower() == "narrator" for m in messages],
            times=[None] * len(messages),
        )
        offset = messages[0].index
        starts = pick_scene_starts(
            candidates,
            count=len(messages),
            minimum_length=1,
            first_allowed=request.earliest - offset + 1,
            last_allowed=request.latest - offset + 1,
        )
        if not starts:
            return None
        best = max(starts, key=lambda i: candidates[i - 1].score)
        return offset + best - 1

    def _score(self, text: str, known: frozenset[str] = frozenset()) -> list[_Sentence]:
        """Score each sentence; `known` are the speakers' names, which every line mentions and
        which therefore tell little (rare names and places tell much)."""
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
            capitalised = [w for w in words[1:] if w[0].isupper() and w not in _PRONOUNS]
            rare = sum(1 for w in capitalised if w not in known)
            familiar = len(capitalised) - rare
            salient = sum(1 for w in lowered if w in SALIENT)
            content = [w for w in lowered if w not in STOPWORDS]
            score = 5.0 * min(numbers, 3) + 2.5 * min(rare, 3) + 0.3 * min(familiar, 3)
            score += 1.0 * min(salient, 4)
            score += 0.15 * min(len(content), 12)
            if index == 0:
                score += 0.5
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


def _name_words(*texts: str) -> frozenset[str]:
    return frozenset(w for text in texts for w in _WORD.findall(text) if w[0].isupper())


def _strip_name(recap: str, name: str) -> str:
    prefix = f"{name.strip()}: "
    return recap[len(prefix) :] if name.strip() and recap.startswith(prefix) else recap


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


def cut_to(text: str, budget: int, counter: TokenCounter) -> str:
    """The longest prefix of `text` (by characters, ending in "…") within `budget` tokens."""
    if counter.count(text) <= budget:
        return text
    low, high = 0, len(text)
    while low < high:
        middle = (low + high + 1) // 2
        if counter.count(text[:middle].rstrip() + "…") <= budget:
            low = middle
        else:
            high = middle - 1
    return text[:low].rstrip() + "…" if low else ""


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
