"""Words that carry no content: what a recap's selection and a recall query both skip; and
word stems, as the recall index reads words.

May import: nothing of autorecap; Stemmer (PyStemmer).
"""

from __future__ import annotations

import threading
from collections.abc import Iterable

import Stemmer

_LOCAL = threading.local()


def stems(words: Iterable[str]) -> list[str]:
    """Each word's stem by Porter's algorithm, as the recall index's tokenizer (SQLite FTS5's
    `porter`) stems it: "counting" and "count" are one word to a search. Lower-case words in,
    in order."""
    stemmer = getattr(_LOCAL, "stemmer", None)
    if stemmer is None:  # a Stemmer is not to be shared between threads
        stemmer = _LOCAL.stemmer = Stemmer.Stemmer("porter")
    return list(stemmer.stemWords(list(words)))


_IRREGULAR = """
    pay paid | buy bought | sell sold | meet met | leave left | take took taken | give gave given
    tell told | find found | lose lost | keep kept | send sent | spend spent | bring brought
    think thought | go went gone | come came | run ran | win won | write wrote written
    hide hid hidden | steal stole stolen | break broke broken | choose chose chosen
    drive drove driven | eat ate eaten | fall fell fallen | feel felt | hold held | hear heard
    know knew known | make made | sing sang sung | see saw seen | sit sat | speak spoke spoken
    stand stood | teach taught | throw threw thrown | wear wore worn | begin began begun
    blow blew blown | build built | burn burnt | catch caught
    draw drew drawn | drink drank drunk | fight fought | fly flew flown | forget forgot forgotten
    freeze froze frozen | get got gotten | grow grew grown | hang hung | lead led
    lend lent | light lit | mean meant | ride rode ridden | ring rang rung
    seek sought | shoot shot | sink sank sunk | sleep slept | slide slid
    spin spun | sting stung | strike struck | swear swore sworn | swim swam swum
    swing swung | tear tore torn | wake woke woken | weep wept | bleed bled | bind bound
    dig dug | feed fed | flee fled | forgive forgave forgiven
    die died dies dying | lie lied lies lying | tie tied ties tying
    """
"""(and the verbs in -ie, whose forms Porter's stemmer parts: "die", "di", "dy")"""
_FORMS: dict[str, tuple[str, ...]] = {
    # the past first: a story is told in it ("she hid the key" for "where had she hidden it?")
    form: tuple(other for other in (*group[1:2], group[0], *group[2:]) if other != form)
    for group in (part.split() for line in _IRREGULAR.splitlines() for part in line.split("|"))
    for form in group
    if len(group) > 1
}


def other_forms(word: str) -> tuple[str, ...]:
    """The other forms of an irregular verb ("paid" for "pay", "bought" for "buy"), which a
    stemmer does not reach: a question asks "how much did she pay?" of "she paid nine". The
    past first, then the verb itself, then the rest ("hidden": "hid", "hide")."""
    return _FORMS.get(word, ())


STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any are as at be because been before
    being below between both but by can cannot could did do does doing down during each few for
    from further get gets got had has have having he her here hers herself him himself his how
    i if in into is it its itself just let me more most much my myself no nor not now of off
    oh ok okay on once one only or other our ours ourselves out over own really same say said
    says she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while
    who whom why will with would yeah yes you your yours yourself yourselves us im ive ill id dont
    doesnt didnt cant wont isnt arent wasnt werent thats theres whats lets gonna wanna gotta
    like thing things stuff lot lots kind sort bit pretty maybe probably actually though
    """.split()
)
