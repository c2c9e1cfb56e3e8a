"""Relative times made absolute from the scene's day (`recap.offline.when`)."""

from __future__ import annotations

from datetime import date

import pytest

from autorecap.core.tokens import TokenCounter
from autorecap.recap.backend import RecapRequest
from autorecap.recap.offline.engine import OfflineBackend
from autorecap.recap.offline.when import only_when, resolve

DAY = date(2023, 5, 8)  # a Monday


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("We met yesterday.", "We met on 7 May 2023."),
        ("See you tomorrow.", "See you on 9 May 2023."),
        ("It broke last night.", "It broke on the night of 7 May 2023."),
        ("Tomorrow night, then.", "on the night of 9 May 2023, then."),
        ("I saw him yesterday morning.", "I saw him on the morning of 7 May 2023."),
        ("She wears blue on the last night.", None),  # of something else: no relative date
        ("The day before yesterday it rained.", "on 6 May 2023 it rained."),
        ("I moved three weeks ago.", "I moved the week of 17 April 2023."),
        ("I moved a few days ago.", "I moved a few days before 8 May 2023."),
        ("We sail in two days.", "We sail on 10 May 2023."),
        ("He called last Friday.", "He called on 5 May 2023."),
        ("Lunch next Wednesday?", "Lunch on 10 May 2023?"),
        ("I saw her last month.", "I saw her in April 2023."),
        # A time that is the subject of its sentence takes no "on" or "in".
        ("Yesterday was awful.", "7 May 2023 was awful."),
        ("Yesterday got under my skin.", "7 May 2023 got under my skin."),
        ("Last month was hard.", "April 2023 was hard."),
        # Nor one that another preposition leads.
        ("Thank you for yesterday!", "Thank you for 7 May 2023!"),
        ("It can wait until tomorrow.", "It can wait until 9 May 2023."),
        ("Nothing since last month.", "Nothing since April 2023."),
        # A verb's own "in", "by" or "to" is no preposition of the time: the date keeps its "on".
        ("I moved in yesterday.", "I moved in on 7 May 2023."),
        ("I'll drop by tomorrow.", "I'll drop by on 9 May 2023."),
        ("What are you up to tomorrow?", "What are you up to on 9 May 2023?"),
        # A possessive time: a day goes before its noun, a month or a year keeps the "'s";
        # a week or a night has no better date to say.
        ("Can't wait for tomorrow's game!", "Can't wait for the 9 May 2023 game!"),
        ("Yesterday's news was bad.", "The 7 May 2023 news was bad."),
        ("next Friday’s show", "the 12 May 2023 show"),
        ("Last month's rent is due.", "April 2023's rent is due."),
        ("last week's meeting", None),
        ("last night's party", None),
        # The "'s" of "is" before a determiner or an adverb.
        ("Tomorrow's the day.", "9 May 2023 is the day."),
        ("Tomorrow's going to be rough.", "9 May 2023 is going to be rough."),
        ("flight tomorrow's cancelled", "flight 9 May 2023 is cancelled"),
        ("Tomorrow's busy for me.", "9 May 2023 is busy for me."),
        ("Tomorrow's Friday, right?", "9 May 2023 is Friday, right?"),
        ("Yesterday's been rough.", "7 May 2023 has been rough."),
        ("Tomorrow's speed trial", "The 9 May 2023 speed trial"),
        # Not relative to the day: left as written.
        ("The list goes up on the last Tuesday of January.", None),
        ("It was the next Friday of the month.", None),
        ("Stay the next week of June.", None),
    ],
)
def test_relative_times(text: str, expected: str | None) -> None:
    assert resolve(text, DAY) == (text if expected is None else expected)


def test_nothing_changes_without_a_day() -> None:
    assert resolve("We met yesterday.", None) == "We met yesterday."


def test_a_clause_that_is_only_a_relative_time_tells_nothing() -> None:
    """Made a date, "Tomorrow." would stand alone in a recap ("On 9 May 2023."): the
    engine drops it; a clause that says what happens then is kept."""
    assert only_when("Tomorrow.")
    assert only_when("last week!")
    assert not only_when("See you tomorrow.")
    engine = OfflineBackend(TokenCounter("cl100k"))
    request = RecapRequest(
        text="Tomorrow. The ferry to Ostrel leaves at dawn from pier 9.",
        name="Ines",
        user="Ines",
        char="Marcus",
        day=DAY,
    )
    recap = engine.message_recap(request).memory
    assert "pier 9" in recap
    assert "9 May 2023" not in recap
