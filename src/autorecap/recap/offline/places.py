"""Where a scene happens, read from its words: the place a scene's opening messages name
(`place_of`, for the scene recap's header), and whether an opening names a place the last
messages did not (`place_score`, a scene cue). No model: kinds of place ("the fish market"),
capitalised names after "in", "at" or "to" ("in Porto"), and words of arriving.

May import: the standard library.
"""

from __future__ import annotations

import re
from collections.abc import Sequence

MARKUP = re.compile(r"[*_~`\"“”„«»]+")
SPACE = re.compile(r"\s+")
WORD = re.compile(r"[a-zà-öø-ÿ][a-zà-öø-ÿ'’-]*")
"""How the scene cues read a text (here and in `cues`): markup and quotes off, lower-case
words."""

_ARRIVAL = re.compile(
    r"\b(?:arriv\w*|reach(?:es|ed)?\s+the|enter(?:s|ed)?\s+the|steps?\s+(?:into|inside|out)"
    r"|stepped\s+(?:into|inside|out)|pull(?:s|ed)?\s+(?:into|up\s+(?:to|at|outside))"
    r"|ma(?:k|d)e\s+it\s+to|back\s+(?:at|in|home|on\s+the)|return(?:s|ed)?\s+to"
    r"|sets?\s+out|head(?:s|ed)?\s+(?:to|for|out)|walk(?:s|ed)?\s+into|find\s+(?:yourselves"
    r"|themselves|ourselves|yourself)|here\s+we\s+are|so\s+this\s+is|we'?re\s+here"
    r"|(?:i'?m|we'?re|i\s+am|we\s+are)\s+(?:back\s+)?(?:in|at|on|outside|inside)\s+(?:the|my|our)"
    r"|welcome\s+(?:to|back))\b",
    re.IGNORECASE,
)
_PLACE_NAME = re.compile(
    r"\b(?:in|at|into|to|reach(?:es|ed)?|toward|towards|outside|inside|near|from)\s+"
    r"((?:the\s+)?[A-Z][\w'’-]+(?:\s+(?:of\s+)?[A-Z][\w'’-]+){0,3})"
)
_NAMED_PLACE = re.compile(r"\b[A-Z][\w'’-]+(?:\s+(?:of\s+)?[A-Z][\w'’-]+){1,3}")
_PLACE_TITLES = frozenset(
    {"port", "fort", "mount", "lake", "saint", "st", "castle", "camp", "cape"}
)
PLACES = frozenset(
    """
    airport alley apartment arena attic bakery balcony ballroom bank bar barn barracks basement
    bathroom bay beach bedroom bench boat bookshop bookstore bridge cabin cafe café camp camper
    campus canal canyon car castle cathedral cave cellar chapel church cinema city classroom
    cliff clinic club coast cockpit corridor cottage court courthouse courtroom courtyard crypt
    deck den desert diner dock docks dorm dungeon estate factory farm ferry field forest forge
    fortress garage garden gate graveyard gym hall hallway hangar harbor harbour highway hill
    home hospital hostel hotel house hut inn island jail kitchen lab laboratory lake library
    lighthouse lobby lodge manor market meadow mill mine monastery motel mountain museum office
    orchard palace park parlor parlour pass path pier platform plaza pond port precinct prison
    pub quarters ranch restaurant river road roof rooftop room ruins saloon school shop shore
    shrine square stable stables stadium station store street studio suite swamp tavern temple
    tent theater theatre tower town trail train tunnel valley village vineyard warehouse ward
    woods workshop yard quay wharf lane avenue boulevard district quarter slum terrace gallery
    arcade chamber vault cemetery abbey keep outpost clearing grove glade ridge peak summit
    marsh bog moor heath creek stream brook ford falls cove lagoon reef isle mall lot subway
    metro terminal ambulance pharmacy supermarket firehouse pool motel campsite campground
    greenhouse allotment porch driveway kitchenette lounge cafeteria canteen infirmary ward
    bunker hold galley bridge engine engineering airlock cabin observatory checkpoint border
    crossing tollhouse waystation shack ruin crossroads rectory vicarage embassy consulate
    """.split()
)
"""Kinds of place: an opening that names one the last messages did not is a cue."""
STOP = frozenset(
    """
    a about above after again against all also am an and any are aren't as at be because been
    before being below between both but by can can't cannot could couldn't did didn't do does
    doesn't doing don't down during each few for from further get gets got had hadn't has hasn't
    have haven't having he he'd he'll he's her here here's hers herself him himself his how how's
    i i'd i'll i'm i've if in into is isn't it it's its itself just let's like me more most much
    my myself no nor not now of off oh ok okay on once one only or other ought our ours ourselves
    out over own really same say said says she she'd she'll she's should shouldn't so some such
    than that that's the their theirs them themselves then there there's these they they'd
    they'll they're they've this those through to too under until up very was wasn't we we'd
    we'll we're we've were weren't what what's when when's where where's which while who who's
    whom why why's will with won't would wouldn't yeah yes you you'd you'll you're you've your
    yours yourself yourselves
    """.split()
)
"""Common words: they end a noun phrase ("the car park behind *the* pub") and tell no topic."""


_A_LOT = re.compile(r"\ba lot\b")
""""A lot of" names no parking lot."""


def place_score(text: str, opening: str, seen: set[str]) -> float:
    """A place the opening names that the last messages (their words: `seen`) did not."""
    first_cased = re.split(r"(?<=[.!?])\s", opening, maxsplit=1)[0]
    first = _A_LOT.sub("", first_cased.lower())
    score = 0.0
    for word in WORD.findall(first):
        singular = word[:-1] if word.endswith("s") and word[:-1] in PLACES else word
        if singular in PLACES and singular not in seen:
            score = 1.2
            break
    for match in _PLACE_NAME.finditer(MARKUP.sub("", text[:300])):
        name = match.group(1).removeprefix("the ")
        if name.split()[0].lower() in _WHEN_NAMES:
            continue  # "in May", "at Christmas"
        if len(name) > 2 and not set(WORD.findall(name.lower())) <= seen:
            score += 0.8
            break
    for match in _NAMED_PLACE.finditer(first_cased):
        words = match.group(0).split()
        if (words[-1].lower() in PLACES or words[0].lower() in _PLACE_TITLES) and (
            not set(WORD.findall(match.group(0).lower())) <= seen
        ):
            score += 0.8
            break
    if _ARRIVAL.search(opening[:160]):
        score += 0.8
    return score


_PLACE_PHRASE = re.compile(
    r"\b(?:the|a|an|my|our|his|her|their)((?:\s+[a-z][\w'’-]+){1,3})(?=\s+([a-z][\w'’-]*))?"
)
"""A determiner, up to three lower-case words, and the word after them (if one follows)."""
_PHRASE_ENDS = frozenset(
    """
    behind beside near across along beyond toward towards past outside inside around opposite
    next among upon within without where
    """.split()
)
"""Words after which a noun phrase has ended (besides stopwords): "the car park behind"."""


_IN_PLACE = re.compile(
    r"\b(?:in|at|inside|outside|near)\s+([A-Z][\w'’-]+(?:\s+(?:of\s+)?[A-Z][\w'’-]+){0,2})"
)


_TITLES = frozenset(
    """
    mr mrs ms miss mx dr doctor sir madam madame lady lord dame master mistress father mother
    brother sister aunt uncle grandma grandpa captain capt officer sergeant sgt professor prof
    detective inspector judge saint
    """.split()
)
"""Words before a person's name: "at Mrs. Perch's" names no place."""


_GESTURE_END = re.compile(r"(?<=\S)\*\s+(?=[\"“A-Z])")
"""The asterisk that closes a gesture, before the next sentence."""
_WHEN_NAMES = frozenset(
    """
    january february march april may june july august september october november december
    monday tuesday wednesday thursday friday saturday sunday spring summer autumn fall winter
    christmas easter halloween thanksgiving hanukkah diwali eid ramadan passover advent lent
    michaelmas martinmas candlemas midsummer midwinter whitsun yule
    """.split()
)
"""Capitalised words that name a time, not a place: "in May", "at Christmas"."""


def place_of(texts: Sequence[str], people: Sequence[str] = ()) -> str:
    """Where a scene happens, from its opening messages: a named place ("Weir Street", "in
    Porto") or a kind of place ("the fish market"); "" when they do not say. `people`: names
    that are not places (the speakers), and neither are a title's ("at Mrs. Perch's")."""
    persons = {w for name in people for w in name.split()}
    for text in texts:
        # A gesture's closing asterisk ends a sentence: "*in from outside* What's going on?"
        # names no place called "What's".
        plain = SPACE.sub(" ", MARKUP.sub("", _GESTURE_END.sub(". ", text[:400])))
        for match in _NAMED_PLACE.finditer(plain):
            words = match.group(0).split()
            if words[-1].lower() in PLACES or words[0].lower() in _PLACE_TITLES:
                return match.group(0)
        for match in _IN_PLACE.finditer(plain):
            name = match.group(1)
            words = name.removesuffix("'s").removesuffix("’s").split()
            first = words[0].lower()
            if not persons & set(words) and first not in _TITLES and first not in _WHEN_NAMES:
                return name
        for match in _PLACE_PHRASE.finditer(plain):
            # A phrase that ends in a kind of place, where the noun phrase ends: "the fish
            # market" (for the boat), "the train station", but not "the kitchen knife".
            words = [*match.group(1).split(), *(match.group(2) or "").split()]
            for end in range(min(3, len(words)) - 1, -1, -1):
                after = words[end + 1] if end + 1 < len(words) else ""
                ended = not after or after.lower() in STOP or after.lower() in _PHRASE_ENDS
                if words[end].lower() in PLACES and ended:
                    determiner = match.group(0)[: match.start(1) - match.start(0)]
                    if _A_LOT.fullmatch(f"{determiner} {words[0]}".lower()) and end == 0:
                        break  # "a lot of cake"
                    return f"{determiner} {' '.join(words[: end + 1])}"
    return ""
