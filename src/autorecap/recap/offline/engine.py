"""The offline engine: recaps with no model at all, extractive and compact.

A recap keeps the sentences (the clauses of a long one) that tell the most per token
(`select.choose`): codes and numbers, names, places, dates and rare words, events a memory must
keep (promises, purchases, moves, injuries), each said once. Sentences are cleaned first
(`text.clean`: no markup, emoji, fillers or the name of the one addressed), said of whom they
are (`text.about`: "you" becomes the other person's name, a leading "I" goes since the recap
names the speaker), and relative times are made dates when the scene's day is known
(`when.resolve`: "yesterday" in a scene of 8 May 2023 is "on 7 May 2023"). A scene recap opens
with its day and place: "[8 May 2023 · Porto]".

The running recap has one line per scene, newest last; when it would pass its cap, its lines
are shortened together (`select.fit_lines`): each keeps its header and its most telling
sentence, and the rest of the room goes to the sentences that tell the most in any of them,
worth less the older their scene, so a scene full of facts keeps more than one of small talk.
Words most lines repeat (the cast, the usual places) and what another line already says are
worth little. The oldest lines are dropped only when even their most telling sentences do not
fit.
Deterministic and fast: arithmetic over words, nothing learned.
"""

from __future__ import annotations

import re
from datetime import date

from autorecap.core.out_of_character import in_character, recapped_text
from autorecap.core.tokens import TokenCounter, get_counter
from autorecap.pacing import pause
from autorecap.recap.backend import (
    CombineRequest,
    MergeRequest,
    RecapBackend,
    RecapRequest,
    RecapResult,
    SceneBreakRequest,
    SceneRecapRequest,
)
from autorecap.recap.offline.cues import Turn, pick_scene_starts, score_scene_starts
from autorecap.recap.offline.select import Piece, best, choose, fit_lines, parse, render
from autorecap.recap.offline.text import (
    about,
    clause_joints,
    clean,
    content_words,
    is_filler,
    sentences,
)
from autorecap.recap.offline.when import day_text, only_when, resolve

_HEADER = re.compile(r"^(- )?(\[[^\]]{1,80}\] )?")
SCENE_SHARE = 0.5
"""The share of a scene's tokens that its recap may take (at most `scene_recap_max_tokens`)."""
_GENERIC = frozenset({"user", "assistant", "system", "narrator", ""})


class OfflineBackend(RecapBackend):
    """Extractive recaps with no model. See the module docstring."""

    name = "offline"

    def __init__(self, counter: TokenCounter | None = None) -> None:
        self.counter = counter or get_counter()

    # --- tier 1: one message -----------------------------------------------------------------

    def message_recap(self, request: RecapRequest) -> RecapResult:
        speaker = request.name.strip()
        other = _other(speaker, request.user, request.char)
        names = _names(request.user, request.char, speaker, *(m.name for m in request.context))
        # A message that is only a note out of character keeps it; no scene does (below).
        text = recapped_text(request.text)
        pieces = _pieces([(speaker, text, False)], names, other, request.day)
        if not pieces:
            return RecapResult(memory="")
        seen = frozenset().union(*(content_words(r) for r in request.earlier_recaps))
        fresh = [p for p in pieces if not _repeats(content_words(p.text), seen)] or pieces
        size = self.counter.count(text)  # what is recapped: no note, no status block
        # A recap is a fraction of its message (that is what makes memory fit a budget), but
        # never longer than the hard cap.
        budget = min(request.max_tokens, max(24, round(0.4 * size)))
        # The sentence that tells the most always has room (within the hard cap): it is why
        # the recap exists.
        top = best(fresh, self.counter, _lowered(names))
        budget = min(request.max_tokens, max(budget, self.counter.count(top.text) + 4))
        chosen = choose(fresh, budget, self.counter, known=_lowered(names))
        if not chosen:
            chosen = [_cut(top, budget - 3, self.counter)]
        return RecapResult(memory=self._capped(render(chosen), request.max_tokens))

    # --- tier 3: one scene -------------------------------------------------------------------

    def scene_recap(self, request: SceneRecapRequest) -> RecapResult:
        """The scene's most telling sentences within the cap, in the order they were said,
        after a header with its day and place."""
        speakers = {m.name for m in request.messages if not m.narrator}
        names = _names(request.user, request.char, *speakers)
        rows: list[tuple[str, str, bool]] = []
        for message in request.messages:
            rows.append((message.name.strip(), in_character(message.text), message.narrator))
        two = len({s for s in speakers if s.lower() not in _GENERIC}) <= 2
        pieces = _pieces(
            rows, names, None, request.day, others=(request.user, request.char) if two else None
        )
        header = _header(request.day, request.place)
        size = sum(self.counter.count(text) for _name, text, _narrator in rows)
        # A scene recap is a fraction of its scene (SCENE_SHARE), within the cap.
        limit = min(request.max_tokens, max(40, round(SCENE_SHARE * size)))
        budget = limit - (self.counter.count(header) if header else 0)
        chosen = choose(pieces, max(8, budget), self.counter, known=_lowered(names))
        body = render(chosen)
        return RecapResult(memory=self._capped(f"{header}{body}", request.max_tokens))

    # --- tier 4: the running recap -----------------------------------------------------------

    def combine(self, request: CombineRequest) -> RecapResult:
        """One line per scene, newest last, held under the cap by shortening the lines
        together, the older the more (see the module docstring)."""
        lines = [line for line in request.previous.splitlines() if line.strip()]
        lines.append(request.line)
        return RecapResult(memory="\n".join(self.fit(lines, request.max_tokens)))

    def fit(self, lines: list[str], budget: int) -> list[str]:
        """Lines of a running recap held under `budget` tokens, the newlines between them
        counted (see `select.fit_lines`)."""
        return fit_lines(lines, budget, self.counter, header=_HEADER, known=recurring_words(lines))

    def shorten(self, line: str, tokens: int) -> str:
        """A recap line shortened to about `tokens` tokens: its header kept, then its most
        telling sentences, at least the one that tells the most (whole: half a sentence
        tells less than one whole)."""
        match = _HEADER.match(line)
        head = match.group(0) if match else ""
        pieces = parse(line[len(head) :])
        if not pieces:
            return line
        budget = tokens - self.counter.count(head)
        chosen = choose(pieces, budget, self.counter) if budget > 0 else []
        return f"{head}{render(chosen or [best(pieces, self.counter)])}"

    # --- the combined recap ------------------------------------------------------------------

    def merge_recaps(self, request: MergeRequest) -> RecapResult:
        """The sentences of all the message recaps that tell the most within the cap (words
        that many recaps repeat, the cast, worth little), in the order they were said: the
        whole chat in short, not its end."""
        lines = [" ".join(recap.split()) for recap in request.recaps if recap.strip()]
        pieces: list[Piece] = []
        for line in lines:
            for piece in parse(line):
                pieces.append(
                    Piece(len(pieces), piece.speaker, piece.text, piece.question, piece.joint)
                )
        if not pieces:
            return RecapResult(memory="")
        chosen = choose(pieces, request.max_tokens, self.counter, known=recurring_words(lines))
        return RecapResult(memory=self._capped(render(chosen), request.max_tokens))

    # --- tier 2: scene breaks ----------------------------------------------------------------

    def find_scene_breaks(self, request: SceneBreakRequest) -> list[int]:
        """The scene starts the cues find in the range, as the indexes of the messages before
        them."""
        messages = request.messages
        if len(messages) < 2:
            return []
        candidates = score_scene_starts([Turn(m.text, m.name, m.narrator) for m in messages])
        offset = messages[0].index
        starts = pick_scene_starts(
            candidates,
            count=len(messages),
            minimum_length=max(1, request.minimum),
            first_allowed=request.earliest - offset + 1,
            last_allowed=request.latest - offset + 1,
        )
        return [offset + start - 1 for start in starts]

    def _capped(self, text: str, max_tokens: int) -> str:
        if self.counter.count(text) <= max_tokens:
            return text
        return cut_to(text, max_tokens, self.counter)


RECURRING_SHARE = 0.25
"""A word in at least this share of a running recap's lines (and three of them) is known."""


def recurring_words(lines: list[str]) -> frozenset[str]:
    """The words many lines of a running recap say: the cast and the usual places, which
    every scene mentions and no question needs told again."""
    counts: dict[str, int] = {}
    for line in lines:
        for word in content_words(line):
            counts[word] = counts.get(word, 0) + 1
    least = max(3, RECURRING_SHARE * len(lines))
    return frozenset(w for w, n in counts.items() if n >= least)


def _pieces(
    rows: list[tuple[str, str, bool]],
    names: frozenset[str],
    other: str | None,
    day: date | None,
    *,
    others: tuple[str, str] | None = None,
) -> list[Piece]:
    """The sentences of `(speaker, text, narrator)` rows worth considering, cleaned."""
    pieces: list[Piece] = []
    before: frozenset[str] = frozenset()  # the words of the message before
    for speaker, text, narrator in rows:
        if len(pieces) % 64 == 0:
            pause()
        # What a message that asks nothing said: an answer to a question ("Red or blue?" /
        # "The blue wire.") is no echo of it.
        said_before, before = before, frozenset() if "?" in text else content_words(text)
        spoken_to = other
        if others is not None and speaker in others:
            spoken_to = others[1] if speaker == others[0] else others[0]
        if spoken_to and spoken_to.lower() in _GENERIC:
            spoken_to = None
        kept = False  # whether the clause before was kept (a clause goes on from it only then)
        for clause, joint in (
            c
            for p in _parts(text)
            for s in sentences(p)
            if not _stage_direction(s)
            for c in clause_joints(s)
        ):
            cleaned = clean(clause, names)
            joint = joint if kept else ""
            kept = False
            if not cleaned:
                continue
            words = content_words(cleaned)
            if not words or is_filler(words) or only_when(cleaned):
                continue
            if (
                len(cleaned.split()) <= ECHO_WORDS
                and words <= said_before
                and not _NEGATION.search(cleaned)
            ):
                continue  # an echo of what was just said ("Eleven." after "eleven coppers")
            cleaned = resolve(cleaned, day)
            label = "" if narrator or speaker.lower() in _GENERIC else speaker
            # (a card with a generic name, "Narrator", is no narrator message: its "you" is
            # the player all the same)
            if label or (spoken_to and not narrator):
                said = about(cleaned, spoken_to, speaker_named=bool(label))
            else:
                said = cleaned
            first = clause.lstrip()[:1]
            if joint and said[:1].lower() == first.lower():
                said = first + said[1:]  # as written: the sentence goes on ("Sleep, little...")
            elif joint:
                joint = ""  # its first words were dropped ("so", "I"): a sentence of its own
            question = cleaned.rstrip(" \"'”").endswith("?")
            pieces.append(Piece(len(pieces), label, said, question, joint))
            kept = True
    return pieces


ECHO_WORDS = 4
"""A clause this short whose words the message before all said repeats it, and tells nothing
(unless the message before asked, or the clause denies it: "Not under the mat.")."""
_NEGATION = re.compile(r"\b(?:not|no|never|nor|none|nothing)\b|n[’']t\b", re.I)


_ACTION = re.compile(r"\*([^*\n]{1,600})\*\s+(?=[\"“A-Z])")
"""A gesture between asterisks before the words said ("*leans in* Stamped Hobbs & Carrow,
1911."), with no full stop between: a sentence of its own, so that a recap can keep the words
without the gesture."""
_OPEN_END = frozenset({"the", "a", "an", "of", "to", "in", "on", "at", "and", "her", "his"})
"""Words an action does not end with: "*brings the* Kestrel *round*" is one sentence."""


_STAGE_DIRECTION = re.compile(r"\*\s*[a-z][a-z'’-]*(?:\s+[a-z][a-z'’-]*)?[.!?,]?\s*\*[.!?]?")
"""A gesture of one or two words between asterisks ("*snorts*", "*dryly*", "*mutters
darkly.*"): how something was said, not what happened."""


def _stage_direction(sentence: str) -> bool:
    return bool(_STAGE_DIRECTION.fullmatch(sentence.strip()))


def _parts(text: str) -> list[str]:
    """`text` cut after each gesture that opens it or a sentence (see `_ACTION`)."""
    if "*" not in text:
        return [text]
    parts: list[str] = []
    start = 0
    for match in _ACTION.finditer(text):
        before = text[: match.start()].rstrip()
        words = match.group(1).split()
        if before and before[-1] not in '.!?…"”*':
            continue  # emphasis inside a sentence ("against the *Kestrel* herself")
        if not words or words[-1].lower() in _OPEN_END:
            continue
        parts.append(text[start : match.end()])
        start = match.end()
    parts.append(text[start:])
    return [part for part in parts if part.strip(" *")]


def _header(day: date | None, place: str) -> str:
    parts = [day_text(day)] if day else []
    if place:
        parts.append(place)
    return f"[{' · '.join(parts)}] " if parts else ""


def _other(speaker: str, user: str, char: str) -> str | None:
    if speaker == user:
        return char
    if speaker == char:
        return user
    return None


def _names(*texts: str) -> frozenset[str]:
    return frozenset(
        part
        for text in texts
        for part in (text.strip(), *text.split())
        if part and part[0].isupper()
    )


def _lowered(names: frozenset[str]) -> frozenset[str]:
    return frozenset(n.lower() for n in names)


def _repeats(words: frozenset[str], seen: frozenset[str]) -> bool:
    """A sentence says again what was said (a number new to it is news)."""
    fresh = words - seen
    if any(any(c.isdigit() for c in w) for w in fresh):
        return False
    return bool(words) and len(words & seen) / len(words) >= 0.8


def _cut(piece: Piece, budget: int, counter: TokenCounter) -> Piece:
    return Piece(piece.position, piece.speaker, cut_to(piece.text, max(4, budget), counter))


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
