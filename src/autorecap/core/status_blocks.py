"""Status blocks: the tracker many character cards print before or after each reply, a few
fields that say where and when the scene is and how the characters stand, such as

    ---
    📍 Location: The Rusty Anchor
    🕐 Time: Day 3, evening
    ❤️ Affection: 35/100

or one line of them ("[Location: The Rusty Anchor | Time: Day 3 | HP: 80/100]"), emoji with no
keys ("📍 The Rusty Anchor | 🕐 Day 3"), a Markdown table or an HTML one (`<td>` cells, `<th>`
titles), often in a code fence or in HTML (`<details><summary>Status</summary>...</details>`).
Printed again on
every message with a number or two changed, a block is no event of the story: recaps that kept
it kept "Affection: 37/100" instead of what was said. A block is told from a list the story
gives (a packing list, a letter's header, a case file, a script of lines) by its fields: three
of them must be what trackers keep count of (where, when, moods, clothes, gauges), or two and
a tracker's mark. `without_status` leaves the blocks out; `status_fields` reads their fields;
`split_status` does both at once.

May import: nothing of autorecap.
"""

from __future__ import annotations

import re
from functools import lru_cache

_TAG = re.compile(r"<\s*(/?)\s*([a-zA-Z][\w-]*)[^<>]*>")
_BREAK_TAGS = frozenset({"br", "p", "div", "details", "summary", "li", "tr", "table", "ul", "hr"})
_CELL_TAGS = frozenset({"td", "th"})
_TITLES_RULE = "|---|"
"""The rule read under an HTML table's row of titles (`_lines`); not the story's."""
_FENCE = re.compile(r"^\s*```[\w-]*\s*$")
_RULE = re.compile(r"^\s*(?:[-*_=~•·─━]\s*){3,}$")
_KEY = r"[^\W\d_][\w'’./&-]*(?:[ ][\w'’./&-]+){0,2}?"
"""A field's name: one to three words."""
_FIELD = re.compile(
    # decoration (emoji, bullets, quote marks, markup), the key, a colon, the value
    rf"^[^\w\n]{{0,8}}({_KEY})[*_]{{0,2}}\s*[:：]\s*[*_]{{0,2}}(\S.{{0,239}})$"
)
_SEGMENT = re.compile(rf"(?:^|[|•])\s*[^\w|•]{{0,6}}({_KEY})\s*[:：]\s*([^|•]+)")
_HEADING = re.compile(
    r"^(?:#{1,4}\s*|\*\*|__|\[|【|『)\s*[^\W\d_][\w' ]{0,24}\s*(?:\*\*|__|\]|】|』)?\s*[:：]?$"
    r"|^(?i:status|stats|tracker|info|scene info|character status)\s*[:：]?$"
)
"""A title over the fields ("**Status**", "[Stats]", "## Tracker", "Status:")."""
_TRACKER_KEY = re.compile(
    r"\b(?:locations?|place|setting|scene|area|whereabouts|time|date|day|weather|season"
    r"|temperature|mood|emotions?|feelings?|outfit|clothing|clothes|attire|wearing|affection"
    r"|relationship|love|trust|lust|arousal|hp|health|mp|mana|energy|stamina|hunger|thirst"
    r"|status|thoughts?|goal|objective|posture"
    # the same in the languages SillyTavern's users often play in
    r"|lieu|heure|météo|humeur|tenue|ort|zeit|datum|wetter|stimmung|kleidung|ubicación|lugar"
    r"|hora|fecha|clima|ánimo|ropa|roupa|локация|место|время|дата|погода"
    r"|настроение|одежда|отношения|здоровье)\b"
    r"|地点|时间|日期|天气|心情|好感|服装|状态|位置|場所|時間|日付|天気|気分|好感度|体力|장소|시간"
    r"|날짜|날씨|기분|호감도",
    re.IGNORECASE,
)
"""What trackers keep count of: where, when, the weather, moods, clothes, gauges. A block needs
`TRACKED_ALONE` such fields, or two and a tracker's mark: "Gold", "Rope", "To", "From",
"Suspect" or a speaker's name is no tracker's field, and a packing list, a letter's header, a
case file or a script of lines keeps its text."""
_MARK = re.compile(r"\d+\s*/\s*(?:5|10|100|1000)\b|\d+\s*%|[\U0001F300-\U0001FAFF\u2600-\u27BF]")
"""What a tracker has and a story's lines rarely do: a gauge ("35/100", "80%") or an emoji."""
TRACKED_ALONE = 3
"""A tracker's fields that make a block with no mark around them: "Time: 8 p.m." and "Place:
the old chapel" under a note are the story's."""
LONGEST_VALUE_WORDS = 40
"""A field's value is a few words, or a thought in a sentence or two; longer is prose."""


def without_status(text: str) -> str:
    """`text` without the status blocks at its start and end (the rest as it was)."""
    return split_status(text)[0]


def status_fields(text: str) -> dict[str, str]:
    """The fields of the status blocks at the start and end of `text`, by their key in lower
    case without decoration ("location": "The Rusty Anchor"); {} when it has none."""
    return split_status(text)[1]


def split_status(text: str) -> tuple[str, dict[str, str]]:
    """`without_status` and `status_fields` of `text`, read once."""
    story, fields = _split(text)
    return story, dict(fields)


@lru_cache(maxsize=4096)
def _split(text: str) -> tuple[str, tuple[tuple[str, str], ...]]:
    """`split_status`, cached: recaps, recall and the scene cues each read a message's story."""
    if not _MAY_HOLD.search(text):
        return text, ()
    lines = _lines(text)
    read = _as_fields(lines)
    start, end = _block_bounds(read)
    if start == 0 and end == len(lines):
        return text, ()
    fields: dict[str, str] = {}
    for line, _tagged, _derived in [*read[:start], *read[end:]]:
        for key, value in _fields_of(line):
            fields.setdefault(key.strip().lower(), value.strip(" *_`").removesuffix("]").strip())
    story = "\n".join(
        line for line, tagged in lines[start:end] if not (tagged and line == _TITLES_RULE)
    ).strip()
    return story, tuple(fields.items())


def _lines(text: str) -> list[tuple[str, bool]]:
    """The message's lines, HTML tags that break lines taken as breaks and the others left
    out, an HTML table's rows as a Markdown table's; each with whether a tag was on it."""
    if "<" not in text:
        return [(line, False) for line in text.split("\n")]
    out: list[tuple[str, bool]] = []
    for raw in text.split("\n"):
        pieces = _TAG.split(raw)
        if len(pieces) == 1:
            out.append((raw, False))
            continue
        current = pieces[0]
        cells, titles = 0, False  # the row's cells so far; whether they are titles (<th>)
        # split() gives text, then (closing slash, tag name, text) per tag
        for at in range(1, len(pieces), 3):
            closing, name = pieces[at] == "/", pieces[at + 1].lower()
            if name in _CELL_TAGS and not closing:
                # An HTML table's row of cells is read as a Markdown table's ("| a | b |"); a
                # row of one cell ("📍 Location: Inn") as its text.
                current += " | " if cells else ""
                cells += 1
                titles = titles or name == "th"
            if name in _BREAK_TAGS:
                row = name == "tr" and closing and cells >= 2
                out.append((f"| {current.strip()} |" if row else current, True))
                if row and titles:
                    out.append((_TITLES_RULE, True))  # titles over values, as Markdown has them
                current, cells, titles = "", 0, False
            current += pieces[at + 2]
        out.append((current, True))
    return out


_EMOJI_KEYS = {
    "location": "📍🗺🏠🏙🌍",
    "time": "🕐🕑🕒🕓🕔🕕🕖🕗🕘🕙🕚🕛🕜🕝🕞🕟🕠🕡🕢🕣🕤🕥🕦🕧⏰⌚🕰⏳",
    "date": "📅📆🗓",
    "weather": "🌤⛅🌥🌦🌧⛈🌩🌨❄☀☁☔🌫",
    "temperature": "🌡",
    "affection": "❤💕💖💗💘💞💓💜💙💚🧡💛",
    "mood": "😊🙂😐😶😢😠😡😳🎭",
    "outfit": "👗👕👔🧥👘👚👖",
    "thoughts": "💭🧠",
    "health": "🩸",
    "energy": "⚡🔋",
}
"""What a tracker's emoji stands for when it has no key after it ("📍 The Rusty Anchor |
🕐 Day 3"): the key it is read with."""
_EMOJI_OF = {emoji: key for key, emojis in _EMOJI_KEYS.items() for emoji in emojis}
_EMOJI_KEY = re.compile(
    "(?:^|[|•])\\s*([" + "".join(_EMOJI_OF) + "])\ufe0f?\\s*(?![^|•:：]{0,30}[:：])([^|•]+)"
)
"""A tracker's emoji and the value after it, with no key between ("📍 The Rusty Anchor")."""
_MAY_HOLD = re.compile("[:：|" + "".join(_EMOJI_OF) + "]|<t[dh]\\b", re.IGNORECASE)
"""What every status block has: a key's colon, a table's bar or cell, or a tracker's emoji."""
_TABLE_LINE = re.compile(r"^\s*\|.*\|\s*$")
"""A Markdown table's row or rule."""
_TABLE_RULE = re.compile(r"^\s*\|?\s*:?-{3,}:?\s*(?:\|\s*:?-{3,}:?\s*)*\|?\s*$")


_Read = tuple[str, bool, bool]
"""A line as a block is read: its text as fields, whether a tag was on it, and whether its
fields were read from another form (a table, emoji standing for keys)."""


def _as_fields(lines: list[tuple[str, bool]]) -> list[_Read]:
    """The lines as fields where a tracker writes them another way, one line for one line: a
    Markdown table (`_table_fields`) and emoji standing for keys ("📍 The Rusty Anchor |
    🕐 Day 3"). The story keeps what was written; this is only how a block is read."""
    read = [
        (fields, tagged, fields != line)
        for line, tagged in lines
        for fields in [_emoji_fields(line)]
    ]
    at = 0
    while at < len(read):
        rows: list[int] = []  # a table's rows; an HTML table's tags leave empty lines between
        end = at
        while end < len(read) and (
            _TABLE_LINE.match(read[end][0]) or (rows and read[end][1] and not read[end][0].strip())
        ):
            if read[end][0].strip():
                rows.append(end)
            end += 1
        if not rows:
            at += 1
            continue
        table = _table_fields([read[i][0] for i in rows])
        for i, line in zip(rows, table, strict=True):
            read[i] = (line, read[i][1], True)
        at = end
    return read


def _table_fields(rows: list[str]) -> list[str]:
    """A Markdown table's rows as fields, one line for one row: one row of values under a row
    of keys ("| Location | Time |", "|---|---|", "| Inn | Day 3 |"), or a key and a value per
    row (under a row of titles when a rule follows the first). Its rules read as rules; a table
    of another shape stays as it was (its rows are no fields)."""
    ruled = [bool(_TABLE_RULE.match(row)) for row in rows]
    cells = [[] if rule else _cells(row) for row, rule in zip(rows, ruled, strict=True)]
    at = [i for i, rule in enumerate(ruled) if not rule]
    out = ["---" if rule else row for row, rule in zip(rows, ruled, strict=True)]
    if any(ruled) and len(at) == 2 and len(cells[at[0]]) == len(cells[at[1]]) >= 2:
        keys, values = cells[at[0]], cells[at[1]]
        out[at[0]] = " | ".join(f"{k}: {v}" for k, v in zip(keys, values, strict=True))
        out[at[1]] = ""
    elif all(len(cells[i]) == 2 for i in at):
        for i in at:
            titles = i == at[0] and i + 1 < len(rows) and ruled[i + 1]
            out[i] = "" if titles else f"{cells[i][0]}: {cells[i][1]}"
    return out


def _cells(row: str) -> list[str]:
    """A Markdown table row's cells, without their markup."""
    inner = row.strip().removeprefix("|").removesuffix("|")
    return [cell.strip().strip("*_`").strip() for cell in inner.split("|")]


def _emoji_fields(line: str) -> str:
    """A line of a tracker's emoji with values and no keys, as fields (else as it was)."""
    found = list(_EMOJI_KEY.finditer(line.strip()))
    if not found or _TABLE_LINE.match(line):
        return line
    rest = _EMOJI_KEY.sub("", line.strip()).strip(" |•")
    if rest:
        return line  # something else on the line: the story's
    # (the emoji go: standing for a key, they are no tracker's mark besides, and "📍 Paris"
    # over "🕐 3pm" in a text message is a plan)
    return " | ".join(f"{_EMOJI_OF[m.group(1)]}: {m.group(2).strip()}" for m in found)


def _fields_of(line: str) -> list[tuple[str, str]]:
    """The `Key: value` fields a line holds: one, or several in a row ("A: x | B: y")."""
    plain = line.strip().strip("[]`").strip()
    segments = _SEGMENT.findall(plain)
    if len(segments) >= 2:
        return [(k, v) for k, v in segments if _value(v)]
    match = _FIELD.match(plain)
    if match and _value(match.group(2)):
        return [(match.group(1), match.group(2))]
    return []


def _value(value: str) -> bool:
    """Whether what follows a colon reads as a field's value, not as prose."""
    bare = value.strip().strip("*_`\"“”'’").strip()
    return bool(bare) and len(bare.split()) <= LONGEST_VALUE_WORDS


def _block_bounds(lines: list[_Read]) -> tuple[int, int]:
    """Where the story is: the lines from the first after a leading status block to the last
    before a trailing one (0 and len(lines) when there is neither)."""
    start = 0
    head = _block_length(lines)
    if head:
        start = head
    end = len(lines)
    tail = _block_length(lines[start:][::-1])
    if tail:
        end = len(lines) - tail
    return start, end


def _block_length(lines: list[_Read]) -> int:
    """How many lines from the top are a status block (0: none): fields, with the blanks,
    fences, rules and titles among them, the fields' keys all different, `TRACKED_ALONE` of
    them a tracker's (`_TRACKER_KEY`), or two and a tracker's mark (a fence, a tag, a title, a
    gauge, an emoji, several fields on one line). Fields read from a table or from emoji
    standing for keys need two and a mark besides their form: an itinerary the story gives,
    or "😊 can't wait / ❤ love you" in a text, are no tracker."""
    keys: list[str] = []
    marked = False
    derived = False
    taken = 0
    for at, (line, tagged, read_as) in enumerate(lines):
        stripped = line.strip()
        fields = _fields_of(stripped) if stripped else []
        if fields:
            keys.extend(k.strip().lower() for k, _v in fields)
            several = len(fields) >= 2 and not read_as
            # (an HTML table's own tags are its form, no mark, as a Markdown table's bars are)
            marked = marked or (tagged and not read_as) or several or bool(_MARK.search(stripped))
            derived = derived or read_as
            taken = at + 1
        elif not stripped or _RULE.match(stripped):
            continue
        elif _FENCE.match(stripped) or (tagged and not stripped.strip("<>/ ")):
            marked = True
        elif _HEADING.match(stripped) or (tagged and _title(stripped)):
            marked = True
            if keys:  # read from the end: the title over the fields read so far
                taken = at + 1
                break
            continue  # a title over the fields to come
        else:
            break
    else:
        taken = len(lines)  # the whole message: fields, and what decorates them
    if len(keys) < 2 or len(set(keys)) < len(keys):
        return 0
    tracked = sum(1 for key in keys if _TRACKER_KEY.search(key))
    if (tracked < TRACKED_ALONE or derived) and not (tracked >= 2 and marked):
        return 0
    # the blanks and decoration just after the last field go with the block
    while taken < len(lines) and _decoration(lines[taken][0]):
        taken += 1
    return taken


def _title(line: str) -> bool:
    """A few words with no sentence's punctuation, as an HTML summary over fields."""
    return len(line.split()) <= 3 and not re.search(r"[.!?,;\"“”]", line)


def _decoration(line: str) -> bool:
    stripped = line.strip()
    return not stripped or bool(_FENCE.match(stripped) or _RULE.match(stripped))


_PLACE_KEYS = (
    re.compile(r"\blocat", re.IGNORECASE),
    re.compile(
        r"\b(?:place|setting|scene|area|whereabouts|lieu|ort|ubicación|lugar|локация"
        r"|место)\b|地点|位置|場所|장소",
        re.IGNORECASE,
    ),
)
"""Where a status block says the scene is: a location before any other place."""
_TIME_KEY = re.compile(
    r"\b(?:time|date|day|when|heure|zeit|datum|hora|fecha|время|дата)\b"
    r"|时间|日期|時間|日付|시간|날짜",
    re.IGNORECASE,
)
_MONTH = r"(?:jan|feb|mar|apr|may|jun|jul|aug|sep|oct|nov|dec)[a-z]*\.?"
_DAY = re.compile(
    rf"\b(?:day|jour|tag|d[íi]a|день)\s*\d+|第\s*\d+\s*[天日]|\d+\s*日目"
    rf"|\b\d{{1,4}}[-/.]\d{{1,2}}[-/.]\d{{1,4}}\b|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?"
    rf"{_MONTH}|\b{_MONTH}\s+\d{{1,2}}(?:st|nd|rd|th)?\b|\b(?:mon|tues|wednes|thurs|fri|satur|sun)day\b",
    re.IGNORECASE,
)
"""The day in a status's time ("Day 3", "Jour 3", "3日目", "3 May", "2023-05-08", "Tuesday"),
not its hour."""


def status_place(text: str) -> str:
    """The place a message's status block gives, as written ("" when it gives none)."""
    return _place(status_fields(text))


def _place(fields: dict[str, str]) -> str:
    for key in _PLACE_KEYS:
        found = next((v for k, v in fields.items() if key.search(k)), "")
        if found:
            return found
    return ""


def where_and_when(text: str) -> tuple[str, str]:
    """The place a message's status block gives and the day of its time, each in lower case
    ("" when it gives none): what a scene's cues compare from one status to the next."""
    return place_and_day(status_fields(text))


def place_and_day(fields: dict[str, str]) -> tuple[str, str]:
    """`where_and_when` from a status block's fields (`status_fields`)."""
    if not fields:
        return "", ""
    times = " ".join(v for k, v in fields.items() if _TIME_KEY.search(k))
    # in any order ("Monday, May 8" and "May 8 (Monday)" are one day)
    day = sorted({" ".join(m.group(0).lower().split()) for m in _DAY.finditer(times)})
    place = re.sub(r"^the\s+", "", " ".join(_place(fields).lower().split()))
    return place, " ".join(day)
