"""Numbers, in digits and in words, and what a recap's sentence gains by holding one.

A number is what memory is asked for most (a code, a price, a date, a count): `number_value`
weighs one in digits (a code more than a count, a count more than a clock time), `spelled_number`
and `exact_numbers` find one in words, and `dated_years` the years that only date something.

May import: the standard library.
"""

from __future__ import annotations

import re

NUMBER_VALUE = 9.0
"""What a number is worth (a code, a price, a date, a count: what memory is asked for)."""
_DIGITS = re.compile(r"\d")
_CLOCK = re.compile(r"^\d{1,2}[:.]\d{2}$")
_MONTH_NAME = (
    r"(?:jan(?:uary)?|feb(?:ruary)?|mar(?:ch)?|apr(?:il)?|may|june?|july?|aug(?:ust)?"
    r"|sep(?:t(?:ember)?)?|oct(?:ober)?|nov(?:ember)?|dec(?:ember)?)"
)
_DATED_YEAR = re.compile(
    r"(?:"
    rf"\b{_MONTH_NAME}\.?,?\s+(?:\d{{1,2}}(?:st|nd|rd|th)?,?\s+)?"
    rf"|\b\d{{1,2}}(?:st|nd|rd|th)?\s+(?:of\s+)?{_MONTH_NAME}\.?,?\s+"
    r"|\b(?:in|since|until|till|by|before|after|around|circa)\s+(?:the\s+year\s+)?"
    r"|\b(?:spring|summer|autumn|fall|winter)\s+(?:of\s+)?"
    r")((?:1[5-9]|20)\d\d)\b",
    re.IGNORECASE,
)
"""A year where a date says it ("2 February 2024", "March 3, 1998", "in 1966", "Spring
1906"): one number like any other, though it has four digits (a PIN of 1987 stays a code)."""
_CODE = re.compile(r"^(?=.*\d)(?=.*[a-z-]).{4,}$|^\d{4,}$")


SPELLED_SHARE = 0.5
"""What a lone number in words ("four silver", "a hundred crowns") is worth, as a share of one
in digits: prose spells out its prices and counts as often as it writes them in digits, but
also counts steps and glances. An exact one ("twenty-three", "three hundred and nineteen") is
worth as much as in digits (`exact_numbers`). Measured with `autorecap eval` at 2,000 tokens,
against every number in words at this share: planted facts in the running recap alone and with
recall 237 -> 241 and 256 -> 259 of 298 held out (answer words 77.3 -> 77.6%), 195 -> 193 and
201 -> 203 of 220 on the dev chats (81.8 -> 81.4%), generated unchanged; at 1,000 tokens, held
out 221 -> 227 and 242 -> 245, dev 186 -> 188 and 190 -> 193, answer words within a point."""
_SPELLED = frozenset(
    """
    two three four five six seven eight nine ten eleven twelve thirteen fourteen fifteen
    sixteen seventeen eighteen nineteen twenty thirty forty fifty sixty seventy eighty ninety
    hundred thousand million billion dozen
    """.split()
)


_TENS = frozenset("twenty thirty forty fifty sixty seventy eighty ninety".split())


def spelled_number(word: str) -> bool:
    """Whether a lower-case word is a number in words ("four", "twenty-three", "forty-one");
    not "one" alone, which is mostly a pronoun."""
    parts = word.split("-")
    if len(parts) == 2 and parts[0] in _TENS and parts[1] == "one":
        return True
    return bool(word) and all(part in _SPELLED for part in parts)


CODE_FACTOR = 2.0
"""How much more a code is worth than a plain number of as many digits."""


def number_value(word: str) -> float:
    """What a word with digits is worth: a code, an address or a long number ("14-02-27",
    "c-2209", "60312") is asked for later more than a clock time, which narration is full
    of."""
    if _CLOCK.match(word):
        return NUMBER_VALUE * 0.5
    # A long code must be kept whole to be any use, and costs tokens in proportion to its
    # digits: it is worth as much more.
    digits = max(1.0, len(_DIGITS.findall(word)) / 3)
    if _CODE.match(word):
        # A code tells nothing else, and is asked for word for word: it must outweigh the
        # clause around it ("number 7-SABLE-22 if anybody asks, and anybody who...").
        return NUMBER_VALUE * CODE_FACTOR * digits
    return NUMBER_VALUE * digits


_NUMBER_WORD = (
    r"(?:zero|one|two|three|four|five|six|seven|eight|nine|ten|eleven|twelve|thirteen|fourteen"
    r"|fifteen|sixteen|seventeen|eighteen|nineteen|twenty|thirty|forty|fifty|sixty|seventy"
    r"|eighty|ninety|hundred|thousand|million|billion|dozen)"
)
_EXACT = re.compile(
    rf"\b{_NUMBER_WORD}(?:(?:-|[ \t]+|(?:(?<=hundred)|(?<=thousand)|(?<=million))[ \t]+and[ \t]+)"
    rf"{_NUMBER_WORD})+\b",
    re.IGNORECASE,
)
"""Number words joined by hyphens or spaces ("thirty-seven", "nine-one-one", "one hundred"),
with "and" only after a hundred, a thousand or a million ("a hundred and one"): a comma or a
full stop ends a number ("two, three, four steps" are three)."""


def exact_numbers(text: str) -> set[str]:
    """The words (lower case, a hyphened compound as one) of the exact numbers in words that
    `text` holds: worth what they are in digits, where a lone small number ("two glances") is
    more often a count of nothing to remember."""
    return {
        word
        for match in _EXACT.finditer(text)
        for word in match.group(0).lower().split()
        if word != "and"
    }


def dated_years(text: str) -> set[str]:
    """The years that `text` gives as a date's ("2 February 2024", "in 1966")."""
    return {match.group(1) for match in _DATED_YEAR.finditer(text)}
