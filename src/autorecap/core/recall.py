"""The recall tier: for each turn, the past pieces that the newest message asks about.

The query is the newest user message, and the reply before it when that message names too
little to search for ("yes, that one"; `query_text`). A search of the chat (the store's
full-text index, `store.search`) gives the messages that match, best first;
here they become pieces of text (`recall_pieces`), each saying where it comes from
("[scene 3 · #120 · 8 May 2023]") so that the model can place it, and leaving out what the
prompt already carries: a message still visible in it, a recap the running recap already says.
The best pieces that fit `recall_max_tokens` go into their own slot (`RECALL_KEY`), in the
order they were said. What a query asks (its words, the kind of answer it wants) is
`asking`'s; what of a long message answers it, `excerpts`'.

May import: core.
"""

from __future__ import annotations

import bisect
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any

from autorecap.core.asking import answer_kinds, asked_words, query_words, text_words
from autorecap.core.data import get_data, get_memory
from autorecap.core.excerpts import (
    answer_after,
    answer_part_weight,
    excerpt_answer_weight,
    excerpt_of,
    told_part,
)
from autorecap.core.memory import place_in_slot
from autorecap.core.model import Chat, Message
from autorecap.core.out_of_character import in_character
from autorecap.core.scenes import break_indexes
from autorecap.core.slots import ExtensionPrompts
from autorecap.core.tokens import TokenCounter
from autorecap.settings import Settings

RECALL_KEY = "auto_recap_memory_recall"
"""The recall tier's slot."""
SHORTEST_CUT = 40
"""The least room, in tokens, worth a piece cut to fit it (`recall_text`): the best pieces are
about `excerpts.PIECE_TOKENS` each, and a budget of 400 left a third of itself unused when the next
one was a little too long. Measured with `autorecap eval` on the dev and generated chats:
planted facts with recall 214 -> 218 of 260 (dev) at 1,000 tokens, 235 -> 237 at 2,000, the
same at 4,000; generated unchanged; answer words up to half a point more."""
ANSWER_BOOST = 1.5
"""A piece whose matching sentences hold the kind of answer the question wants (a number for
"how much", a name for "who") is worth this much more than its text match alone: of two
messages that name the impeller and Patchy Lou, the one with a price answers "how much". One
that tells it outright (a sum to "how much", a name given to "what was it called") is worth
`asking.TOLD_WEIGHT` times more again."""
NEIGHBOURS = (1, 2, 3, -1)
"""Where a best match's neighbours are (after it, then before it): a question names the scene
("the caravan yard at Qasr Melen") where its first message did, while the answer ("thirty-seven
camels") comes a message or two later, in words the search ranks lower."""
NEIGHBOUR_SEEDS = 3
"""The best matches whose neighbours are looked at."""
NEIGHBOUR_SHARE = 0.6
"""A neighbour that holds the kind of answer asked for is worth this share of its match's
score (and `ANSWER_BOOST`); one that does not is not taken. One whose words do not match, or
whose matching part holds no answer, is taken for its sentences that tell one outright
(`excerpts.told_part`): the match names the girl from Merrowgate, the next message says only
"The third of November." Measured with `autorecap eval`, planted facts with recall: dev and
generated 461 / 481 / 489 -> 462 / 482 / 490 of 501, held out 345 -> 346 of 373 at 2,000
tokens."""
ASKS_ALONE = 2
"""The words a search keeps (`asking.query_words`) that make the newest user message the whole
query. The reply before it joined every query once: a narrator's 250 words then outnumbered
the question's five, the search looked for the scene just played, and recall added 1 planted
fact to the running recap's 254 of 300 on the dev chats (none on the generated ones); with the
question alone when it names two things or more, 18 (2 on the generated ones)."""
REPEAT_SHARE = 0.8
"""A piece whose words the running recap already holds in this share is left out."""


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


def query_text(messages: Sequence[Message]) -> str:
    """What a turn asks about: the newest user message; when it names fewer than
    `ASKS_ALONE` things ("yes, that one", "how much was it?"), the reply just before it too,
    which holds what it asks about."""
    for index in range(len(messages) - 1, -1, -1):
        if _is_user(messages[index]) and not _hidden(messages[index]):
            newest = _text(messages[index])
            if len(query_words(newest)) >= ASKS_ALONE:
                return newest.strip()
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
    asked = asked_words(query)
    wanted = answer_kinds(query)
    known_words = text_words(known)
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
            words = text_words(text)
            matches = bool(asked & words)
            if not matches and not (near and kind == "message"):
                continue
            if words and len(words & known_words) >= REPEAT_SHARE * len(words):
                continue  # the running recap says it
            excerpt = excerpt_of(text, asked, counter, wanted) if matches else ""
            # A neighbour is taken for the answer it holds: when its matching part holds none,
            # for its sentences that tell one outright (none: it is not taken).
            told = near and not (matches and excerpt_answer_weight(excerpt, wanted, asked))
            if told:
                excerpt = told_part(text, wanted, asked, counter)
                if not excerpt:
                    continue
            scene = bisect.bisect_left(ends, index) + 1  # breaks end scenes: theirs included
            source = _source(message, index, scene, kind)
            # The answer after a recalled question goes with it (and not again on its own).
            after = index + 1
            answered = ""
            if kind == "message" and after < len(messages) and after not in given:
                # (the next message's answer only when the prompt does not show it already)
                following = _text(messages[after]) if _hidden(messages[after]) else ""
                answered = following and answer_after(excerpt, asked, following, counter, wanted)
                if answered:
                    excerpt = f"{excerpt} → {answered}"
                    source = source.replace(f"#{index}", f"#{index}-{index + 1}", 1)
                    given.add(index + 1)
            weight = excerpt_answer_weight(excerpt, wanted, asked) if wanted else 0.0
            if answered and wanted:  # the reply to a question asked is its answer, wherever
                weight = max(weight, answer_part_weight(answered, wanted, asked))
            if told:
                weight = max(weight, 1.0)
            if weight:
                score *= ANSWER_BOOST * weight
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
    asked, wanted = (
        (asked_words(query), answer_kinds(query)) if query else (frozenset(), frozenset())
    )
    for piece in pieces:
        cost = counter.count(_line(piece)) + 1
        if spent + cost > max_tokens:
            room = max_tokens - spent - (cost - counter.count(piece.text))
            if not asked or room < SHORTEST_CUT:
                continue
            cut = excerpt_of(piece.text, asked, counter, wanted, room)
            if not asked & text_words(cut):
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
    # only one. A message excluded from the memory (the seeds' `exclude`: a retcon, a note)
    # is not recalled either; the recap of the scene it ends still is.
    excluded = bool(get_data(message, "exclude"))
    said = "" if excluded else in_character(_text(message))
    found = [("message", said), ("recap", get_memory(message) if said.strip() else "")]
    scene = get_data(message, "scene_recap_memory")
    if isinstance(scene, str):
        found.append(("scene", scene))
    return [(kind, text) for kind, text in found if text and text.strip()]


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
