"""The offline engine's reading of chat text: sentences, cleaned of what a memory need not keep,
said of whom they are, and weighed by what they tell.

- **Units**: a message's sentences (abbreviations such as "Mr." do not end one).
- **Cleaning**: markup and emoji go; so do the fillers a chat opens its sentences with ("oh",
  "lol", "honestly", "wow,") and the name of the person spoken to ("Mel," ... ", Caroline!").
- **Who**: in a two-person chat, "you" is the other person, so it becomes their name ("You'd be
  a great counselor" from Melanie: "Caroline would be a great counselor"); a leading "I" goes,
  since the recap says who speaks.
- **Weight**: a word tells more the rarer it is in English (wordfreq's Zipf scale: "the" 7.7,
  "lake" 4.8, "pottery" 3.7, an invented name 0); numbers, names and dates tell most.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from functools import lru_cache

from wordfreq import zipf_frequency

from autorecap.core.words import STOPWORDS

_SENTENCE_END = re.compile(r"[.!?…]+[\"'”’)\]*_]*(?=\s|$)|\n+")
_ABBREVIATION = re.compile(r"\b(Mr|Mrs|Ms|Dr|St|Capt|Lt|Sgt|Prof|Mt|No|vs|etc|Jr|Sr)\.(?=\s)")
_MARKUP = re.compile(r"[*_~`]+")
_EMOJI = re.compile(
    "[\U0001f000-\U0001faff\u2600-\u27bf\u2b00-\u2bff\ufe0f\u200d\u20e3\U000e0000-\U000e007f]+"
)
_SPACE = re.compile(r"\s+")
_REPEATED = re.compile(r"([!?])[!?1]+")
WORD = re.compile(r"[A-Za-zÀ-ÖØ-öø-ÿ0-9][A-Za-zÀ-ÖØ-öø-ÿ0-9'’-]*")
_NUMBER = re.compile(r"\d")
_POSSESSIVE = re.compile(r"['’]s$")
_FILLER_START = re.compile(
    r"^(?:(?:oh+|ah+|aw+|wow+|whoa|omg|lol+|lmao|haha\w*|hehe\w*|hmm+|mm+|um+|uh+|er+|well|so"
    r"|ok(?:ay)?|k|yeah+|yea|yep|yup|yes+|sure|right|honestly|seriously|totally"
    r"|literally|anyway|anyways|btw|great|awesome|cool|nice|amazing|thanks|thank\s+you|thx|ty"
    r"|ugh+|oof|yay+|hey+|hi+|hello|man|dude|wait|oh\s+my\s+god|oh\s+no|god|jeez|geez"
    r"|aha|ha|okey|alright|all\s+right|look|listen|see|huh|phew|damn|dang|gosh|ooh+|yikes"
    r"|hooray|woo+hoo+|oops|whew|wowza|omfg|lmfao|rofl|xd|pfft|meh|bruh|sis|bro)\b"
    r"[\s,.!?…:;-]*)+",
    re.IGNORECASE,
)
_FIRST_PERSON_START = re.compile(r"^(?:I'm|I’m|I am|I)\s+", re.IGNORECASE)
_FIRST_PERSON_MODAL = {
    "I've": "has",
    "I’ve": "has",
    "I'll": "will",
    "I’ll": "will",
    "I'd": "would",
    "I’d": "would",
}


def _with_s(verb: str) -> str:
    """The form a verb takes after a name: "counts", "watches", "carries", "stays"."""
    if verb.endswith(("s", "sh", "ch", "x", "z", "o")):
        return verb + "es"
    if verb.endswith("y") and verb[-2:-1] not in tuple("aeiou"):
        return verb[:-1] + "ies"
    return verb + "s"


_PLAIN_VERBS = {
    verb: _with_s(verb)
    for verb in """
    forget need want know think like love hate owe remember promise mean feel seem look keep
    get make take leave find give bring buy sell come see tell work live sound call win lose
    play eat drink read write drive sleep stay start stop help ask go pay say try
    count ride walk run talk speak hear hold carry wait watch stand sit fall fly follow open
    close turn move pull push pick choose check change fix break build burn catch climb cook
    cross cry dance decide deliver die dig draw dream earn enjoy enter escape expect explain
    fail fear fight fill finish guess hide hope hunt hurry imagine join jump kill kiss laugh
    lead learn lend listen lock marry matter meet miss mind notice offer order own pack pass
    plan plant pour pray prefer prepare pretend protect prove reach realise realize receive
    refuse remain repair reply rest return ring rise risk save search send serve share shoot
    shout show sing smell smile spend steal swim swear teach throw touch travel trust
    understand use visit wake wash wear whisper wish worry
    step hand nod shake grab slip lean glance shrug stare sigh frown grin wince squint crouch
    kneel peer duck haul drag toss tuck lift lower raise slide stumble scramble taste
    breathe blink swallow pause hesitate knock press rub scratch wipe unfold unlock unwrap
    """.split()
}
"""Verbs that take an "s" after a name ("if you forget" -> "if Teo forgets"); not those whose
past is the same word ("put", "cut", "set"), which may be either."""
_THIRD_PERSON_VERB = {
    "have": "has",
    "are": "is",
    "were": "was",
    "do": "does",
    "don't": "doesn't",
    "don’t": "doesn't",
    "haven't": "hasn't",
    "haven’t": "hasn't",
    "aren't": "isn't",
    "aren’t": "isn't",
    "weren't": "wasn't",
    "weren’t": "wasn't",
}
_AUXILIARY = "|".join(re.escape(v) for v in sorted(_THIRD_PERSON_VERB, key=len, reverse=True))
"""The verbs that agree with a name in any clause ("you are" -> "Teo is"), as a pattern."""
_SECOND_PERSON = re.compile(
    r"\b(you're|you’re|youre|you've|you’ve|you'll|you’ll|you'd|you’d|yours|your|ur|u"
    r"|you(?!\s+(?:guys|all|two|both|lot|people|folks)\b))\b"  # "you guys": more than one
    # the word after it, unless another "you": a verb agrees (`_named`)
    r"(?:(\s+)(?!(?:you|your|yours|ur|u)\b|you['’])([a-z'’]+)\b)?",
    re.IGNORECASE,
)
_CLAUSE_WORDS = frozenset(
    """
    if when and but so because unless until before after while once that than as what where
    why how whether know knew think thought hope guess bet believe suppose swear wish sure glad
    sorry
    """.split()
)
_DETERMINERS = frozenset("the a an this these those every any each whatever whichever".split())


_OPENERS = "\"“‘'([*_"


def _clause_start(text: str, end: int) -> bool:
    """Whether a "you" at `end` is the subject of its clause: after the start, a comma or a
    colon, a word that opens a clause ("if you forget", "than you ride") or a noun after a
    determiner ("the name you want"); not the object of a verb ("I saw you leave", "did you
    forget"). An opening quote, bracket or asterisk just before changes nothing ("(if you
    count", "*You count")."""
    before = text[max(0, end - 60) : end].rstrip().rstrip(_OPENERS).rstrip()
    if not before:
        return not text[:end].strip().strip(_OPENERS)
    if before[-1] in ",;:—.!?":
        return True
    words = [w.lstrip(_OPENERS) for w in before.lower().split()]
    if words[-1] in _CLAUSE_WORDS:
        return True
    return len(words) > 1 and words[-2] in _DETERMINERS and words[-1].isalpha()


_SECOND_FORMS = {
    "you're": "{} is",
    "you’re": "{} is",
    "youre": "{} is",
    "you've": "{} has",
    "you’ve": "{} has",
    "you'll": "{} will",
    "you’ll": "{} will",
    "you'd": "{} would",
    "you’d": "{} would",
    "yours": "{}'s",
    "your": "{}'s",
    "ur": "{}'s",
    "you": "{}",
    "u": "{}",
}
_STOP_PLAIN = frozenset(w.replace("'", "") for w in STOPWORDS)
_FILLER_WORDS = frozenset(
    """
    lol haha omg wow cool nice great awesome amazing thanks thank love glad happy sorry good
    fun sounds sound totally definitely absolutely literally honestly seriously exactly true
    right sure agree know think feel guess hope wish mean see look looks yeah yep nope okay
    miss hear heard tell glad congrats congratulations proud excited sweet cute wonderful
    fantastic incredible perfect beautiful lovely crazy wild insane same hooray yay woohoo
    yikes ugh lmao hahaha hehe aww omfg wtf dang damn gosh wow whoa oops fair classic
    problem deal night morning bye hey hello hi thx ty please welcome cheers
    """.split()
)
"""Words of reaction: a sentence made only of these (and stopwords) tells nothing to remember."""


@dataclass(frozen=True)
class Unit:
    """One sentence of one message, cleaned, with what the scoring needs."""

    position: int
    """Its place in the scene (message order, then sentence order)."""
    speaker: str
    text: str
    words: frozenset[str]
    """Its content words, lower case."""
    question: bool


def sentences(text: str) -> list[str]:
    """A text's sentences: they end at ".", "!", "?" or "…" before a space, or at a line
    break ("$14.25" and "Mr. Pell" stay whole)."""
    glued = _ABBREVIATION.sub(lambda m: m.group(1) + "\u2024", text)
    found: list[str] = []
    start = 0
    for match in _SENTENCE_END.finditer(glued):
        found.append(glued[start : match.end()])
        start = match.end()
    found.append(glued[start:])
    return [s.strip().replace("\u2024", ".") for s in found if s.strip()]


_CLAUSE_BREAK = re.compile(r"(?<=[,;:])\s+|\s+[—–]\s*|\s+-\s+|(?<=—)")
LONG_SENTENCE = 20
"""Words above which a sentence is weighed clause by clause: a long sentence of narration
mostly describes, and the clause that holds the name or the number is what memory needs."""
SHORTEST_CLAUSE = 6


def clauses(sentence: str) -> list[str]:
    """A long sentence's clauses (at commas, semicolons, colons and dashes, none shorter
    than `SHORTEST_CLAUSE` words); a short sentence whole."""
    return [clause for clause, _joint in clause_joints(sentence)]


_APPOSITION = re.compile(r"^(?:[A-ZÀ-Ý][\w'’.-]*\s+){0,2}[A-ZÀ-Ý][\w'’.-]*,\s*$")
"""A name alone between commas ("a physio, Saskia Thorne, who..."): it belongs to the clause
before it, which it names, not to the one after."""


def clause_joints(sentence: str, longest: int = LONG_SENTENCE) -> list[tuple[str, str]]:
    """`clauses`, each with the mark that joined it to the one before ("," or "—"; "" for
    the first): two clauses kept side by side are written as one sentence again. `longest`:
    the most words of a sentence kept whole."""
    if len(sentence.split()) <= longest:
        return [(sentence, "")]
    parts = [p for p in _CLAUSE_BREAK.split(sentence) if p.strip()]
    merged: list[str] = []
    for part in parts:
        if merged and len(merged[-1].split()) < SHORTEST_CLAUSE:
            merged[-1] = f"{merged[-1]} {part}"
        elif merged and _APPOSITION.match(part):
            merged[-1] = f"{merged[-1]} {part}"  # a name goes with what it names
        else:
            merged.append(part)
    if len(merged) > 1 and len(merged[-1].split()) < SHORTEST_CLAUSE:
        last = merged.pop()
        merged[-1] = f"{merged[-1]} {last}"
    found: list[tuple[str, str]] = []
    joint = ""
    for clause in merged:
        bare = clause.strip().rstrip(",;:—–- ")
        found.append((bare, joint))
        tail = clause.strip()[len(bare) :].strip()
        joint = tail[:1] if tail[:1] and tail[:1] in ",;:" else " —"
    return found


def clean(sentence: str, names: frozenset[str] = frozenset()) -> str:
    """A sentence without markup, emoji, leading fillers or the name of the one addressed."""
    text = _MARKUP.sub("", sentence)
    text = _EMOJI.sub("", text)
    text = _REPEATED.sub(r"\1", text)
    text = _SPACE.sub(" ", text).strip().strip("\"'“”‘’ ")
    for _ in range(3):
        stripped = _FILLER_START.sub("", text).lstrip(" ,.!?…-—")
        for name in names:  # "Mel, you won't believe..." / "...so proud, Caroline!"
            if stripped.startswith(name) and stripped[len(name) : len(name) + 1] in (",", "!"):
                stripped = stripped[len(name) + 1 :].lstrip(" ,!")
        if stripped == text:
            break
        text = stripped
    for name in names:
        for tail in (f", {name}!", f", {name}.", f", {name}?", f" {name}!", f", {name}"):
            if text.endswith(tail):
                text = text[: -len(tail)] + tail[-1] * (tail[-1] in "!.?")
    return _balanced(text[:1].upper() + text[1:]) if text else ""


def _balanced(sentence: str) -> str:
    """A sentence cut out of dialogue may keep half a pair of quotes: drop them then."""
    if sentence.count('"') % 2:
        sentence = sentence.replace('"', "")
    for opening, closing in (("“", "”"), ("(", ")")):
        if sentence.count(opening) != sentence.count(closing):
            sentence = sentence.replace(opening, "").replace(closing, "")
    return sentence.strip()


def about(sentence: str, other: str | None, *, speaker_named: bool = True) -> str:
    """Who the sentence is about, said by name: a leading "I" goes (the recap names the
    speaker), and "you" becomes `other` (in a chat of two, the one spoken to). Of a speaker
    the recap does not name (a card called "Narrator" telling the story to the player), only
    "you" is named: an "I" there is a side character's, in quotes."""
    text = sentence
    first = text.split(" ", 1)[0]
    if speaker_named and first in _FIRST_PERSON_MODAL:
        text = _FIRST_PERSON_MODAL[first] + text[len(first) :]
    elif speaker_named:
        text = _FIRST_PERSON_START.sub("", text, count=1)
    if other:
        if text.rstrip(" \"'”*").endswith("?"):  # "I have you now" asks nothing
            text = _ASKED_OF_YOU.sub(lambda m: f"{_third_person(m.group(1))} {other}", text)
        else:
            text = _BE_BEFORE_YOU.sub(
                lambda m: f"{m.group(1)}{_third_person(m.group(2))} {other}", text
            )
        text = _SECOND_PERSON.sub(lambda m: _named(m, other), text)
    return text[:1].upper() + text[1:] if text else ""


_ASKED_OF_YOU = re.compile(rf"\b({_AUXILIARY})\s+(?:you|u)\b", re.IGNORECASE)
"""A question's verb before "you" ("Are you sure?"): it agrees with the name ("Is Teo
sure?")."""
_BE_BEFORE_YOU = re.compile(
    r"(^\W*|\b(?:what|where|when|why|how|who|whom|which|whose)\s+)"
    r"(are|were|aren't|aren’t|weren't|weren’t)\s+(?:you|u)\b",
    re.IGNORECASE,
)
"""A "you" after "are" or "were" that asks ("what are you going to do"), even with no question
mark: at the start, or after a question word; not "if I were you"."""


def _third_person(verb: str) -> str:
    said = _THIRD_PERSON_VERB[verb.lower()]
    return said.capitalize() if verb[:1].isupper() else said


_SHARE_OF = re.compile(
    r"\b(?:two|three|four|both|all|each|either|neither|any|none|some|most|one|rest) of $",
    re.IGNORECASE,
)
"""Before "you", a share of the people spoken to ("the two of you"): not the one named."""


def _named(match: re.Match[str], other: str) -> str:
    pronoun, space, verb = match.group(1).lower(), match.group(2) or "", match.group(3) or ""
    if pronoun == "you" and _SHARE_OF.search(match.string, 0, match.start()):
        return f"them{space}{verb}"
    named = _SECOND_FORMS.get(pronoun, "{}").format(other)
    said = verb.lower()
    if pronoun in ("you", "u") and said in _THIRD_PERSON_VERB:
        return f"{named}{space}{_THIRD_PERSON_VERB[said]}"
    if (
        pronoun in ("you", "u")
        and said in _PLAIN_VERBS
        and _clause_start(match.string, match.start())
    ):
        return f"{named}{space}{_PLAIN_VERBS[said]}"
    return f"{named}{space}{verb}"


@lru_cache(maxsize=65536)
def content_words(text: str) -> frozenset[str]:
    """The words that carry content: lower case, no stopwords."""
    found = set()
    for raw in WORD.findall(text.lower()):
        if "'" in raw or "’" in raw or "-" in raw:
            word = _POSSESSIVE.sub("", raw).strip("'’-")
            plain = word.replace("’", "").replace("'", "")
        else:  # most words: nothing to take off (and faster without)
            word = plain = raw
        if (len(word) > 1 and plain not in _STOP_PLAIN) or _NUMBER.search(word):
            found.add(word)
    return frozenset(found)


def is_filler(words: frozenset[str]) -> bool:
    """True when a sentence's content words are all reactions ("lol that's amazing!")."""
    return all(w in _FILLER_WORDS and not _NUMBER.search(w) for w in words)


@lru_cache(maxsize=65536)
def rarity(word: str) -> float:
    """How much a word tells, from 0 ("the") to about 7 (a word English does not know)."""
    if _NUMBER.search(word):
        return 6.0
    return max(0.0, 7.0 - zipf_frequency(word, "en"))
