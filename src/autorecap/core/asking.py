"""What a turn asks about, as recall reads it: the words of a query worth searching for
(`query_words`, and the other forms of its irregular verbs, `query_forms`), the same words as
the index reads a text (`text_words`, `asked_words`), and the kinds of answer a question wants
(`answer_kinds`: a number for "how much", a date for "when", a name for "who", a place for
"where", words said for "what password", "what did she whisper") and whether a sentence holds
one (`holds_answer`).

May import: core.
"""

from __future__ import annotations

import re
import unicodedata
from collections.abc import Sequence
from functools import lru_cache

from autorecap.core.words import STOPWORDS, other_forms, stems

MOST_WORDS = 24
"""A query keeps at most this many words (a long message asks about a few things at once)."""
_WORD = re.compile(r"[^\W_]+(?:[-'’.:/][^\W_]+)*")
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


def query_words(text: str) -> list[str]:
    """The words of a query worth searching for, in order, each once: no stopwords or words
    of asking; a code such as "14-02-27" stays whole."""
    return list(_query_words(text))


@lru_cache(maxsize=1024)
def _query_words(text: str) -> tuple[str, ...]:
    # Cached: a turn's search, its pieces and its injection each read the query.
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
    return tuple(found[:MOST_WORDS])


def query_forms(query: str, words: Sequence[str]) -> list[str]:
    """The other form of the irregular verbs among `words` (the words a search keeps of
    `query`), which a stemmer does not reach: "paid" for "pay". Not of a name ("Drew",
    "Rose" written with a capital inside the query), nor a stopword or a word of asking.

    One form only (the past, else the verb itself, else another, that is not the word asked
    nor a word of asking): each form is a word of its own to the search, and "give" with
    "gave" and "given" made a message that used the verb three ways outrank one that names who
    was asked about. Measured with `autorecap eval` on the
    dev and generated chats, planted facts with recall: 463 -> 464 of 483 at 2,000 tokens, the
    same at 1,000 and 4,000."""
    named = {m.group(0).lower() for m in _CAPITALISED.finditer(query)}
    found: list[str] = []
    for word in words:
        if word in named:
            continue
        form = next((f for f in other_forms(word) if f not in words and f not in _NOT_ASKED), None)
        if form is not None and form not in found:
            found.append(form)
    return found


@lru_cache(maxsize=4096)
def text_words(text: str) -> frozenset[str]:
    """A text's words as the index reads them: runs of letters and digits, lower case, accents
    folded, stemmed ("Kessler's" holds "kessler", "counting" holds "count", "14/02/27" holds
    "14", "02" and "27"). Cached: the running recap and the same old messages are read again
    turn after turn."""
    plain = text.lower()
    if not plain.isascii():
        folded = unicodedata.normalize("NFKD", plain)
        plain = "".join(c for c in folded if not unicodedata.combining(c))
    return frozenset(stems(set(_TOKEN.findall(plain)) - STOPWORDS))


def asked_words(query: str) -> frozenset[str]:
    """The words of a query, as `text_words` reads a text (the other forms of its irregular verbs
    too)."""
    words = query_words(query)
    return frozenset().union(*(text_words(word) for word in [*words, *query_forms(query, words)]))


_CHARGED = r"fares?|fees?|tolls?|rent|bill|charged?|wages?|salary|valued?|worth|appraised"
"""What is paid or what a thing is worth: a number asked, and money."""
_KIND_CUES = (
    (
        "number",
        re.compile(
            r"\b(how (much|many|long|far|old)"
            r"|what (number|code|combination|price|sum|amount)"
            # "what's the number on my door", "what was the vault code" (asked: a "?" follows)
            r"|(what|which)(?:'s|’s|\s+(?:is|was|were|are))\s+(?:(?:the|my|your|his|her|our"
            r"|their|its)\s+)?(?:[\w-]+\s+){0,2}?(number|code|combination|price|sum|amount)s?"
            r"(?!\s+(?:words?|phrases?|names?)\b)(?=[^.!\n]*\?)"  # a code word is words said
            # "remind me the numbers for the wheel?"
            r"|\bthe\s+(?:[\w-]+\s+){0,2}?(?:numbers|digits)\b(?=[^.!\n]*\?)"
            rf"|cost|price|pay|paid|owe|({_CHARGED})\b)",
            re.I,
        ),
    ),
    (
        "date",
        re.compile(
            r"\b(when|(?:what|which) (date|day|time|year|month)|how long ago"
            # "what was the last day", "what's the date on the letter", "the deadline" (asked)
            r"|(?:(what|which)(?:'s|’s|\s+(?:is|was|were|are))\s+(?:(?:the|my|your|his|her|our"
            r"|their|its)\s+)?(?:[\w-]+\s+){0,2}?(date|day|year|month|birthday)s?"
            r"|deadlines?)\b(?=[^.!\n]*\?))",
            re.I,
        ),
    ),
    ("name", re.compile(r"\b(who|whom|whose|which|(?:nick)?name[ds]?|called|alias)\b", re.I)),
    ("place", re.compile(r"\b(where|address|what (street|town|city|village|country))\b", re.I)),
    (
        "words",
        re.compile(
            r"\b(pass ?words?|watchwords?|countersign|pass-?phrases?|(?:code|key) ?words?|motto"
            r"|what (?:was|is|were|are) the (?:\S+ ){0,2}(?:words?|phrases?)"
            r"|(?:what|which) (?:words?|phrases?)"
            # "what did she whisper", "what am I supposed to say at the door"
            r"|what (?:did|do|does|should|must|shall|am|are|is|was|were) (\S+ ){1,4}"
            r"(say|answer|reply|whisper|shout|mutter))\b",
            re.I,
        ),
    ),
)
_MONEY_ASKED = re.compile(
    rf"\bhow much\b|\b(cost|price|pay|paid|owed?|{_CHARGED}|cash|money|offer(ed)?|borrow(ed)?"
    r"|lent|lend|loan|spen[dt]|sell|sold|buy|bought|earn(s|ed)?)\b",
    re.I,
)
"""A question about money: what a sentence that names a sum answers best."""
_SUM = (
    r"(?:\d[\d,.]*|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen"
    r"|fourteen|fifteen|sixteen|seventeen|eighteen|nineteen"
    r"|twenty|thirty|forty|fifty|sixty|seventy|eighty|ninety|hundred|thousand|million|billion"
    r"|half)"
)
_CURRENCY = (
    r"dollars?|bucks|pounds?|quid|shillings?|(?-i:pence|pennies)|guineas?|crowns?|coins?"
    r"|coppers?|marks?|euros?|francs?|sovereigns?|chits?|credits?|cents?|grand|florins?"
    r"|ducats?|thalers?|rubles?|yen"
    # more of the world's and the stories' money, old and invented
    r"|gulden|guilders?|stivers?|kreuzers?|hellers?|groschen|pfennigs?|kopecks?|kopeks?"
    r"|roubles?|zloty|zlotys|korun[ay]?|kronor|krona|kroner|kronen|lire|lira|pesos?|pesetas?"
    r"|reales|escudos?|rupees?|taels?|yuan|ryo|drachmas?|drachmae|obols?|denarii|denarius"
    r"|sesterces|shekels?|dinars?|dirhams?|rials?|piast(?:er|re)s?|scrip|septims?|orens?|nuyen"
    r"|zeny|[gsc]p"
)
_ONE_UNIT = (
    r"dollar|quid|shilling|florin|ducat|thaler|franc|euro|guilder|gulden|stiver|kreuzer"
    r"|groschen|rupee|peso|peseta|ruble|rouble|drachma|denarius|shekel|dinar|septim"
)
"""Money that "a" or "one" counts ("a quid", "one florin"), in lower case ("a Franc" is a
man); not "a crown", "a mark", "a coin", "a buck", "a pound", "a sovereign" or "a guinea",
which are as often a thing as a sum ("a buck stood in the clearing", "a sovereign state")."""
_NOTES = r"fivers?|tenners?|sawbucks?"
"""Money by its note: "a fiver", "two tenners"."""
_OLD_MONEY = r"[a-z]*pence|(?:ha'?|half)?penny|farthings?"
"""Old money that says its number in one word: "fourpence", "tuppence", "ha'penny"."""
_MONEY = re.compile(
    rf"[$£€¥₹]\s?\d|\b{_SUM}[\s-]+(?:[\w-]+[\s-]+)?(?:(?:{_CURRENCY})\b"
    # a weight, marks on the skin, the crowns of a realm: "pounds of flour", "marks on her arm"
    r"(?!\s+(?:of|on)\b)"
    # gold and silver as money, not as what a thing is made of ("two gold rings")
    r"|(?:gold|silver)(?=\s*(?:[^\w\s]|$|pieces?\b|coins?\b))\b)"
    rf"|\b(?:a|an|one)\s+(?-i:{_ONE_UNIT})\b(?![\s-]+(?:of|on|sign|pro)\b)"
    # money by its note or its coin: "a fiver", "two bits", "pieces of eight" (not "two bits
    # of string", "pieces of silver wire")
    rf"|\b(?:{_NOTES}|(?:two|four|six)\s+bits\b(?!\s+of\b)"
    r"|pieces\s+of\s+(?:eight|gold|silver)\b(?!\s+(?!(?:and|or|each|apiece|for|to)\b)[a-z]))\b"
    # old money in one word, in lower case: "Penny" and "Spence" are names
    rf"|(?-i:\b(?:{_OLD_MONEY})\b)",
    re.I,
)
"""A sum of money: "$2,400", "three hundred dollars", "seven salt-chits", "fourpence"."""


_MONEY_WORD = re.compile(
    rf"(?:{_CURRENCY}|{_ONE_UNIT}|{_NOTES}|bits|eight|gold|silver|{_OLD_MONEY})",
    re.I,
)
"""A word without which `_MONEY` cannot match: most sentences have none, and one test of their
words is three times faster than the search."""
_TOKEN_WORD = re.compile(r"[^\W\d_]+")  # "silver's" holds "silver", "ha'penny" "penny"


@lru_cache(maxsize=65536)
def _money_word(word: str) -> bool:
    return _MONEY_WORD.fullmatch(word) is not None


def names_a_sum(text: str) -> bool:
    """Whether the text names a sum of money (`_MONEY`)."""
    if not any(sign in text for sign in "$£€¥₹") and not any(
        _money_word(word) for word in _TOKEN_WORD.findall(text)
    ):
        return False  # no money word: the offline recaps ask this of every sentence
    return _MONEY.search(text) is not None


TOLD_WEIGHT = 2.0
"""What a sentence that tells the answer outright is worth against one that only holds its kind:
a sum to a question about money, against another number ("two of them", "the twenty-sixth");
a code or a figure of several digits ("NM-44718-K", "Yarrow 226") to a question about a number
that names a thing; a name given ("that's the Marguerite Bell") to a question about a name,
against a name in passing; words in a short quote to a question about words said. In the
excerpt of a long message (where it is also kept further from its match:
`excerpts._TOLD_AROUND`), for the piece's `recall.ANSWER_BOOST`, and for where the answer after
a recalled question starts.
Measured with `autorecap eval` on the dev chats, planted facts with recall: sums 271 -> 282 of
340 at 1,000 tokens, 297 -> 303 at 2,000, 307 -> 311 at 4,000; names given, then, 286, 305
and 313; the generated chats unchanged (505, 506 and 506 of 556). A day named ("July ninth")
to "when" gained nothing then; with a told answer kept further from its match, and the
chats of later rounds, it did (`_DAY_NAMED`). A short quote to "what password" gained nothing
either until a told answer was kept further from its match (`excerpts._TOLD_AROUND`): then, on
the dev and generated chats, 427 / 449 / 453 -> 428 / 449 / 455 of 463. Codes, on the dev and
generated chats with two more dev chats: 458 / 480 / 489 -> 461 / 481 / 489 of 501. "The
numbers for the wheel?", "what am I supposed to say", a code of Roman numerals and words after
"say:" (from the misses of a blind-written chat, which then went to dev): dev and generated
503 / 535 / 546 -> 504 / 535 / 546 of 561, held out 367 / 405 / 408 -> 369 / 405 / 408 of 433,
the blind chat 7 -> 8 of 10 at 2,000 tokens."""
_QUOTED = re.compile(r"[\"“”«»]")
"""Words said: a password, a question's answer, a whisper are quoted in the story."""
_SHORT_QUOTE = re.compile(
    r"(?<![\w,.!?…])[\"“«](?=\S)[^\"“”«»]{1,60}?(?<=\S)[\"”»](?!\w)"
    # in single quotes, as a word said is quoted inside speech ("The word is 'marigold'."); not
    # a dropped letter ("'em", "'tis", "comin'") nor a plural's apostrophe ("the boys' toys")
    r"|(?<![\w'‘’])['‘](?!(?i:em|tis|twas|bout|round|cause|cos|coz|til|till|n|ere|im|er|course"
    r"|nuff|ello|ave|alf|appen|e|is|ad|ome|ow|fraid|spose|cept|neath|gainst|scuse|kay|ya|yer"
    r"|un|s)\b)(?=\w)[^'‘’\"“”\n]{1,60}?"
    r"(?:(?<=[\w.,!?])(?<!in)(?<!s)|(?<=in|\ws)(?!['’]\s+[a-z]))['’](?![\w'’])"
    # after a word of saying and a colon, in italics or plain as recall reads it ("you'll
    # say: *the heron sleeps crooked.*"), where a roleplay's italics are otherwise its actions
    r"|(?i:\b(?:say|says|said|answer|answers|reply|whisper|password|word\s+is)\s*:\s*)"
    r"[*_]?(?=\w)[^*_\"“”\n:]{1,60}?(?<=\w)[*_]?(?=[.!?…]*[*_\"”]?\s*$)"
)
""""Salt and ember," in quotes and six words or fewer: a password or a reply told
outright, where a line of dialogue runs longer. An opening quote follows no word or stop, so
the narration between two quotes ('," he says. "') is none. Words after a word of saying
and a colon count when they end the sentence."""
_WEEKDAYS_MONTHS = (
    r"(?!(?:Mon|Tues|Wednes|Thurs|Fri|Satur|Sun)day|January|February|March|April|May|June"
    r"|July|August|September|October|November|December)"
)
_NAMING = re.compile(
    r"\b(?i:(?:is|was|are|were|be|been|being)\s+(?:called|named|nicknamed|known\s+as|christened"
    r"|dubbed)|(?:called|named|nicknamed|christened|dubbed)\s+(?:her|him|it|them|me|us|you)"
    r"|name'?s|name\s+(?:is|was))\s+(?i:the\s+|a\s+)?[\"“'‘*]?[A-Z]"
    rf"|\b(?i:that'?s|this\s+is|meet)\s+(?i:the\s+)?[*_]?{_WEEKDAYS_MONTHS}[A-Z][a-z]"
)
"""A name given: "the inn is called the Tallow & Thistle", "they called her Mother Lancet",
"his name's Admiral Fuzz", "that's the Marguerite Bell", "meet Ptolemy" (not "I called Mira",
"that's Tuesday")."""
_ROMAN_CODE = r"(?-i:\b[IVXLC]+(?:-[IVXLC]+){2,}\b)"
"""A code of Roman numerals: "III-VII-II-IX" (three at least, which no word or initial is)."""
_NUMBER = re.compile(
    r"\d|\b(one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen"
    r"|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy"
    r"|eighty|ninety|hundred|thousand|million|billion|half|dozen)\b"
    # old money says its number in one word, in lower case: "Penny" and "Spence" are names
    rf"|(?-i:\b(?:{_OLD_MONEY})\b)"
    rf"|{_ROMAN_CODE}",
    re.I,
)
_MONTH = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|apr(?:il)?|june?|july?|aug(?:ust)?|sept?(?:ember)?"
    r"|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?|(?-i:Mar(?:ch)?|May))"
)
"""A month or its short form; March and May only with a capital ("march on", "you may")."""
_ORDINAL = (
    r"(?:first|second|third|fourth|fifth|sixth|seventh|eighth|ninth|tenth|eleventh|twelfth"
    r"|\w+teenth|\w*tieth)"
)
_OF_A_NAME = r"of\s+(?!(?:his|her|their|our|my|your|the)\b)(?-i:[A-Z][a-z]+\b)(?![’'])"
"""What follows a story's own calendar's ordinal: "of Tammuzet", not "of his men", "of Brann's
men" or "of the Watch"."""
_DATE = re.compile(
    rf"\d|\b{_MONTH}\b|"
    r"\b(mon|tues|wednes|thurs|fri|satur|sun)day\b|\b(yesterday|tomorrow|tonight|morning|"
    r"evening|night|week|month|year|spring|summer|autumn|winter)\b"
    # a day of a story's own calendar: "the nineteenth of Tammuzet", "the third day of Thaw"
    rf"|\bthe\s+{_ORDINAL}\s+(?:day\s+)?{_OF_A_NAME}",
    re.I,
)
_DAY_NAMED = re.compile(
    rf"\b{_MONTH}\.?\s+\d{{1,2}}(?:st|nd|rd|th)?\b"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH}\b"
    rf"|\b{_MONTH}\s+(?:\w+-)?{_ORDINAL}\b"
    r"|\b\d{4}-\d\d-\d\d\b|\b\d{1,2}/\d{1,2}/\d{2,4}\b"
    rf"|\bthe\s+(?:\w+-)?{_ORDINAL}\s+(?:(?:day|month|year)\s+)?{_OF_A_NAME}",
    re.I,
)
"""A day named, or a year of a story's calendar: "November 14", "8 May", "July ninth",
"2023-05-08", "the twenty-second of August", "the fourth year of Tianqing". What a sentence
tells outright to a question about when, as a sum is to one about how much; "that night" or
"in the spring" only hold a date. Measured with `autorecap eval`, planted facts with recall:
dev and generated 500 / 530 / 540 -> 502 / 533 / 544 of 561 at 1,000 / 2,000 / 4,000 tokens
(one lost at 1,000: a question about a nickname "when she raced skiffs"), held out 365 / 405
/ 408 -> 366 / 405 / 408 of 433. With March and May only in capitals and an ordinal after a
month spelled out (not "April both"), one more lost at 1,000: a reply that names "October
twenty-first" now outranks the frame stamped 2:17 a.m."""
_CAPITALISED = re.compile(r"(?<![.!?…]\s)(?<!^)\b[A-Z][\w'’-]+")


_CODE_ASKED = re.compile(
    r"\b(?:numbers?|codes?|combinations?|digits|serial|registration|plate|id|reference|extension"
    r"|pin)\b"
    r"(?!\s+(?:of|words?|phrases?|names?)\b)",
    re.I,
)
"""A question about a number that names a thing ("the claim number", "the door code"), not one
that counts ("how many"): what a sentence with a code or a figure of several digits answers."""
_CODE = re.compile(
    r"\b(?!\d+(?:st|nd|rd|th)\b)(?:[A-Za-z]+[-/]?)?\d[\w-]*\d[\w-]*|\b[A-Z]{1,4}-?\d+\b"
    rf"|{_ROMAN_CODE}"
)
"""A code or a figure of several digits: "NM-44718-K", "Yarrow 226", "R-2290", "4471",
"III-VII-II-IX" (not "the 12th")."""


_ADDRESS = re.compile(
    r"\b(?!(?:1\d|20)\d\d\b)\d{1,4}[A-Za-z]?,?\s+(?-i:(?:[A-Z][\w'’-]+\s+){0,2}[A-Z][\w'’-]+)"
)
"""An address: a number before a name ("3 Gallows Stair", "14 Quay Street", "221B Baker
Street"; not a year, "in 1907 Dressler"), what a sentence tells outright to a question about
where. Measured with `autorecap eval`, planted facts with recall: dev and generated 518 / 552 /
566 -> 520 / 553 / 566 of 581 at 1,000 / 2,000 / 4,000 tokens, held out 384 / 423 / 428 of 453,
the same."""


def answer_kinds(query: str) -> frozenset[str]:
    """The kinds of answer a question wants, from its question words: "number", "date",
    "name", "place", "words" (none for a message that asks nothing); "money" besides "number"
    for a question about money ("how much", "what did it cost"), else "code" for one about a
    number that names a thing ("the claim number", "the door code")."""
    kinds = {kind for kind, cue in _KIND_CUES if cue.search(query)}
    if "number" in kinds and _MONEY_ASKED.search(query):
        kinds.add("money")  # a number, and of all numbers best a sum
    elif "number" in kinds and _CODE_ASKED.search(query):
        kinds.add("code")  # a number that names a thing: best a code
    return frozenset(kinds)


def answer_weight(sentence: str, wanted: frozenset[str], asked: frozenset[str]) -> float:
    """How well a sentence answers: 0 when it holds no answer of a wanted kind
    (`holds_answer`), `TOLD_WEIGHT` when it tells it outright (a sum to a question about
    money, a code to one about a number that names a thing, a name given to one about a name,
    a short quote to one about words said, a day named to one about when), else 1."""
    if not holds_answer(sentence, wanted, asked):
        return 0.0
    if (
        ("money" in wanted and names_a_sum(sentence))
        or ("name" in wanted and _NAMING.search(sentence))
        or ("code" in wanted and _CODE.search(sentence))
        or ("date" in wanted and _DAY_NAMED.search(sentence))
        or ("place" in wanted and _ADDRESS.search(sentence))
    ):
        return TOLD_WEIGHT
    if "words" in wanted and any(
        len(m.group(0).split()) <= 6 for m in _SHORT_QUOTE.finditer(sentence)
    ):
        return TOLD_WEIGHT
    return 1.0


def tells_answer(sentence: str, wanted: frozenset[str], asked: frozenset[str]) -> bool:
    """Whether a sentence tells an answer of a wanted kind outright (`answer_weight` at
    `TOLD_WEIGHT`), or holds a date when one is wanted (for a neighbour's few words, "that
    night" tells as much as "the third of November")."""
    return answer_weight(sentence, wanted, asked) >= TOLD_WEIGHT or (
        "date" in wanted and bool(_DATE.search(sentence))
    )


def holds_answer(sentence: str, wanted: frozenset[str], asked: frozenset[str]) -> bool:
    """Whether a sentence holds an answer of a wanted kind that the question does not
    already say: a number, a date, words in quotes, or a name (a capitalised word not at its
    start)."""
    if ("number" in wanted and (_NUMBER.search(sentence) or names_a_sum(sentence))) or (
        "date" in wanted and _DATE.search(sentence)
    ):
        return True
    if "words" in wanted and (_QUOTED.search(sentence) or _SHORT_QUOTE.search(sentence)):
        return True
    if wanted & {"name", "place"}:
        return any(not (asked & text_words(m.group(0))) for m in _CAPITALISED.finditer(sentence))
    return False
