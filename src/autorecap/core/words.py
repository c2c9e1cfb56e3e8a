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


STOPWORDS = frozenset(
    """
    a about above after again against all also am an and any are as at be because been before
    being below between both but by can cannot could did do does doing down during each few for
    from further get gets got had has have having he her here hers herself him himself his how
    i if in into is it its itself just let me more most much my myself no nor not now of off
    oh ok okay on once one only or other our ours ourselves out over own really same say said
    says she should so some such than that the their theirs them themselves then there these
    they this those through to too under until up very was we were what when where which while
    who whom why will with would yeah yes you your yours yourself yourselves im ive ill id dont
    doesnt didnt cant wont isnt arent wasnt werent thats theres whats lets gonna wanna gotta
    like thing things stuff lot lots kind sort bit pretty maybe probably actually though
    """.split()
)
