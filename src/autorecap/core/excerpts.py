"""What of a long message answers the query: its sentences that best match the words asked,
with those around a match that hold the kind of answer wanted (`excerpt_of`), how well an
excerpt answers (`excerpt_answer_weight`), and the start of the next message when the matched
part asks the same question (`answer_after`).

May import: core.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

from autorecap.core.asking import (
    TOLD_WEIGHT,
    answer_kinds,
    answer_weight,
    tells_answer,
    text_words,
)
from autorecap.core.tokens import TokenCounter

PIECE_TOKENS = 120
"""The longest piece: a long message is cut to its sentences that match the query."""
ANSWER_TOKENS = 40
"""The longest answer taken from the message after a recalled question (`answer_after`)."""
ANSWER_REACH = 6
"""How many of the next message's sentences are looked at for a told answer (`_answer_at`): a
long reply puts the slate down, says whose debt is whose, then tells the sum, as far in as a
told answer is kept after a match (`_TOLD_AROUND`). Measured with `autorecap eval` on the dev
and generated chats, planted facts with recall: 456 -> 458 of 501 at 1,000 tokens (against
three sentences), the same at 2,000 and 4,000; five or eight did the same."""
QUESTION_WORDS = 3
"""The fewest words of a question whose answer is taken along ("Orrin?" asks nothing)."""
_SENTENCE = re.compile(r"(?<=[.!?…])\s+|\n+")
_MARKUP = re.compile(r"[*_~`]+")
_ACTION = re.compile(r"\*(?![A-Z][\w'’-]*(?:\s+[A-Z][\w'’-]*)+\*)[^*]*\*")
"""A gesture between asterisks ("*She leans in and whispers.*", "*Nods.*"); a name in italics
("That's the *Marguerite Bell*", two words or more with capitals) is none."""
_ANNOUNCED = re.compile(
    r"\b(?:a|an|one|the|its|his|her|their)\s+(?:[\w'’-]+\s+){0,2}?"
    r"(?:name|word|words|number|phrase|code|password|figure|sum|inscription)\.?[\"”’']?\s*$",
    re.I,
)
"""A sentence that announces what the next one tells: "in small worn capitals, there's a
name.", "they spell out a word.", "whoever sees it says one word." Stories tell a name, a word
or a figure read off a tag or a page this way, in a sentence of its own ("ELSA SANDBERG," I
read out. "WHELKSTONE."), which names nothing the question asks and, for a word, has no
quotes (`_answer_weights`). Not a date, as often an evening out."""
_NOT_ANNOUNCED = re.compile(
    r"(?:\b(?:never|not|without|nobody|no\s+one)\b|n['’]t\b)[^.!?]*\b(?:say|says|said|spoke|speak"
    r"|utter(?:s|ed)?)\b"
    r"|\b(?:have|has|had|keeps?|kept|gives?|gave|breaks?|broke|take|took)\s+(?:my|your|his|her"
    r"|their|our)\s+word\b"
    r"|\b(?:forg[eo]t(?:ten)?|lost|lose|remember(?:ed)?|know|knew)\s+(?:a|an|the|its|his|her"
    r"|their|my|your|our)\s+(?:[\w'’-]+\s+){0,2}?(?:name|word|number)",
    re.I,
)
"""What only looks like an announcement: a word not said ("he hasn't said a word"), a word
given ("you have my word"), a name forgotten ("I forgot his name")."""
ANNOUNCED_WORDS = 25
"""The longest sentence, in words, taken as told by the one announcing it. Measured with
`autorecap eval` on the dev and generated chats: with no limit, one planted fact lost at 1,000
tokens; at 12 words, the collar's name ("ELSA SANDBERG," I read out, and then I sit back...,
16 words) lost at every budget."""
_TELL_ME = re.compile(
    r"\b(?:tell|remind|show)\s+(?:me|us)\s+(?:about(?!\s+it\b)|what|when|where|who|whose|how|which|again)\b"
    r"|\b(?:walk|take)\s+(?:me|us)\s+through\b",
    re.I,
)
"""A request to tell, which asks as a question does ("Edie, tell me about Walt. When he died,
what happened."): the reply is taken along as its answer (`answer_after`). With the reply's
told answer counted wherever the request sits in the piece (`answer_part_weight`), measured
with `autorecap eval`, planted facts with recall: dev and generated 502 / 533 / 544 -> 505 /
535 / 546 of 561 at 1,000 / 2,000 / 4,000 tokens, held out 366 / 405 / 408 -> 367 / 405 /
408 of 433, none lost."""
_LETTER = re.compile(r"[^\W_]")
_AROUND = ((1, 1 / 2), (2, 1 / 2), (3, 1 / 3), (-1, 1 / 3), (-2, 1 / 4))
"""Where, from a matching sentence, one that holds the kind of answer wanted is kept with it, and
at what share of its worth: the answer comes up to three sentences after the match ("Jory lent
him the lot. Eleven pounds four shillings"), or up to two before it ("That's the Marguerite
Bell [...] She brings the mail"); one that tells it outright (`asking.answer_weight`) counts
more. Measured with `autorecap eval` on the dev and generated chats (against two sentences
after and none before): planted facts with recall 247 -> 249 of 300 and 501 -> 505 of
556 at 1,000 tokens, unchanged at 2,000, 274 -> 275 of 300 (dev) at 4,000."""
_TOLD_AROUND = ((4, 1 / 2), (5, 1 / 2))
"""Further on, only a sentence that tells the answer outright is kept with a match: a long turn
names the thing asked about, then talks around it before the sum comes ("...SAVINGS BANK
printed in blue in the corner. [three sentences] He said it was $2,400"). Measured with
`autorecap eval` on the dev and generated chats: planted facts with recall 420 / 440 / 448 ->
422 / 444 / 450 of 463 at 1,000 / 2,000 / 4,000 tokens; steps 4-6 gained less."""


def excerpt_of(
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
    answer (`answer_kinds`: a number, a name, a date, words said), the sentences around a
    match that hold one (`_AROUND`, and further on one that tells it outright: `_TOLD_AROUND`)
    are worth a share of it, since the answer often comes a
    sentence or two later ("I had a boat with my brother. [...] She was called the Patience
    Dray.")."""
    plain = " ".join(_MARKUP.sub("", text).split())
    if counter.count(plain) <= limit:
        return plain
    sentences = [s for s in _SENTENCE.split(plain) if s.strip()]
    found = [asked & text_words(sentence) for sentence in sentences]
    spread = {word: sum(1 for words in found if word in words) for word in asked}
    answers = _answer_weights(sentences, wanted, asked)
    worth: dict[int, float] = {}
    for i, words in enumerate(found):
        value = sum(1 / spread[word] for word in words)
        if not value:
            continue
        # a match that also holds the kind of answer asked for beats one that only matches
        worth[i] = max(worth.get(i, 0.0), value * (1 + 0.25 * answers[i]))
        for step, share in _AROUND:  # what follows a match (or comes just before it)
            j = i + step
            if not 0 <= j < len(sentences):
                continue
            if answers[j] or (step == 1 and not wanted):
                worth[j] = max(worth.get(j, 0.0), value * share * max(1.0, answers[j]))
            elif step == 1:
                worth[j] = max(worth.get(j, 0.0), value / 3)
        for step, share in _TOLD_AROUND:
            j = i + step
            if j < len(sentences) and answers[j] >= TOLD_WEIGHT:
                worth[j] = max(worth.get(j, 0.0), value * share * answers[j])
    keep: list[int] = []
    spent = 0
    for i in sorted(worth, key=lambda i: (-worth[i], i)):
        cost = counter.count(sentences[i]) + 1
        if spent + cost <= limit:
            keep.append(i)
            spent += cost
    if not keep:
        best = max(worth, key=lambda i: (worth[i], -i)) if worth else None
        return around(sentences[best] if best is not None else plain, asked, counter, limit)
    out: list[str] = []
    for i in sorted(keep):
        if out and i - 1 not in keep:
            out.append("…")
        out.append(sentences[i])
    return " ".join(out)


def excerpt_answer_weight(excerpt: str, wanted: frozenset[str], asked: frozenset[str]) -> float:
    """The best `answer_weight` of a sentence of the excerpt that matches the question, or
    of one just after or just before such a sentence (0: none holds a wanted answer). The one
    before counts because an answer is often told just before the sentence that names what it
    answers: "'Pike and lantern,' I told him. That was the word Brann gave us". Measured with
    `autorecap eval`, planted facts with recall: dev and generated unchanged (462 / 482 / 490
    of 501), held out 341 / 380 / 385 -> 343 / 382 / 385 of 413."""
    sentences = _SENTENCE.split(excerpt)
    matched = [bool(asked & text_words(sentence)) for sentence in sentences]
    return max(
        (
            weight
            for i, weight in enumerate(_answer_weights(sentences, wanted, asked))
            if any(0 <= i + step < len(sentences) and matched[i + step] for step in (0, -1, 1))
        ),
        default=0.0,
    )


def answer_part_weight(answer: str, wanted: frozenset[str], asked: frozenset[str]) -> float:
    """The best `answer_weight` of the sentences of an answer taken after a recalled question
    (`answer_after`): the question matched, so its reply answers it whatever words it shares."""
    return max(_answer_weights(_sentences(answer), wanted, asked), default=0.0)


def _answer_weights(
    sentences: Sequence[str], wanted: frozenset[str], asked: frozenset[str]
) -> list[float]:
    """Each sentence's `answer_weight`; one that follows a sentence announcing it
    (`_ANNOUNCED`) tells the answer outright when it holds one of a kind wanted, or, to a
    question about words, whatever it says. Measured with `autorecap eval`, planted facts with
    recall: dev and generated 484 / 513 / 522 -> 488 / 517 / 526 of 541 at 1,000 / 2,000 /
    4,000 tokens, held out 343 / 383 / 386 -> 345 / 385 / 388 of 413, none lost; a sentence
    announced that holds no answer of a wanted kind, told for any question, lost one held out.
    Leaving out what only looks like an announcement (`_NOT_ANNOUNCED`) and dates changed
    nothing measured on the corpora of the next round; asking for a verb that shows or reads
    ("there's", "spells out", "bears") lost two held out and one dev ("says one word.")."""
    if not wanted:
        return [0.0] * len(sentences)
    weights = [answer_weight(sentence, wanted, asked) for sentence in sentences]
    for i in range(1, len(sentences)):
        if (
            (weights[i] or "words" in wanted)
            and _ANNOUNCED.search(sentences[i - 1])
            and not _NOT_ANNOUNCED.search(sentences[i - 1])
            and len(sentences[i].split()) <= ANNOUNCED_WORDS
        ):
            weights[i] = max(weights[i], TOLD_WEIGHT)
    return weights


def told_part(
    text: str, wanted: frozenset[str], asked: frozenset[str], counter: TokenCounter
) -> str:
    """The first two sentences of `text` that tell an answer of a wanted kind outright
    (`asking.tells_answer`), within `ANSWER_TOKENS`; "" when none does. What a message next
    to a match offers when its words do not match: the match names the thing asked about
    ("the girl from Merrowgate"), the next message says only "The third of November."
    """
    told = [s for s in _sentences(text) if tells_answer(s, wanted, asked)][:2]
    return around(" ".join(told), frozenset(), counter, ANSWER_TOKENS) if told else ""


def answer_after(
    excerpt: str,
    asked: frozenset[str],
    following: str,
    counter: TokenCounter,
    wanted: frozenset[str],
) -> str:
    """When the matched part of a message asks a question about what is asked now ("What did
    Fell owe us?"), the start of the next message, which answers it ("That comes to four
    silver and six pence"), though it shares no word with the query: from the one of its first
    three sentences that answers best (`_answer_at`: one that tells the answer outright before
    one that holds its kind in passing; a told answer up to `ANSWER_REACH` sentences in), else
    from its first, as many as fit `ANSWER_TOKENS`;
    spoken sentences before gestures ("*She leans in.* The password is..."), unless only the
    gestures hold the kind of answer wanted ("*He names his price: seven marks*"). A question
    of under `QUESTION_WORDS` words counts when it follows a match and asks for the same kind
    of answer ("Two to Carrowmere. How much?"); so does a request to tell about what is asked
    (`_TELL_ME`: "tell me about Walt"). "" otherwise. `following`: the next message's
    text (the caller leaves out one the prompt still shows)."""
    said = _SENTENCE.split(excerpt)
    asks = any(
        (
            s.rstrip().rstrip("\"”’'").endswith("?")
            and (
                (len(s.split()) >= QUESTION_WORDS and asked & text_words(s))
                # a short question after a match asks the same kind ("... Carrowmere. How much?")
                or (i > 0 and asked & text_words(said[i - 1]) and wanted & answer_kinds(s))
            )
        )
        # a request to tell ("Edie, tell me about Walt. When he died, what happened.")
        or (_TELL_ME.search(s) and asked & text_words(" ".join(said[i : i + 2])))
        for i, s in enumerate(said)
    )
    if not asks:
        return ""
    raw = following
    spoken = " ".join(_ACTION.sub(" ", raw).split())
    sentences = _sentences(spoken) if _LETTER.search(spoken) else []
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
    return around(sentences[first], frozenset(), counter, ANSWER_TOKENS)  # its start


def _sentences(text: str) -> list[str]:
    return [s for s in _SENTENCE.split(" ".join(_MARKUP.sub("", text).split())) if s.strip()]


def _answer_at(
    sentences: Sequence[str], wanted: frozenset[str], asked: frozenset[str]
) -> int | None:
    """Which sentence the answer starts at, if one holds a wanted kind of answer: the first that
    tells it outright ("That's the Marguerite Bell"), up to `ANSWER_REACH` sentences in; else
    the first of the first three that holds one in passing ("said Callum"). A told answer
    further in beats one in passing near the start."""
    if not wanted:
        return None
    weights = [answer_weight(s, wanted, asked) for s in sentences[:ANSWER_REACH]]
    best = max(weights[:3], default=0.0)
    if best < TOLD_WEIGHT:
        told = next((i for i, w in enumerate(weights) if w >= TOLD_WEIGHT), None)
        if told is not None:
            return told
    return weights.index(best) if best else None


def around(
    text: str, asked: frozenset[str], counter: TokenCounter, limit: int = PIECE_TOKENS
) -> str:
    """The words of `text` around the first one asked about (none: from its start), within
    `limit` tokens."""
    words = text.split()
    at = next((i for i, w in enumerate(words) if asked & text_words(w)), 0)
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
