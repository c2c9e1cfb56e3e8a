"""The phrases that open a new scene or session, as the scene cues (`cues.py`) read them: time
jumps and time points ("Three days later", "That night"), datelines, waking, separators and
headings, a request out of character to skip ahead, greetings, catching up, goodbyes, and news
blurted out. Regular expressions only; how much each counts is `cues.py`'s.

May import: the standard library.
"""

from __future__ import annotations

import re

_NUMBER_WORD = (
    r"(?:a|an|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|several|some|many"
    r"|a\s+few|a\s+couple(?:\s+of)?|\d+)"
)
_TIME_UNIT = r"(?:minutes?|hours?|days?|nights?|weeks?|months?|years?|shifts?|moons?|seasons?)"
_DAYPART = (
    r"(?:morning|afternoon|evening|night|dawn|dusk|noon|midday|midnight|day|mid-?morning"
    r"|mid-?afternoon|sundown|twilight)"
)
_NTH = r"(?:second|third|fourth|fifth|sixth|seventh|\d{1,2}(?:st|nd|rd|th))"
"""How far on a journey is ("the second evening"); not "the last", which looks back as often."""
_HOUR = r"(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|\d{1,2})"
_WEEKDAY = r"(?:monday|tuesday|wednesday|thursday|friday|saturday|sunday)"
TIME_JUMP = re.compile(
    r"^\W*(?:"
    rf"(?:by\s+|on\s+|early\s+|late\s+)?the\s+(?:next|following)\s+(?:{_DAYPART}|week|month|year)"
    rf"|the\s+(?:{_DAYPART}|day|week|month)\s+after"
    r"|(?:\w+[,\s]+){0,6}later\b"
    rf"|(?:after|over)\s+{_NUMBER_WORD}\s+{_TIME_UNIT}"
    rf"|(?:by|on)\s+the\s+{_NTH}\s+(?:{_DAYPART}|week|month|year|watch)\b"
    rf"|{_NUMBER_WORD}\s+{_TIME_UNIT}\s+(?:pass|go\s+by|went\s+by|have\s+passed|on|after)"
    r"|(?:some|much)\s+time\s+(?:later|passes|has\s+passed)"
    rf"|later\s+(?:that|this|in\s+the)\s+(?:{_DAYPART}|week)"
    r"|(?:meanwhile|elsewhere|afterwards?|eventually|in\s+the\s+meantime)\b"
    r"|by\s+the\s+time\b|when\s+(?:morning|evening|night|dawn|the\s+sun)\s+(?:comes|came|breaks)"
    r"|(?:on\s+)?the\s+(?:\w+-)?\w+(?:st|nd|rd|th)\s+of\s+\w+"
    r")",
    re.IGNORECASE,
)
"""A phrase that moves the story in time: enough on its own to open a scene."""
TIME_POINT = re.compile(
    r"^\W*(?:"
    rf"(?:early|late)\s+(?:that|this|in\s+the)\s+(?:{_DAYPART}|week)"
    rf"|(?:that|this)\s+(?:same\s+)?{_DAYPART}\b"
    rf"|(?:at|by|around|before|after|come|toward|towards|near)\s+(?:{_DAYPART}|sunrise|sunset"
    r"|first\s+light|nightfall|daybreak|dark|the\s+(?:end|start)\s+of)"
    r"|past\s+(?:midnight|noon|midday|dawn|dusk|nightfall|sundown|sunset|dark)\b"
    rf"|(?:next|on|that)\s+{_WEEKDAY}|{_WEEKDAY}(?:\s+{_DAYPART})?\s*[,.:—-]"
    rf"|{_WEEKDAY}\s+{_DAYPART}\s+(?:on|at|in|by)\s"
    rf"|(?:half|(?:a\s+)?quarter|(?:{_HOUR}|twenty|twenty-five)\s+minutes?)\s+(?:to|past)\s+"
    rf"(?:{_HOUR}|midnight|noon|the\s+hour)\b"
    # a journey's time so far ("Three nights into the erg"): in speech, as often a remark
    rf"|{_NUMBER_WORD}\s+{_TIME_UNIT}\s+(?:out\s+(?:of|from)|into|on\s+the\s+road)"
    rf"|(?:\d{{1,2}}(?::\d\d)?\s*(?:a\.?m\.?|p\.?m\.?)|\d{{1,2}}:\d\d)\s*[,.—-]"
    r")",
    re.IGNORECASE,
)
"""A phrase that names a time ("That night", "Saturday morning,"): a cue, weaker alone."""
_MONTH = (
    r"(?:january|february|march|april|may|june|july|august|september|october|november|december)"
)
_PLAIN_MONTH = r"(?:january|february|april|june|july|august|september|october|november|december)"
"""Months that are no other English word ("may", "march") and few names ("April" is one)."""
_ORDINAL = (
    r"(?:\d{1,2}(?:st|nd|rd|th)|first|second|third|fourth|fifth|sixth|seventh|eighth|ninth"
    r"|tenth|eleventh|twelfth|thirteenth|fourteenth|fifteenth|sixteenth|seventeenth|eighteenth"
    r"|nineteenth|twentieth|thirtieth|(?:twenty|thirty)-?(?:first|second|third|fourth|fifth"
    r"|sixth|seventh|eighth|ninth))"
)
DATELINE = re.compile(
    r"(?:"
    r"\b\d{1,2}(?::\d\d)?\s*[ap]\.?m\b\.?|^\W*\d{1,2}:\d\d\b"
    rf"|\b(?:the\s+)?{_ORDINAL}\s+of\s+{_MONTH}\b"
    rf"|\b{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?\b|\b{_PLAIN_MONTH}\s+{_ORDINAL}\b"
    rf"|\b{_WEEKDAY}[,\s]+(?:the\s+)?{_ORDINAL}\b"
    r"|^\W*(?:christmas|new\s+year'?s|halloween|thanksgiving|easter|midsummer)"
    r"(?:\s+(?:eve|day|morning|night|sunday))?\s*[,.:;—-]"
    rf"|^\W*{_PLAIN_MONTH}\s+(?:comes|came|arrives|arrived|brings|brought|ends|ended)\b"
    r")",
    re.IGNORECASE,
)
"""A dateline opening narration ("Station 6, 4:50 a.m.", "Thursday the sixteenth,", "Christmas
Eve."): a new scene's time, set the way a story sets it."""
DATELINE_REACH = 60
"""How far into a message a dateline is looked for (a time said later is part of the action)."""
WAKING = re.compile(
    r"\b(?:wake\s+up|woke\s+(?:up|me)|(?:are|r)\s+(?:you|u)\s+(?:up|awake)|still\s+awake"
    r"|did\s+(?:you|u)\s+sleep|rise\s+and\s+shine|sorry\s+to\s+wake|good\s+morning)\b",
    re.IGNORECASE,
)
"""Someone waking or being woken: a new day, or a night cut short."""
SEPARATOR = re.compile(
    r"^\s*(?:(?:[-*_=~#•·⁂][ \t]*){3,}(?:\n|$)|⁂"
    r"|[\[(<]?\s*(?:time\s*-?\s*skip|scene(?:\s+\d+)?\s*[:\]]|location\s*:|chapter\s+\w+"
    r"|part\s+\w+\s*[:\]]|day\s+\d+\s*[:\]—-]|end\s+of\s+(?:scene|chapter|day)|new\s+scene)"
    r")",
    re.IGNORECASE,
)
OUT_OF_CHARACTER = re.compile(r"\booc\b|\(\(|\[\[|//", re.IGNORECASE)
SKIP_REQUEST = re.compile(
    r"\b(?:skip|time\s*-?\s*skip|fast\s*-?\s*forward|jump\s+(?:ahead|forward|to)"
    r"|(?:next|new)\s+scene|move\s+on|cut\s+to|later\s+that|the\s+next\s+(?:day|morning))",
    re.IGNORECASE,
)
GREETING = re.compile(
    r"^\W*(?:hey+|hi+|hello+|heya|hiya|howdy|yo+|hallo|hola|greetings|morning|evening"
    r"|good\s+(?:morning|afternoon|evening|day))\b",
    re.IGNORECASE,
)
CATCH_UP = re.compile(
    r"\b(?:long\s+time\s+no\s+(?:see|talk|chat)|(?:it'?s|it\s+has|has\s+been|it'?s\s+been|been)"
    r"\s+(?:a\s+(?:while|minute|bit)|ages|forever|too\s+long|so\s+long)"
    r"|since\s+(?:we\s+)?(?:last\s+)?(?:talked|spoke|chatted|caught\s+up)"
    r"|last\s+time\s+we\s+(?:talked|spoke|chatted)|how\s+(?:have|'ve)\s+you\s+been"
    r"|catch\s+(?:you\s+)?up|what'?s\s+new|how(?:'s|\s+is|\s+was)\s+(?:your|the)\s+(?:week|weekend"
    r"|trip|day|month))",
    re.IGNORECASE,
)
CLOSING = re.compile(
    r"(?:\b(?:bye+|goodbye|good\s*night|g'?night|nighty?\s*night|night\b|see\s+(?:you|ya|u)"
    r"|(?:talk|speak)\s+(?:to\s+(?:you|u)\s+)?(?:soon|later|tomorrow|tmrw)|ttyl|take\s+care"
    # one's own leaving, at the end of a clause ("got to go, there's a queue"), not a plan
    # ("we have to go before then")
    r"|(?:gotta|got\s+to|(?:i|i'?ve|i'?m)\s+(?:have\s+to|got\s+to|gotta|must|need\s+to))\s+"
    r"(?:go|run|dash)(?=\s*(?:[,.!…]|$|now\b|x+\b))|gtg|g2g"
    r"|have\s+(?:a\s+)?(?:good|great|nice|lovely|wonderful|fun)\b|have\s+fun|enjoy\s+(?:the|your)"
    r"|catch\s+you\s+later|cya|sleep\s+well|sweet\s+dreams|until\s+next\s+time|speak\s+soon"
    r"|love\s+(?:you|u|ya)|xx+|good\s+luck|get\s+home\s+safe|safe\s+travels|rest\s+(?:up|well|that)"
    r"|(?:kiss|hug|pat)\s+\w+\s+for\s+me|go\s+(?:to\s+bed|sleep|to\s+class|plan|study|eat|rest)"
    r"|i'?ll\s+let\s+you\s+go|off\s+to\s+(?:bed|work|class|sleep)|going\s+to\s+(?:sleep|bed)"
    r"|proud\s+of\s+you|laters|cheers)\b|[🫶❤️💕😘👋]\s*$|^\W*x+\W*$)",
    re.IGNORECASE,
)
NEWS_OPENER = re.compile(
    r"^\W*(?:ok(?:ay)?\s+(?:so|you|i|we|cabin|quick)\b|so\.|so\s+i\b|omg|oh\s+my\s+god|guess\s+(?:what|who)"
    r"|you(?:'ll|\s+will|\s+won'?t)\s+(?:never\s+)?(?:believe|guess)|news|update|big\s+news"
    r"|quick\s+question|question\b|are\s+(?:you|u)\s+(?:awake|there|around|free|up|busy|home)"
    r"|r\s+u\s+(?:awake|there|up|free)|(?:do\s+you|have\s+you\s+got|got)\s+a\s+(?:minute|sec|second)"
    r"|\[\s*(?:photo|picture|image|pic|video|voice)|happy\s+\w+|made\s+it\s+(?:back|home|to)"
    r"|i\s+did\s+a\s+thing|so\s+(?:update|news)|sorry\s+(?:i|for)\s+(?:went|been|the)\s+(?:quiet|silence|mia))",
    re.IGNORECASE,
)

_CLOCK = r"(?:one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|\d{1,2}(?::\d\d)?)"
PLAN = re.compile(
    rf"\b(?:{_CLOCK}\s+o'?clock|at\s+\d{{1,2}}:\d\d"
    # "at three" as an hour: with a.m./p.m., or ending its clause ("not at three of the guards")
    rf"|at\s+{_CLOCK}(?:\s*(?:am|pm|a\.m\.|p\.m\.)|(?=\s*(?:[,.!?;]|$)))"
    r"|at\s+(?:noon|midnight|dawn|dusk)|tomorrow|tonight|in\s+the\s+morning"
    r"|this\s+(?:afternoon|evening)|meet\s+(?:me|us)|meet\s+you\s+(?:at|by|there|tomorrow)"
    r"|see\s+you\s+(?:at|there|then|tomorrow))\b",
    re.IGNORECASE,
)
"""A meeting agreed ("Nine o'clock.", "at the big clock at three", "tomorrow, my office", "meet
me"): after a reply, the next scene is often there. Measured with `autorecap eval` on the dev
chats, as a cue of 0.8 in the last `PLAN_REACH` characters of the message two before: breaks
found 186 -> 190 of 280 through the proxy's eyes (48 -> 46 extra), dialogue 25 -> 28 of 37
(6 -> 5), group through the proxy 32 -> 33 of 47 (15 -> 14), narrated 171 -> 172 of 194
(10 -> 9). In either of the two messages before, it found one more through the proxy with 3
more extra, and moved a break of the sample chat onto the reply to "I'll tell you tonight";
with the reply by the other speaker only, 2 fewer through the proxy; 0.5 found less, 1.0 as
much with more extra. Not a greeting ("nice to meet you") nor "at one point"."""
PLAN_REACH = 160
