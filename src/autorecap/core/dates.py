"""`send_date` in every form chat files use, read through python-dateutil.

SillyTavern writes ISO strings (>= 1.14), "June 19, 2023 2:20pm" (before), "2023-4-21 @20h 02m
47s 124ms" (1.2-1.8) or epoch milliseconds; importers and other tools write "1:56 pm on 8 May,
2023", "8 May 2023 13:56", "2023/05/08 13:56:00", a JavaScript `Date`'s text ("Mon May 08 2023
13:56:00 GMT+0200 (Central European Summer Time)"), "2023年5月8日 13:56", months named in other
languages ("Montag, 8. Mai 2023 um 13:56", "le 8 mai 2023 à 13h56") and more. The common
forms take a fast path; anything else goes to dateutil's parser, and one chat repeats its forms,
so results are cached.

A date all in numbers that starts with the day or the month ("08/05/2023 13:56") is read the
way its chat writes them (`day_first`): day first as soon as one of the chat's dates can only be
(a first number above 12), month first when one can only be month first, else month first,
except with dots ("08.05.2023"), which are written day first.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from dateutil import parser as date_parser

# "2023-4-21 @20h 02m 47s 124ms" (ST 1.2-1.8 messages) and "2024-10-18@20h52m17s" (headers):
# SillyTavern's own, which no general parser reads.
_HUMANIZED = re.compile(
    r"^(\d{4})-(\d{1,2})-(\d{1,2}) ?@ ?(\d{1,2})h ?(\d{1,2})m ?(\d{1,2})s(?: ?(\d{1,3}) ?ms)?$"
)
_ZONE_NAME = re.compile(r"(?<=[+-]\d{4})\s*\([^()]*\)\s*$")
"""The zone's name in words after a JavaScript `Date`'s text ("... GMT+0200 (Central European
Summer Time)"): the offset before it says the same."""
_NAMED_OFFSET = re.compile(r"\b(?:GMT|UTC)\s*([+-])(\d{1,2})(?::?(\d{2}))?\b")
""""GMT+0200", "UTC+3": an offset east of Greenwich, as JavaScript and people write it
(dateutil reads "GMT+3" the POSIX way, three hours west)."""
_BRACKETED_OFFSET = re.compile(r"\(\s*((?:GMT|UTC)?\s*[+-]\d{1,2}(?::?\d{2})?)\s*\)")
""""(+0200)", "(UTC+2)": an offset in brackets, read as the offset."""
_CJK_DATE = re.compile(r"(\d{4})\s*年\s*(\d{1,2})\s*月\s*(\d{1,2})\s*日")
""""2023年5月8日 13:56", as Chinese and Japanese write a date."""
_HOUR_H = re.compile(r"\b(\d{1,2})\s?h\s?(\d{2})\b")
""""13h56", as French writes a time."""
_MARKS_BETWEEN = re.compile(r"\s*@\s*|\bг\.|\bam\b(?=\s*\d{1,2}\.)", re.IGNORECASE)
""""@" between a date and its time ("2023/05/08 @ 1:56pm"), Russian's "г." after the year,
German's "am" before the day ("am 8. Mai"), which dateutil would read as the morning."""
_MONTH_NAMES = (
    # French, German, Spanish, Italian, Portuguese, Dutch, Russian (with its genitive)
    "janvier janv januar jän enero ene gennaio gen janeiro januari январь января янв",
    "février fevrier févr fevr februar febrero febbraio fevereiro fev februari февраль февраля фев",
    "mars märz maerz mrz marzo março marco maart март марта мар",
    "avril avr abril abr aprile april апрель апреля апр",
    "mai mayo maggio mag maio mei май мая",
    "juin juni junio giugno giu junho июнь июня июн",
    "juillet juil juli julio luglio lug julho июль июля июл",
    "août aout agosto augustus август августа авг",
    "septembre septiembre settembre setembro сентябрь сентября сен сент",
    "octobre oktober okt octubre ottobre ott outubro октябрь октября окт",
    "novembre noviembre novembro ноябрь ноября ноя",
    "décembre decembre déc dezember dez diciembre dic dicembre dezembro december декабрь "
    "декабря дек",
)

_SKIPPED = """
    le la el il der den um à às de del om в г
    lundi mardi mercredi jeudi vendredi samedi dimanche
    montag dienstag mittwoch donnerstag freitag samstag sonntag
    lunes martes miércoles miercoles jueves viernes sábado sabado domingo
    lunedì martedì mercoledì giovedì venerdì sabato domenica
    segunda terça terca quarta quinta sexta feira
    maandag dinsdag woensdag donderdag vrijdag zaterdag zondag
    понедельник вторник среда четверг пятница суббота воскресенье
"""
"""Words between a date's parts, and the weekdays, in those languages: skipped."""


class _ManyLanguages(date_parser.parserinfo):
    """dateutil's English words, and the months' names in the languages a chat app's locale
    writes them in ("8. Mai 2023 13:56", "le 8 mai 2023 à 13h56", "8 мая 2023 г., 13:56")."""

    def __init__(self) -> None:
        months: Any = [
            (*english, *names.split())
            for english, names in zip(date_parser.parserinfo.MONTHS, _MONTH_NAMES, strict=True)
        ]
        self.MONTHS = months
        self.JUMP = [*date_parser.parserinfo.JUMP, *_SKIPPED.split()]
        super().__init__()


_MANY_LANGUAGES = _ManyLanguages()
_NO_DATE = datetime(1970, 1, 1)
"""What dateutil fills in for parts a text leaves out (a fixed day, so results never depend on
today's date)."""
_OTHER_DAY = datetime(1970, 1, 2)
"""A second default day: a text whose reading changes with it gave no day."""
_NUMERIC = re.compile(r"^(\d{1,2})([./-])(\d{1,2})\2\d{2,4}\b")
"""A date in numbers with the day or the month first (not the year: "2023/05/08" is no
question)."""
_EPOCH_SECONDS_BELOW = 100_000_000_000
"""A number below this is epoch seconds, not milliseconds (ms that small are before 1973)."""


def parse_send_date(value: Any, *, day_first: bool = False) -> datetime | None:
    """Read a `send_date` (or a header's `create_date`); None when it is missing or unreadable.
    `day_first`: how its chat writes a date in numbers ("08/05/2023"; see `day_first`).

    Epoch numbers and texts with a zone give aware datetimes; texts without one (the writer's
    local time) come back naive: `as_utc` compares the two kinds.
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return _from_epoch(float(value))
    if not isinstance(value, str):
        return None
    text = value.strip()
    return _parse_text(text, day_first and bool(_NUMERIC.match(text)))


def numeric(value: Any) -> bool:
    """Whether a `send_date` is a date in numbers with the day or the month first, whose
    reading depends on its chat (`day_first`)."""
    return isinstance(value, str) and bool(_NUMERIC.match(value.strip()))


def day_first(values: Iterable[Any]) -> bool | None:
    """How a chat writes its dates in numbers, from its `send_date` values: True (day first)
    as soon as one has a first number above 12, False as soon as one has a second number above
    12; else True when they are written with dots ("08.05.2023"), None when nothing tells."""
    dotted = False
    for value in values:
        if not isinstance(value, str):
            continue
        match = _NUMERIC.match(value.strip())
        if match is None:
            continue
        first, second = int(match.group(1)), int(match.group(3))
        if first > 12 >= second:
            return True
        if second > 12 >= first:
            return False
        dotted = dotted or match.group(2) == "."
    return True if dotted else None


def as_utc(moment: datetime) -> datetime:
    """An aware datetime; a naive one is taken as UTC (only differences between the messages of
    one chat are compared, and one chat's naive dates share a zone)."""
    return moment if moment.tzinfo else moment.replace(tzinfo=UTC)


@lru_cache(maxsize=8192)
def _parse_text(text: str, day_first: bool = False) -> datetime | None:
    if not text:
        return None
    if text.isdigit():
        return _from_epoch(float(text))
    try:
        iso = datetime.fromisoformat(text)
    except ValueError:
        pass
    else:
        return iso if iso.tzinfo else iso.replace(tzinfo=UTC)
    match = _HUMANIZED.match(text)
    if match:
        year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
        try:
            return datetime(year, month, day, hour, minute, second, int(match.group(7) or 0) * 1000)
        except ValueError:
            return None
    plain = _plain(text)
    parsed: datetime | None
    try:
        parsed = date_parser.parse(plain, default=_NO_DATE, dayfirst=day_first)
        parsed.utcoffset()  # an offset of a day or more ("GMT+24") is no zone
    except (ValueError, OverflowError):
        parsed = _in_other_words(plain, day_first)
    if parsed is None:
        return None
    # A text with no year ("Tuesday 3pm") is not a date a chat can be ordered by.
    return None if parsed.year == _NO_DATE.year and str(_NO_DATE.year) not in text else parsed


def _in_other_words(plain: str, day_first: bool) -> datetime | None:
    """A date dateutil's English does not read (`plain`: the text as `_plain` gives it): months
    and weekdays named in another language, words between the parts ("à", "um", "@"), "13h56".
    Only with its day: "Mars 2023" or "la 2023" in prose is no date."""
    plain = _HOUR_H.sub(r"\1:\2", _MARKS_BETWEEN.sub(" ", plain))
    found = []
    for default in (_NO_DATE, _OTHER_DAY):
        try:
            parsed = date_parser.parse(
                plain, parserinfo=_MANY_LANGUAGES, default=default, dayfirst=day_first
            )
            parsed.utcoffset()
        except (ValueError, OverflowError):
            return None
        found.append(parsed)
    return found[0] if found[0].day == found[1].day else None


def _plain(text: str) -> str:
    """The text as dateutil reads it right: no zone name in words after the offset, an offset
    out of its brackets, one written "GMT+0200" as "+02:00", a date written with 年, 月 and 日
    in ISO order."""
    text = _ZONE_NAME.sub("", text)
    text = _BRACKETED_OFFSET.sub(r"\1", text)
    text = _NAMED_OFFSET.sub(lambda m: f" {m[1]}{int(m[2]):02d}:{m[3] or '00'}", text)
    return _CJK_DATE.sub(lambda m: f"{m[1]}-{int(m[2]):02d}-{int(m[3]):02d} ", text)


def _from_epoch(number: float) -> datetime | None:
    seconds = number if abs(number) < _EPOCH_SECONDS_BELOW else number / 1000
    try:
        return datetime.fromtimestamp(seconds, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None
