"""The recall tier: for each turn, the past pieces that the newest message asks about.

The query is the newest user message and the reply before it (`query_text`). A search of the
chat (the store's full-text index, `store.search`) gives the messages that match, best first;
here they become pieces of text (`recall_pieces`), each saying where it comes from
("[scene 3 · #120 · 8 May 2023]") so that the model can place it, and leaving out what the
prompt already carries: a message still visible in it, a recap the running recap already says.
The best pieces that fit `recall_max_tokens` go into their own slot (`RECALL_KEY`), in the
order they were said.

May import: core.
"""

from __future__ import annotations

import bisect
import re
import unicodedata
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from functools import lru_cache
from typing import Any

from autorecap.core.data import get_data, get_memory
from autorecap.core.memory import place_in_slot
from autorecap.core.model import Chat, Message
from autorecap.core.out_of_character import in_character
from autorecap.core.scenes import break_indexes
from autorecap.core.slots import ExtensionPrompts
from autorecap.core.tokens import TokenCounter
from autorecap.core.words import STOPWORDS, other_forms, stems
from autorecap.settings import Settings

RECALL_KEY = "auto_recap_memory_recall"
"""The recall tier's slot."""
PIECE_TOKENS = 120
"""The longest piece: a long message is cut to its sentences that match the query."""
SHORTEST_CUT = 40
"""The least room, in tokens, worth a piece cut to fit it (`recall_text`): the best pieces are
about `PIECE_TOKENS` each, and a budget of 400 left a third of itself unused when the next
one was a little too long. Measured with `autorecap eval` on the dev and generated chats:
planted facts with recall 214 -> 218 of 260 (dev) at 1,000 tokens, 235 -> 237 at 2,000, the
same at 4,000; generated unchanged; answer words up to half a point more."""
ANSWER_TOKENS = 40
"""The longest answer taken from the message after a recalled question (`_answer_after`)."""
QUESTION_WORDS = 3
"""The fewest words of a question whose answer is taken along ("Orrin?" asks nothing)."""
ANSWER_BOOST = 1.5
"""A piece whose matching sentences hold the kind of answer the question wants (a number for
"how much", a name for "who") is worth this much more than its text match alone: of two
messages that name the impeller and Patchy Lou, the one with a price answers "how much"."""
NEIGHBOURS = (1, 2, 3, -1)
"""Where a best match's neighbours are (after it, then before it): a question names the scene
("the caravan yard at Qasr Melen") where its first message did, while the answer ("thirty-seven
camels") comes a message or two later, in words the search ranks lower."""
NEIGHBOUR_SEEDS = 3
"""The best matches whose neighbours are looked at."""
NEIGHBOUR_SHARE = 0.6
"""A neighbour that holds the kind of answer asked for is worth this share of its match's
score (and `ANSWER_BOOST`); one that does not is not taken."""
MOST_WORDS = 24
"""A query keeps at most this many words (a long message asks about a few things at once)."""
REPEAT_SHARE = 0.8
"""A piece whose words the running recap already holds in this share is left out."""
_WORD = re.compile(r"[^\W_]+(?:[-'’.:/][^\W_]+)*")
_SENTENCE = re.compile(r"(?<=[.!?…])\s+|\n+")
_MARKUP = re.compile(r"[*_~`]+")
_ACTION = re.compile(r"\*[^*]*\*")
"""A gesture between asterisks ("*She leans in and whispers.*")."""
_TOKEN = re.compile(r"[^\W_]+")
_POSSESSIVE = re.compile(r"['’]s$")
_ASKING = frozenset(
    """
    remember recall again tell told know think mean ask asked anyway still wait guess sure
    right okay ok yeah yes no hey hi hello please thanks thank many much
    """.split()
)
"""Words of asking rather than of what is asked about."""
_NOT_ASKED = STOPWORDS | _ASKING
_NAMING_CUE = re.compile(r"\b(called|named)\s*[?!.]*\s*$", re.I)
"""The word that asks for a name at the end of a question ("what is the hen called?"): not
what the question is about."""


@dataclass(frozen=True)
class RecallPiece:
    """One recalled piece: the message it comes from, what it is, and its text."""

    index: int
    kind: str
    """"message" (its text), "recap" (its message recap) or "scene" (the scene recap it holds)."""
    text: str
    source: str
    """Where it comes from, as the injection shows it: "scene 3 · #120 · 8 May 2023"."""
    score: float


def query_words(text: str) -> list[str]:
    """The words of a query worth searching for, in order, each once: no stopwords or words
    of asking; a code such as "14-02-27" stays whole."""
    found: list[str] = []
    text = "\n".join(_NAMING_CUE.sub("", line) for line in text.splitlines())
    for match in _WORD.finditer(text.lower()):
        word = _POSSESSIVE.sub("", match.group(0).strip("'’.:/-"))  # "Vane's" asks of Vane
        plain = word.replace("'", "").replace("’", "")
        if len(word) < 2 and not word.isdigit():
            continue
        if plain in STOPWORDS or word in STOPWORDS or word in _ASKING:
            continue
        if word not in found:
            found.append(word)
    return found[:MOST_WORDS]


def query_forms(query: str, words: Sequence[str]) -> list[str]:
    """The other forms of the irregular verbs among `words` (the words a search keeps of
    `query`), which a stemmer does not reach: "paid" for "pay". Not of a name ("Drew",
    "Rose" written with a capital inside the query), nor a stopword or a word of asking."""
    named = {m.group(0).lower() for m in _CAPITALISED.finditer(query)}
    found: list[str] = []
    for word in words:
        if word in named:
            continue
        for form in other_forms(word):
            if form not in words and form not in found and form not in _NOT_ASKED:
                found.append(form)
    return found


def query_text(messages: Sequence[Message]) -> str:
    """What a turn asks about: the newest user message, and the reply just before it (an
    answer to "yes, that one" is in what it answers)."""
    for index in range(len(messages) - 1, -1, -1):
        if _is_user(messages[index]) and not _hidden(messages[index]):
            before = next(
                (
                    _text(m)
                    for m in reversed(messages[:index])
                    if not _is_user(m) and not _hidden(m)
                ),
                "",
            )
            return f"{_text(messages[index])}\n{before}".strip()
    return ""


# A plain dict may stand in the list for a message (the store and the refresh take them): read
# what is needed the way both are read.


def _is_user(message: Mapping[str, Any]) -> bool:
    return bool(message.get("is_user"))


def _hidden(message: Mapping[str, Any]) -> bool:
    return bool(message.get("is_system"))


def _text(message: Mapping[str, Any]) -> str:
    value = message.get("mes")
    return value if isinstance(value, str) else ""


def recall_pieces(
    chat: Chat,
    hits: Sequence[tuple[int, float]],
    query: str,
    counter: TokenCounter,
    *,
    known: str = "",
    breaks: Sequence[int] | None = None,
) -> list[RecallPiece]:
    """The pieces `hits` ((message index, score), best first) give, best first (a piece that
    holds the kind of answer asked for counts `ANSWER_BOOST` times its score): what of each
    message is not in the prompt (its text when hidden, else its recap when hidden, else the
    recap of the scene it ends), none that `known` (the running recap) already says.
    `breaks`: the scene breaks' indexes, in order, when the caller has them (a refresh keeps
    them); else they are read from the chat."""
    messages = chat.messages
    asked = _asked(query)
    wanted = answer_kinds(query)
    known_words = _words(known)
    ends = list(breaks) if breaks is not None else break_indexes(messages)
    given: set[int] = set()  # messages said already: in a piece, or as an answer in one
    pieces: list[RecallPiece] = []
    for index, score, near in _with_neighbours(hits, len(messages), wanted):
        if not 0 <= index < len(messages) or index in given:
            continue
        message = messages[index]
        for kind, text in _texts(message):
            if kind != "scene" and not _hidden(message):
                continue  # the message is in the prompt already
            if kind == "scene" and not _scene_hidden(messages, ends, index):
                continue  # its scene's messages are in the prompt already
            if not asked & _words(text):
                continue
            words = _words(text)
            if words and len(words & known_words) >= REPEAT_SHARE * len(words):
                continue  # the running recap says it
            excerpt = _excerpt(text, asked, counter, wanted)
            scene = bisect.bisect_left(ends, index) + 1  # breaks end scenes: theirs included
            source = _source(message, index, scene, kind)
            # The answer after a recalled question goes with it (and not again on its own).
            if kind == "message" and index + 1 < len(messages) and index + 1 not in given:
                answered = _answer_after(excerpt, asked, messages[index + 1], counter, wanted)
                if answered:
                    excerpt = f"{excerpt} → {answered}"
                    source = source.replace(f"#{index}", f"#{index}-{index + 1}", 1)
                    given.add(index + 1)
            if wanted and _answers(excerpt, wanted, asked):
                score *= ANSWER_BOOST
            elif near:
                continue  # a neighbour is taken for the answer it holds
            pieces.append(RecallPiece(index, kind, excerpt, source, score))
            given.add(index)
            break
    pieces.sort(key=lambda p: -p.score)
    return pieces


def _with_neighbours(
    hits: Sequence[tuple[int, float]], count: int, wanted: frozenset[str]
) -> list[tuple[int, float, bool]]:
    """The hits, then (when the question wants a kind of answer) the `NEIGHBOURS` of the best
    `NEIGHBOUR_SEEDS` that are no hit themselves, at `NEIGHBOUR_SHARE` of their score; each
    with whether it is a neighbour."""
    found = [(index, score, False) for index, score in hits]
    if not wanted:
        return found
    matched = {index for index, _ in hits}
    for index, score in hits[:NEIGHBOUR_SEEDS]:
        for step in NEIGHBOURS:
            near = index + step
            if 0 <= near < count and near not in matched:
                matched.add(near)
                found.append((near, score * NEIGHBOUR_SHARE, True))
    return found


def _scene_hidden(messages: Sequence[Message], ends: Sequence[int], index: int) -> bool:
    """Whether the scene that ends at `index` has hidden messages (auto-hide hides a scene
    from its start): a scene wholly in the prompt needs no recap of it."""
    at = bisect.bisect_left(ends, index)
    start = ends[at - 1] + 1 if at > 0 else 0
    return _hidden(messages[min(start, index)])


def recall_text(
    pieces: Sequence[RecallPiece],
    template: str,
    max_tokens: int,
    counter: TokenCounter,
    query: str = "",
) -> tuple[str, list[RecallPiece]]:
    """The best pieces that fit `max_tokens` through the template (`{{recall}}`), in the order
    they were said; and the pieces it holds. With the `query`, a piece too long for the room
    left is cut to what of it matches the query best, when that room is worth a piece."""
    if max_tokens <= 0:
        return "", []
    frame = counter.count(template.replace("{{recall}}", "")) if template.strip() else 0
    spent = frame
    chosen: list[RecallPiece] = []
    asked, wanted = (_asked(query), answer_kinds(query)) if query else (frozenset(), frozenset())
    for piece in pieces:
        cost = counter.count(_line(piece)) + 1
        if spent + cost > max_tokens:
            room = max_tokens - spent - (cost - counter.count(piece.text))
            if not asked or room < SHORTEST_CUT:
                continue
            cut = _excerpt(piece.text, asked, counter, wanted, room)
            if not asked & _words(cut):
                continue
            piece = replace(piece, text=cut)
            cost = counter.count(_line(piece)) + 1
            if spent + cost > max_tokens:
                continue
        chosen.append(piece)
        spent += cost
    if not chosen:
        return "", []
    chosen.sort(key=lambda p: (p.index, p.kind))
    lines = "\n".join(_line(p) for p in chosen)
    text = template.replace("{{recall}}", lines) if template.strip() else lines
    return text, chosen


def set_recall_slot(slots: ExtensionPrompts, text: str, settings: Settings) -> None:
    """Register the recall injection (an empty one when there is nothing to recall)."""
    place_in_slot(slots, RECALL_KEY, text, settings, "recall")


def _texts(message: Message) -> list[tuple[str, str]]:
    # A player's note out of character is no memory: nor is the recap of a message that is
    # only one.
    said = in_character(_text(message))
    found = [("message", said), ("recap", get_memory(message) if said.strip() else "")]
    scene = get_data(message, "scene_recap_memory")
    if isinstance(scene, str):
        found.append(("scene", scene))
    return [(kind, text) for kind, text in found if text and text.strip()]


@lru_cache(maxsize=4096)
def _words(text: str) -> frozenset[str]:
    """A text's words as the index reads them: runs of letters and digits, lower case, accents
    folded, stemmed ("Kessler's" holds "kessler", "counting" holds "count", "14/02/27" holds
    "14", "02" and "27"). Cached: the running recap and the same old messages are read again
    turn after turn."""
    plain = text.lower()
    if not plain.isascii():
        folded = unicodedata.normalize("NFKD", plain)
        plain = "".join(c for c in folded if not unicodedata.combining(c))
    return frozenset(stems(set(_TOKEN.findall(plain)) - STOPWORDS))


def _asked(query: str) -> frozenset[str]:
    """The words of a query, as `_words` reads a text (the other forms of its irregular verbs
    too)."""
    words = query_words(query)
    return frozenset().union(*(_words(word) for word in [*words, *query_forms(query, words)]))


def _excerpt(
    text: str,
    asked: frozenset[str],
    counter: TokenCounter,
    wanted: frozenset[str] = frozenset(),
    limit: int = PIECE_TOKENS,
) -> str:
    """The text, or when it is long its sentences that best match the words asked (and what
    follows each, which often answers it), within `PIECE_TOKENS`, in their order; a sentence
    too long for that is cut around the first word asked.

    A sentence is worth the words asked that it holds, each by how few of the message's
    sentences hold it: a word found once points at its sentence, a word every sentence shares
    (the scene's place, the cast) at none in particular. When the question wants a kind of
    answer (`answer_kinds`: a number, a name, a date), the two sentences after a match are
    worth half of it if they hold one, since the answer often comes a sentence or two later
    ("I had a boat with my brother. [...] She was called the Patience Dray.")."""
    plain = " ".join(_MARKUP.sub("", text).split())
    if counter.count(plain) <= limit:
        return plain
    sentences = [s for s in _SENTENCE.split(plain) if s.strip()]
    found = [asked & _words(sentence) for sentence in sentences]
    spread = {word: sum(1 for words in found if word in words) for word in asked}
    answers = [bool(wanted) and _holds_answer(s, wanted, asked) for s in sentences]
    worth: dict[int, float] = {}
    for i, words in enumerate(found):
        value = sum(1 / spread[word] for word in words)
        if not value:
            continue
        # a match that also holds the kind of answer asked for beats one that only matches
        worth[i] = max(worth.get(i, 0.0), value * (1.25 if answers[i] else 1.0))
        for step in (1, 2):  # what follows a match, worth a little less
            j = i + step
            if j < len(sentences) and (answers[j] or (step == 1 and not wanted)):
                worth[j] = max(worth.get(j, 0.0), value / 2)
            elif j < len(sentences) and step == 1:
                worth[j] = max(worth.get(j, 0.0), value / 3)
    keep: list[int] = []
    spent = 0
    for i in sorted(worth, key=lambda i: (-worth[i], i)):
        cost = counter.count(sentences[i]) + 1
        if spent + cost <= limit:
            keep.append(i)
            spent += cost
    if not keep:
        best = max(worth, key=lambda i: (worth[i], -i)) if worth else None
        return _around(sentences[best] if best is not None else plain, asked, counter, limit)
    out: list[str] = []
    for i in sorted(keep):
        if out and i - 1 not in keep:
            out.append("…")
        out.append(sentences[i])
    return " ".join(out)


_KIND_CUES = (
    (
        "number",
        re.compile(
            r"\b(how (much|many|long|far|old)|what (number|code|combination|price|sum|amount)"
            r"|cost|price|pay|paid|owe|(fares?|fees?|rent|bill|charged?|wages?|salary)\b)",
            re.I,
        ),
    ),
    ("date", re.compile(r"\b(when|what (date|day|time|year|month)|how long ago)\b", re.I)),
    ("name", re.compile(r"\b(who|whom|whose|which|name[ds]?|called)\b", re.I)),
    ("place", re.compile(r"\b(where|address|what (street|town|city|village|country))\b", re.I)),
)
_NUMBER = re.compile(
    r"\d|\b(one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|twenty|thirty|"
    r"forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand|half|dozen)\b"
    # old money says its number in one word ("fourpence", "tuppence", "ha'penny"), in lower
    # case: "Penny" and "Spence" are names
    r"|(?-i:\b[a-z]*pence\b|\b(?:ha'?|half)?penny\b|\bfarthings?\b)",
    re.I,
)
_DATE = re.compile(
    r"\d|\b(jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\b|"
    r"\b(mon|tues|wednes|thurs|fri|satur|sun)day\b|\b(yesterday|tomorrow|tonight|morning|"
    r"evening|night|week|month|year|spring|summer|autumn|winter)\b",
    re.I,
)
_CAPITALISED = re.compile(r"(?<![.!?…]\s)(?<!^)\b[A-Z][\w'’-]+")


def answer_kinds(query: str) -> frozenset[str]:
    """The kinds of answer a question wants, from its question words: "number", "date",
    "name", "place" (none for a message that asks nothing)."""
    return frozenset(kind for kind, cue in _KIND_CUES if cue.search(query))


def _holds_answer(sentence: str, wanted: frozenset[str], asked: frozenset[str]) -> bool:
    """Whether a sentence holds an answer of a wanted kind that the question does not
    already say: a number, a date, or a name (a capitalised word not at its start)."""
    if ("number" in wanted and _NUMBER.search(sentence)) or (
        "date" in wanted and _DATE.search(sentence)
    ):
        return True
    if wanted & {"name", "place"}:
        return any(not (asked & _words(m.group(0))) for m in _CAPITALISED.finditer(sentence))
    return False


def _answers(excerpt: str, wanted: frozenset[str], asked: frozenset[str]) -> bool:
    """Whether a sentence of the excerpt that matches the question holds a wanted answer."""
    return any(
        _holds_answer(sentence, wanted, asked)
        for sentence in _SENTENCE.split(excerpt)
        if asked & _words(sentence)
    )


def _answer_after(
    excerpt: str,
    asked: frozenset[str],
    following: Message,
    counter: TokenCounter,
    wanted: frozenset[str],
) -> str:
    """When the matched part of a message asks a question about what is asked now ("What did
    Fell owe us?"), the start of the next message, which answers it ("That comes to four
    silver and six pence"), though it shares no word with the query: from its first sentence
    that holds the kind of answer wanted, else from its first, as many as fit `ANSWER_TOKENS`;
    spoken sentences before gestures ("*She leans in.* The password is..."), unless only the
    gestures hold the kind of answer wanted ("*He names his price: seven marks*"). A question
    of under `QUESTION_WORDS` words counts when it follows a match and asks for the same kind
    of answer ("Two to Carrowmere. How much?"). "" otherwise, and when the next message is in
    the prompt."""
    said = _SENTENCE.split(excerpt)
    asks = any(
        s.rstrip().rstrip("\"”’'").endswith("?")
        and (
            (len(s.split()) >= QUESTION_WORDS and asked & _words(s))
            # a short question after a match asks the same kind ("... Carrowmere. How much?")
            or (i > 0 and asked & _words(said[i - 1]) and wanted & answer_kinds(s))
        )
        for i, s in enumerate(said)
    )
    if not asks or not _hidden(following):
        return ""
    raw = _text(following)
    spoken = " ".join(_ACTION.sub(" ", raw).split())
    sentences = _sentences(spoken) if _WORD.search(spoken) else []
    if not sentences:
        sentences = _sentences(raw)  # all gesture: the gesture is the answer
    elif wanted and _answer_at(sentences, wanted, asked) is None:
        told = _sentences(raw)
        if _answer_at(told, wanted, asked) is not None:
            sentences = told  # the answer is told, not said ("*He names his price*")
    if not sentences:
        return ""
    first = _answer_at(sentences, wanted, asked) or 0
    taken: list[str] = []
    for sentence in sentences[first:]:
        if counter.count(" ".join([*taken, sentence])) > ANSWER_TOKENS:
            break
        taken.append(sentence)
    if taken:
        return " ".join(taken)
    return _around(sentences[first], frozenset(), counter, ANSWER_TOKENS)  # its start


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE.split(" ".join(_MARKUP.sub("", text).split())) if s.strip()]


def _answer_at(
    sentences: Sequence[str], wanted: frozenset[str], asked: frozenset[str]
) -> int | None:
    """Which of the first three sentences first holds a wanted kind of answer, if any."""
    return next(
        (i for i, s in enumerate(sentences[:3]) if wanted and _holds_answer(s, wanted, asked)),
        None,
    )


def _around(
    text: str, asked: frozenset[str], counter: TokenCounter, limit: int = PIECE_TOKENS
) -> str:
    """The words of `text` around the first one asked about (none: from its start), within
    `limit` tokens."""
    words = text.split()
    at = next((i for i, w in enumerate(words) if asked & _words(w)), 0)
    low, high = at, at + 1
    while True:
        grown = False
        for low_next, high_next in ((low - 1, high), (low, high + 1)):
            if low_next >= 0 and high_next <= len(words):
                piece = " ".join(words[low_next:high_next])
                if counter.count(piece) + 2 <= limit:
                    low, high, grown = low_next, high_next, True
        if not grown:
            break
    return ("…" if low else "") + " ".join(words[low:high]) + ("…" if high < len(words) else "")


def _source(message: Message, index: int, scene: int, kind: str) -> str:
    parts = [f"scene {scene}"]
    if kind != "scene":
        parts.append(f"#{index}")
    moment = message.send_time
    if moment is not None:
        parts.append(f"{moment.day} {moment:%B %Y}")
    if kind == "recap":
        parts.append("recap")
    if kind == "scene":
        parts.append("scene recap")
    return " · ".join(parts)


def _line(piece: RecallPiece) -> str:
    return f"- [{piece.source}] {piece.text}"
