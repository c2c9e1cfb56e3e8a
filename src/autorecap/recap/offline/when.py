"""Relative times made absolute: "yesterday" in a scene of 8 May 2023 is 7 May 2023.

A recap is read long after the scene, when "yesterday" no longer means anything. Given the
scene's date, the common relative phrases are replaced by the date they name; a phrase that
names the scene's own day ("today", "this morning") is left as it is, since the recap says the
scene's date.
"""

from __future__ import annotations

import re
from datetime import date, timedelta

_WEEKDAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")
_NUMBERS = {
    "a": 1,
    "an": 1,
    "one": 1,
    "two": 2,
    "three": 3,
    "four": 4,
    "five": 5,
    "six": 6,
    "seven": 7,
    "eight": 8,
    "nine": 9,
    "ten": 10,
    "a couple of": 2,
    "a couple": 2,
    "couple of": 2,
    "a few": 3,
}
_VAGUE = frozenset({"a few", "a couple", "a couple of", "couple of"})
_COUNT = (
    r"\d+|a couple(?: of)?|couple of|a few|an?|one|two|three|four|five|six|seven|eight|nine|ten"
)
_RELATIVE = re.compile(
    r"\b(?:"
    r"(?P<before_yesterday>the\s+day\s+before\s+yesterday)"
    r"|(?P<after_tomorrow>the\s+day\s+after\s+tomorrow)"
    r"|(?P<yesterday>(?:yesterday|yday)(?:\s+(?P<ypart>morning|afternoon|evening|night))?"
    r"|(?<!the )last\s+night)"  # "the last night of the fair" is no relative date
    r"|(?P<tomorrow>(?:tomorrow|tmrw|tmr)(?:\s+(?P<tpart>morning|afternoon|evening|night))?)"
    rf"|(?P<ago>(?P<ago_n>{_COUNT})\s+(?P<ago_unit>days?|weeks?|months?|years?)\s+ago)"
    rf"|(?P<in>in\s+(?P<in_n>{_COUNT})\s+(?P<in_unit>days?|weeks?))"
    # "the last Tuesday of January" is no relative date: not after "the", nor before "of".
    r"|(?<!the )(?P<last>last|next)\s+(?P<span>week(?:end)?|month|year"
    r"|monday|tuesday|wednesday|thursday|friday|saturday|sunday)(?!\s+of\b)"
    r")\b"
    # "tomorrow's game": a possessive, which the date takes another way (`_owned`); and the
    # "'s" of "is" ("tomorrow's the day"), which a determiner, pronoun or adverb follows.
    # A participle, an adjective or a name follows the "is" (or "has") too ("tomorrow's
    # cancelled", "tomorrow's busy", "tomorrow's Friday", "yesterday's been rough").
    r"(?:(?P<owner>['’]s\b(?=\s+(?-i:[a-z0-9]))(?!\s+(?:the|a|an|my|your|his|her|its|our|their"
    r"|this|that|it|not|also|just|still|gonna|when|too|fine|good|ok|okay|perfect|here"
    r"|there|over|so|really|finally|already|going|coming|getting|looking|happening"
    r"|starting|been|got|busy|free|better|worse|great|bad|rough|hard|easy|big|open|closed"
    r"|full|probably|definitely|supposed|likely|off|on|out|booked|due)\b"
    r"|\s+\w{2,}[^e\W]ed\b))|(?P<is>['’]s\b(?=\s+\w)))?",
    re.IGNORECASE,
)


def day_text(day: date) -> str:
    """7 May 2023."""
    return f"{day.day} {day:%B} {day.year}"


def only_when(text: str) -> bool:
    """Whether a clause says nothing but a relative time ("Tomorrow.", "Last week!"): made a
    date, it would stand alone in a recap ("On 17 September 2024."), telling nothing."""
    return bool(_RELATIVE.fullmatch(text.strip(" .,;:!?…\"'“”*")))


def resolve(text: str, today: date | None) -> str:
    """`text` with its relative times replaced by dates (nothing changes without `today`)."""
    if today is None or not _RELATIVE.search(text):
        return text
    return _RELATIVE.sub(lambda match: _as_said(match, today), text)


_SUBJECT_OF = re.compile(r"(?:\s+(?:was|is|were|got|has|had|felt|seemed|went|will)\b|['’]s\b)")
"""What follows a time that is the subject of its sentence ("Yesterday was awful")."""


_PREPOSITION = re.compile(
    r"\b(?:for|since|until|till|til|from|of|than|before|after|like|during|through)\s+$",
    re.IGNORECASE,
)
"""What ends the text before a time that its own preposition already leads ("thanks for
yesterday", "wait until tomorrow"). Not "in", "on", "by", "about" or "to": before a relative
time they are mostly a verb's ("I moved in yesterday", "drop by tomorrow", "love to
tomorrow"), which keeps the "on" of the date."""


def _as_said(match: re.Match[str], today: date) -> str:
    """The date a relative time names, without its "on" or "in" where the time was the
    subject ("7 May 2023 was awful", not "On 7 May 2023 was awful") or followed another
    preposition ("thanks for 23 November 2023", not "for on 23 November 2023")."""
    replaced = _replacement(match, today)
    if match.group("owner"):
        return _capitalised(_owned(match, replaced), match)
    if match.group("is"):
        subject = replaced[3:] if replaced.startswith(("on ", "in ")) else replaced
        has = _HAS.match(match.string, match.end())  # "yesterday's been rough"
        return f"{subject} {'has' if has else 'is'}"
    if not replaced.startswith(("on ", "in ")):
        return replaced
    if _SUBJECT_OF.match(match.string, match.end()) or _PREPOSITION.search(
        match.string, 0, match.start()
    ):
        return replaced[3:]
    return replaced


_HAS = re.compile(r"\s+(?:been|got|gotten|had)\b", re.IGNORECASE)
"""What follows the "'s" of "has"."""


def _owned(match: re.Match[str], replaced: str) -> str:
    """A possessive time as a date: a day before its noun ("the 9 May 2023 game"), a month or
    a year as a possessive ("April 2023's rent"); a week, a weekend or a night is left as
    said ("last week's meeting"), which no date would phrase better."""
    if replaced.startswith("on ") and not replaced.startswith("on the "):
        return f"the {replaced[3:]}"
    if replaced.startswith("in "):
        return replaced[3:] + match.group("owner")  # its own "'s" or "’s"
    return match.group(0)


def _capitalised(text: str, match: re.Match[str]) -> str:
    """`text` with a capital where the time it replaces had one ("Yesterday's news")."""
    return text[:1].upper() + text[1:] if match.group(0)[:1].isupper() else text


def _replacement(match: re.Match[str], today: date) -> str:
    groups = match.groupdict()
    if groups["before_yesterday"]:
        return f"on {day_text(today - timedelta(days=2))}"
    if groups["after_tomorrow"]:
        return f"on {day_text(today + timedelta(days=2))}"
    if groups["yesterday"]:
        part = groups["ypart"] or ("night" if "night" in groups["yesterday"].lower() else "")
        return f"on {_part_of(part)}{day_text(today - timedelta(days=1))}"
    if groups["tomorrow"]:
        return f"on {_part_of(groups['tpart'])}{day_text(today + timedelta(days=1))}"
    if groups["ago"]:
        if " ".join(groups["ago_n"].lower().split()) in _VAGUE:  # "a few days before 8 May"
            return f"{groups['ago_n']} {groups['ago_unit']} before {day_text(today)}"
        count = _count(groups["ago_n"])
        return _shifted(today, -count, groups["ago_unit"])
    if groups["in"]:
        count = _count(groups["in_n"])
        return _shifted(today, count, groups["in_unit"])
    direction = -1 if groups["last"].lower() == "last" else 1
    span = groups["span"].lower()
    if span in _WEEKDAYS:
        return f"on {day_text(_weekday(today, _WEEKDAYS.index(span), direction))}"
    if span == "week":
        return f"the week {'before' if direction < 0 else 'after'} {day_text(today)}"
    if span == "weekend":
        return f"the weekend {'before' if direction < 0 else 'after'} {day_text(today)}"
    if span == "month":
        month = (today.month - 1 + direction) % 12 + 1
        year = today.year + (today.month - 1 + direction) // 12
        return f"in {date(year, month, 1):%B} {year}"
    return f"in {today.year + direction}"


def _part_of(part: str | None) -> str:
    """ "the night of " for "tomorrow night"; "" for a whole day."""
    return f"the {part.lower()} of " if part else ""


def _count(word: str) -> int:
    word = " ".join(word.lower().split())
    return int(word) if word.isdigit() else _NUMBERS.get(word, 1)


def _shifted(today: date, count: int, unit: str) -> str:
    unit = unit.lower().rstrip("s")
    if unit == "day":
        return f"on {day_text(today + timedelta(days=count))}"
    if unit == "week":
        return f"the week of {day_text(today + timedelta(weeks=count))}"
    if unit == "month":
        total = today.month - 1 + count
        return f"in {date(today.year + total // 12, total % 12 + 1, 1):%B %Y}"
    return f"in {today.year + count}"


def _weekday(today: date, weekday: int, direction: int) -> date:
    """The weekday before (direction -1) or after (1) `today`, never `today` itself."""
    step = (today.weekday() - weekday) % 7 or 7
    if direction < 0:
        return today - timedelta(days=step)
    return today + timedelta(days=(weekday - today.weekday()) % 7 or 7)
