"""Words that carry no content: what a recap's selection and a recall query both skip.

May import: nothing of autorecap.
"""

from __future__ import annotations

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
