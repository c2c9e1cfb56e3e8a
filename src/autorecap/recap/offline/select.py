"""Choosing what a recap keeps: the sentences that tell the most new things per token.

Each sentence is worth the rarity of the content words it adds to what is already chosen
(numbers, names, places and rare words count most, and most of all what a thing is called or a
quoted password; a word said twice counts once), more when it tells of an event a memory must
keep (a promise, a purchase, a move, an injury) or names a sum of money, less when it only
asks. Sentences are taken greedily by worth per token until the budget is spent, then put back
in the order they were said, grouped by speaker ("Caroline: ... Melanie: ..."). The lines of a
running recap are shortened the same way, all at once (`fit_lines`): the room goes to the best
sentences of any line, so a scene full of facts keeps more of its line than one of small talk.
"""

from __future__ import annotations

import heapq
import math
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from functools import lru_cache

from autorecap.core.asking import names_a_sum
from autorecap.core.tokens import TokenCounter
from autorecap.core.words import STOPWORDS
from autorecap.recap.offline.numbers import (
    NUMBER_VALUE,
    SPELLED_SHARE,
    dated_years,
    exact_numbers,
    number_value,
    spelled_number,
)
from autorecap.recap.offline.text import (
    SHORTEST_CLAUSE,
    WORD,
    clause_joints,
    content_words,
    rarity,
    sentences,
)

SALIENT = frozenset(
    """
    promise promised promises swear swore vow vowed owe owes owed debt pay paid buy bought
    sell sold steal stole stolen give gave find found lose lost hide hid hidden reveal revealed
    secret betray betrayed kill killed dead died death wounded injured hurt broke broken love
    kiss kissed marry married engaged wedding divorce divorced pregnant born baby adopt adopted
    hate afraid escape escaped fled attack attacked fight fought capture captured rescue
    rescued arrive arrived leave left return returned meet met named key map letter ring plan
    agreed deal warn warned threat lie lied truth remember forgot poison cure moved move start
    started quit hired fired job promoted promotion exam passed failed won lose diagnosed
    surgery hospital sick accident bought booked signed decided decide going will birthday
    anniversary trip visit visited dating boyfriend girlfriend wife husband sister brother mom
    dad mother father son daughter friend cost costs price priced offer offered
    """.split()
)
"""Words that mark events a memory should keep."""
LABEL_TOKENS = 3
"""What naming a speaker costs ("Caroline: ")."""
MIN_WORTH = 0.2
"""Below this worth per token a sentence is not worth its tokens (scaled with
`COMMON_SHARE`: a rare word alone, a password, stays worth keeping)."""
_DIGIT = re.compile(r"\d")
_POSSESSIVE = re.compile(r"['’]s$")
NAME_BONUS = 2.5
"""Added to a capitalised word inside a sentence (a name, a place)."""
COMMON_SHARE = 0.4
"""The share of its rarity that a lower-case word is worth: rare prose ("a wicker basket, a
green shawl knotted") tells less than a name or a number, and long descriptions are full of
it. Measured with `autorecap eval` at 2,000 tokens, 0.4 against 0.7 before: planted facts in
the running recap 143 of 160 on the dev chats either way, 458 -> 478 of 556 on generated chats
(seeds 1-3), 93 -> 96 of 118 held out; answer words 78.9 -> 79.6%, 89.9 -> 91.5% and
72.2 -> 73.2%. From 0.35 to 0.45 the tuning sets do the same; 0.25 loses again."""
_CAPITAL = re.compile(r"(?<![.!?]\s)(?<!^)\b[A-ZÀ-Ý][a-zà-ÿ'’]+(?:-[A-ZÀ-Ýa-zà-ÿ][a-zà-ÿ'’]*)*")
"""A capitalised word inside a sentence, hyphened parts and all ("Tolliver-Kane")."""


@dataclass(frozen=True)
class Piece:
    """A sentence a recap may keep: who said it, its text, its place in order."""

    position: int
    speaker: str
    text: str
    question: bool = False
    joint: str = ""
    """When the piece is a clause after another of the same sentence: the mark between them
    ("," or " —"), so that kept side by side they read as the sentence did."""


AGE_FLOOR = 0.7
"""What a sentence in the oldest line of a running recap is worth against the same sentence in
the newest line (the lines between in proportion): the older a scene, the less of it stays."""


ELSEWHERE_SHARE = 0.3
"""What a word that another line of the running recap already says is worth in a line (a word
the line itself says is worth nothing more): each scene keeps its own facts, though the cast
and the objects they share come back. Measured with `autorecap eval` at 2,000 tokens, against
each word counted once in all lines (0) and once per line (1): planted facts in the running
recap 147, 146 and 143 of 160 on the dev chats, 482, 488 and 493 of 556 on the generated ones
(seeds 1-3); answer words on the dev chats 81.8, 81.9 and 81.2%."""


def choose(
    pieces: Sequence[Piece],
    budget: int,
    counter: TokenCounter,
    *,
    known: frozenset[str] = frozenset(),
) -> list[Piece]:
    """The pieces worth most per token that fit `budget` (speaker labels counted), in order.
    `known`: words every piece would repeat (the speakers' names), worth little."""
    return choose_across([pieces], budget, counter, known=known)[0]


def choose_across(
    lines: Sequence[Sequence[Piece]],
    room: int,
    counter: TokenCounter,
    *,
    known: frozenset[str] = frozenset(),
    floors: Sequence[Sequence[Piece]] = (),
    ages: Sequence[float] = (),
    fits: Callable[[list[list[Piece]]], bool] | None = None,
) -> list[list[Piece]]:
    """`choose` over the pieces of several lines at once: each line starts from its floor
    (pieces it keeps whatever they cost, outside `room`), and `room` goes to the pieces worth
    most per token in any line, times their line's age factor. What a line already says is
    worth nothing more in it, what another line says `ELSEWHERE_SHARE` of its value. Each
    line names its own speakers, so a label is paid per line.

    Greedy on worth per token, lazily: a piece's worth only falls as words get covered, so
    a piece whose stale worth still tops the heap is rescored, and taken if it stays on top."""
    floors = floors or [()] * len(lines)
    ages = ages or [1.0] * len(lines)
    candidates = [(n, p) for n, pieces in enumerate(lines) for p in pieces if p not in floors[n]]
    profiles = [_profile(p.text, p.question, known) for _n, p in candidates]
    costs = [max(1, counter.count(p.text)) for _n, p in candidates]
    covers: list[set[str]] = [set() for _ in lines]  # the words each line says so far
    covered: set[str] = set()  # and all of them
    for n, floor in enumerate(floors):
        for piece in floor:
            words = _profile(piece.text, piece.question, known)[0]
            covers[n].update(words)
            covered.update(words)
    speakers = [{p.speaker for p in floor} for floor in floors]
    chosen: list[int] = []

    def label(i: int) -> int:
        n, piece = candidates[i]
        return 0 if piece.speaker in speakers[n] or not piece.speaker else LABEL_TOKENS

    def worth(i: int) -> float:
        values, bonus, factor = profiles[i]
        own = covers[candidates[i][0]]
        gain = sum(
            0.0 if w in own else v * ELSEWHERE_SHARE if w in covered else v
            for w, v in values.items()
        )
        cost = costs[i] + label(i)
        return (gain + bonus) / math.pow(cost, 0.85) * factor * ages[candidates[i][0]]

    heap = [(-worth(i), i) for i in range(len(candidates))]
    heapq.heapify(heap)
    spent = 0
    while heap:
        _stale, i = heapq.heappop(heap)
        if spent + costs[i] + label(i) > room:
            continue  # never fits again (the room only shrinks)
        fresh = worth(i)
        if heap and fresh < -heap[0][0]:
            heapq.heappush(heap, (-fresh, i))
            continue
        if fresh < MIN_WORTH:
            break
        chosen.append(i)
        covers[candidates[i][0]].update(profiles[i][0])
        covered.update(profiles[i][0])
        spent += costs[i] + label(i)
        speakers[candidates[i][0]].add(candidates[i][1].speaker)
    kept = [list(floor) for floor in floors]
    for i in chosen:
        n, piece = candidates[i]
        kept[n].append(piece)
    for pieces in kept:
        pieces.sort(key=lambda p: p.position)
    # A speaker is named again each time the turn changes hands, which the greedy pass
    # counted once: drop the chosen pieces that tell least per token until the prose fits
    # (`fits`: the caller's own measure of the whole, headers and all).
    if fits is None:
        budget = room + sum(counter.count(render(floor)) for floor in floors if floor)

        def fits(kept: list[list[Piece]]) -> bool:
            return sum(counter.count(render(pieces)) for pieces in kept if pieces) <= budget

    while chosen and (len(chosen) > 1 or any(floors)) and not fits(kept):
        # Of equal worth, the one said first goes (in order of the lines, then of the text).
        in_order = sorted(chosen, key=lambda i: (candidates[i][0], candidates[i][1].position))
        worst = min(in_order, key=lambda i: _alone(profiles[i], costs[i]) * ages[candidates[i][0]])
        chosen.remove(worst)
        n, piece = candidates[worst]
        kept[n].remove(piece)
    return kept


def _alone(profile: tuple[dict[str, float], float, float], cost: int) -> float:
    values, bonus, factor = profile
    return (sum(values.values()) + bonus) / math.pow(cost, 0.85) * factor


def best(
    pieces: Sequence[Piece], counter: TokenCounter, known: frozenset[str] = frozenset()
) -> Piece:
    """The one piece that tells the most per token (what a recap keeps when it has room for
    only a part of one sentence)."""

    def worth(piece: Piece) -> float:
        values, bonus, factor = _profile(piece.text, piece.question, known)
        return (
            (sum(values.values()) + bonus)
            / math.pow(max(1, counter.count(piece.text)), 0.85)
            * factor
        )

    return max(pieces, key=worth)


def render(pieces: Sequence[Piece]) -> str:
    """Chosen pieces as prose, each speaker named once per run of their sentences."""
    parts: list[str] = []
    speaker: str | None = None
    for at, piece in enumerate(pieces):
        text = piece.text
        if _goes_on(pieces, at):
            text = text.rstrip(".")  # the sentence goes on in the next piece
        elif text[-1:] not in '.!?…"”)':
            text += "."
        if at and _goes_on(pieces, at - 1):
            parts[-1] += f"{pieces[at].joint} {text}"
            continue
        text = text[:1].upper() + text[1:]
        if piece.speaker != speaker:
            speaker = piece.speaker
            parts.append(f"{speaker}: {text}" if speaker else text)
        else:
            parts.append(text)
    return " ".join(parts)


def _goes_on(pieces: Sequence[Piece], at: int) -> bool:
    """Whether the next piece is the clause that followed this one in its sentence."""
    if at + 1 >= len(pieces):
        return False
    after = pieces[at + 1]
    return bool(after.joint) and (
        after.position == pieces[at].position + 1 and after.speaker == pieces[at].speaker
    )


_LABEL = re.compile(r"^([A-ZÀ-Ý][\w'’. -]{0,40}?):\s+(.*)$")
_PARTICLES = frozenset(
    {"of", "the", "de", "del", "van", "von", "la", "le", "du", "da", "al", "bin"}
)


def _named(label: str) -> bool:
    """Whether what comes before a colon is a speaker's name ("Captain Mira", "Dr. Faust")
    rather than the start of a sentence ("The name they want is Ivo Radley: the herbalist",
    "Mark it down: the 13th")."""
    words = label.split()
    return len(words) == 1 or (
        len(words) <= 4 and all(w[:1].isupper() or w in _PARTICLES for w in words)
    )


def parse(body: str) -> list[Piece]:
    """`render`'s prose read back into pieces (to shorten a recap line again)."""
    pieces: list[Piece] = []
    speaker = ""
    for sentence in sentences(body):
        match = _LABEL.match(sentence)
        if match and _named(match.group(1)):
            speaker, sentence = match.group(1), match.group(2)
        if not sentence:
            continue
        # Clauses that `render` joined into one sentence are pieces again, as they were (any
        # sentence long enough to hold two clauses is cut at its clause marks).
        for clause, joint in clause_joints(sentence, 2 * SHORTEST_CLAUSE - 1):
            pieces.append(Piece(len(pieces), speaker, clause, clause.endswith("?"), joint))
    return pieces


def fit_lines(
    lines: list[str],
    budget: int,
    counter: TokenCounter,
    *,
    header: re.Pattern[str],
    known: frozenset[str] = frozenset(),
) -> list[str]:
    """Make recap lines (oldest first) fit `budget` tokens, all of them shortened at once.

    Every line keeps its header and its most telling sentence; the rest of the room goes to
    the sentences that tell the most per token in any line (what a line already says is worth
    nothing more in it, what another line says little, and the older the line the less its
    sentences are worth), so a scene full of facts keeps more than one of small talk. When even
    the most telling sentences do not fit, the oldest lines are dropped. `header`: what opens
    a line and stays (its day and place); `known`: words worth little (the cast, the usual
    places), and a sentence made only of them is kept in the newest line alone."""

    def total(items: Sequence[str]) -> int:
        return sum(counter.count(line) for line in items) + max(0, len(items) - 1)

    if total(lines) <= budget:
        return lines
    split = []
    for line in lines:
        match = header.match(line)
        head = match.group(0) if match else ""
        split.append((head, parse(line[len(head) :])))
    floors = [[best(pieces, counter, known)] if pieces else [] for _head, pieces in split]
    rendered = [_line(head, kept) for (head, _), kept in zip(split, floors, strict=True)]
    while len(split) > 1 and total(rendered) > budget:
        del split[0], floors[0], rendered[0]  # not even its best sentence fits: it goes
    room = budget - total(rendered)
    count = len(split)
    ages = [AGE_FLOOR + (1 - AGE_FLOOR) * i / max(1, count - 1) for i in range(count)]
    # A sentence that says only what most lines say is said once, in the newest line (a
    # line's floor is kept whatever it says).
    fresh = [
        [p for p in pieces if not content_words(p.text) <= known] for _head, pieces in split[:-1]
    ]
    fresh.append(split[-1][1])
    heads = [head for head, _pieces in split]

    def fits(kept: list[list[Piece]]) -> bool:
        return (
            total([_line(head, chosen) for head, chosen in zip(heads, kept, strict=True)]) <= budget
        )

    kept = choose_across(
        fresh, max(0, room), counter, known=known, floors=floors, ages=ages, fits=fits
    )
    return [_line(head, chosen) for head, chosen in zip(heads, kept, strict=True)]


def _line(head: str, pieces: Sequence[Piece]) -> str:
    return f"{head}{render(pieces)}"


RARE = 4.0
"""A word this rare (English zipf frequency under 3) is news even alone in a sentence."""
KNOWN_VALUE = 0.3
"""What a known word is worth (a speaker's name, a word every line says)."""


def _profile(
    text: str, question: bool, known: frozenset[str]
) -> tuple[dict[str, float], float, float]:
    """What a sentence is worth: its content words' values (a known word little), its bonus
    for events, and the factor for questions and slight remarks."""
    values, bonus, factor = _plain_profile(text, question)
    if known and not known.isdisjoint(values):
        values = {w: KNOWN_VALUE if w in known else v for w, v in values.items()}
    return values, bonus, factor


@lru_cache(maxsize=65536)
def _plain_profile(text: str, question: bool) -> tuple[dict[str, float], float, float]:
    words = content_words(text)
    values = _word_values(text)
    # In sorted order: a sum of floats in set order (string hashes differ per process) could
    # break a tie one way in one process and the other way in another.
    content = {w: values.get(w, 0.0) for w in sorted(words)}
    events = sum(1 for w in words if w in SALIENT)
    factor = 0.6 if question else 1.0
    short = len(text.split()) <= 4 and not events
    plain = (
        not _DIGIT.search(text)
        and not _CAPITAL.search(text)
        and not any(spelled_number(w) for w in words)
    )
    if short and plain and all(rarity(w) < RARE for w in words):
        factor *= 0.4  # a short remark with no number, name, event or rare word ("A classic
        # arrangement."); "Chrysanthemum." as a password is not one
    # An event with nothing else ("Promise.", "Agreed.") tells nothing of what was promised.
    bonus = 1.5 * min(events, 2) if len(words) > events else 0.0
    if names_a_sum(text):
        bonus += SUM_BONUS
    return content, bonus, factor


SUM_BONUS = 3.0
"""Added to a sentence that names a sum of money ("at ninety-two crowns, guild rate", "Seven
salt-chits, payable on our first payday"): what a thing cost is asked for later, and a long turn
of haggling names other numbers around it. Measured with `autorecap eval` on the dev and
generated chats, planted facts in the running recap 382 / 411 / 420 -> 389 / 416 / 425 of 496
at 1,000 / 2,000 / 4,000 tokens, with recall 422 / 444 / 450 -> 426 / 448 / 452 of 463; 1.5
gained less, 5 the same at 2,000 and less at 1,000."""


_NAMING = re.compile(
    r"\b(?i:called|named|name'?s|name\s+is|known\s+as|password\s+is|code\s+is|word\s+is)"
    r"\s+(?:the\s+|a\s+)?([\"'‘“]?[A-Z0-9][\w'’&.-]*(?:\s+[\w'’&.-]+){0,3})"
)
"""A name given ("is called the Tallow & Thistle", "the code is 4471"): what follows is
capitalised, quoted or a number ("she called her mother" gives nothing)."""
_QUOTED = re.compile(r"(?<=\w[\s:])['‘]([A-Za-z][\w ’-]{2,40}?)['’](?!\w)")
"""A short phrase in single quotes inside a sentence ("it's 'blue heron sleeps' now"); a line
of dialogue in single quotes opens its sentence, or ends in punctuation inside them."""
TOLD_VALUE = 4.0
"""Added to a word that a sentence names something by ("is called the Tallow & Thistle",
"the word is 'blue heron sleeps'"), or quotes: what a memory is asked for later."""


OPENING_NAME_ZIPF = 2.5
"""A capitalised word that opens a sentence is a name when English uses it less often than
this (wordfreq's Zipf scale: "Bluefinch" 0, "Kasimir" 1.4, "Chrysanthemum" 2.6, "Meanwhile"
4.5). Measured with `autorecap eval` at 2,000 tokens against none: planted facts in the running
recap 236 -> 240 of 280 on the dev chats and 500 -> 504 of 556 on the generated ones, with
recall 255 -> 254 and 506 the same (1.5: 239 and 256, 500; 2.0: 239 and 254, 501)."""
_NO_NAME = re.compile(r"ly$|(.)\1\1|^[^aeiouy]+$|^.{1,3}$")
"""What no name looks like though English rarely writes it: a manner ("Sheepishly,"), a sound
drawn out ("Heyyy", "Mmph", "Eep")."""
_OPENING = re.compile(r"(?:^|[.!?…]\s+)[\"“'‘*(\[]*([A-ZÀ-Ý][a-zà-ÿ'’]+)")


def _word_values(text: str) -> dict[str, float]:
    capitals = {_POSSESSIVE.sub("", m.group(0).lower()) for m in _CAPITAL.finditer(text)}
    # A word English hardly knows that opens a sentence is a name all the same ("Bluefinch
    # meant all safe", "Thistledown."): a capital there says nothing, its rarity does.
    for match in _OPENING.finditer(text):
        word = _POSSESSIVE.sub("", match.group(1).lower())
        if rarity(word) > 7.0 - OPENING_NAME_ZIPF and not _NO_NAME.search(word):
            capitals.add(word)
    told = {
        _POSSESSIVE.sub("", w.lower()).strip("'’-")
        for m in (*_NAMING.finditer(text), *_QUOTED.finditer(text))
        for w in WORD.findall(m.group(1))
    }
    raw_words = [_POSSESSIVE.sub("", raw.lower()).strip("'’-") for raw in WORD.findall(text)]
    years = dated_years(text)
    exact = exact_numbers(text)
    values: dict[str, float] = {}
    for word in raw_words:
        value = rarity(word)
        if word in years:
            value = NUMBER_VALUE  # a year is one number, not a four-digit code
        elif _DIGIT.search(word):
            value = number_value(word)
        elif word in exact:
            value = max(value, NUMBER_VALUE)
        elif spelled_number(word):
            value = max(value, NUMBER_VALUE * SPELLED_SHARE)
        elif word in capitals:
            value += NAME_BONUS
        else:
            value *= COMMON_SHARE
        if word in told and word not in STOPWORDS:
            value += TOLD_VALUE
        values[word] = max(values.get(word, 0.0), value)
    return values
