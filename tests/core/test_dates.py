"""Dates in numbers ("08/05/2023 13:56") read the way their chat writes them, and a chat so
dated recapped with the right days."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from autorecap.core import running
from autorecap.core.dates import day_first, parse_send_date
from autorecap.core.model import Chat
from autorecap.core.scenes import scenes
from autorecap.core.tokens import get_counter
from autorecap.recap import run_pipeline
from autorecap.recap.offline.engine import OfflineBackend
from autorecap.settings import Settings


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        (["08/05/2023 13:56", "13/05/2023 09:00"], True),  # 13 can only be a day
        (["08/05/2023 13:56", "05/13/2023 09:00"], False),  # 13 can only be the day, second
        (["08.05.2023 13:56"], True),  # dots are written day first
        (["08/05/2023 13:56", "09/05/2023 10:00"], None),  # nothing tells
        (["2023/05/08 13:56", "2023-05-13T09:00:00Z", 1683554160000, None], None),  # year first
    ],
)
def test_how_a_chat_writes_its_dates(values: list[object], expected: bool | None) -> None:
    assert day_first(values) is expected


def test_a_date_in_numbers_is_read_day_first_only_when_asked() -> None:
    assert parse_send_date("08/05/2023 13:56") == datetime(2023, 8, 5, 13, 56)
    assert parse_send_date("08/05/2023 13:56", day_first=True) == datetime(2023, 5, 8, 13, 56)
    # a year first is no question, whatever the chat does
    assert parse_send_date("2023/05/08 13:56", day_first=True) == datetime(2023, 5, 8, 13, 56)
    assert parse_send_date("2023-05-08T13:56:00Z", day_first=True) == datetime(
        2023, 5, 8, 13, 56, tzinfo=UTC
    )


def test_a_chat_reads_its_messages_dates_the_way_it_writes_them() -> None:
    chat = Chat([{"mes": "a", "send_date": "08/05/2023 13:56"}])
    assert chat.messages[0].send_time == datetime(2023, 8, 5, 13, 56)  # nothing tells yet
    chat.append({"mes": "b", "send_date": "20/05/2023 10:00"})
    assert [m.send_time for m in chat.messages] == [
        datetime(2023, 5, 8, 13, 56),
        datetime(2023, 5, 20, 10, 0),
    ]


def _sessions(dates: list[str]) -> Chat:
    """A chat of two across sessions, each on its own day, dated as `dates` write them."""
    rows = []
    for day, stamp in enumerate(dates):
        for turn in range(12):
            minute = f"{turn:02d}"
            rows.append(
                {
                    "name": "Ines" if turn % 2 == 0 else "Marcus",
                    "is_user": turn % 2 == 0,
                    "mes": f"Session {day} line {turn}: the harbour ferry and the {day}th crate.",
                    "send_date": stamp.replace("MM", minute),
                }
            )
    return Chat(rows, chat_id="sessions")


def test_a_chat_dated_day_first_is_recapped_with_its_days() -> None:
    """Sessions on 3, 10, 17 and 24 May 2023 written "03/05/2023 19:MM". Read month first,
    the first two would fall on 5 March and 5 October, the gaps between sessions would be
    wrong, and the scenes would carry those days."""
    chat = _sessions(
        ["03/05/2023 19:MM", "10/05/2023 19:MM", "17/05/2023 19:MM", "24/05/2023 19:MM"]
    )
    counter = get_counter()
    run_pipeline(chat, OfflineBackend(counter), Settings(), counter, now_ms=0)
    found = [s for s in scenes(chat.messages) if s.closed]
    assert [s.start for s in found][:3] == [0, 12, 24]
    recap = str(running.current(chat)["content"]) if running.current(chat) else ""
    assert "3 May 2023" in recap, recap
    assert "March" not in recap, recap
    assert "October" not in recap, recap


@pytest.mark.parametrize(
    ("value", "expected"),
    [
        ("May 8, 2023 1:56pm", datetime(2023, 5, 8, 13, 56)),  # SillyTavern before 1.14
        ("2023-5-8 @13h 56m 00s 000ms", datetime(2023, 5, 8, 13, 56)),  # SillyTavern 1.2-1.8
        ("2023-05-08T13:56:00.000Z", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),
        (1683554160000, datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),  # epoch milliseconds
        ("1683554160", datetime(2023, 5, 8, 13, 56, tzinfo=UTC)),  # epoch seconds as text
        ("1:56 pm on 8 May, 2023", datetime(2023, 5, 8, 13, 56)),  # LoCoMo
        ("May 8, 2023 at 1:56 PM", datetime(2023, 5, 8, 13, 56)),
        ("Monday, May 8, 2023 1:56 PM", datetime(2023, 5, 8, 13, 56)),
        ("Tue, 09 May 2023 10:00:00 GMT", datetime(2023, 5, 9, 10, tzinfo=UTC)),  # HTTP
        # a JavaScript Date's text: the zone's name dropped, its offset read east of Greenwich
        (
            "Mon May 08 2023 13:56:00 GMT+0200 (Central European Summer Time)",
            datetime(2023, 5, 8, 11, 56, tzinfo=UTC),
        ),
        ("2023-05-08 13:56 UTC+3", datetime(2023, 5, 8, 10, 56, tzinfo=UTC)),
        ("2023年5月8日 13:56", datetime(2023, 5, 8, 13, 56)),
        # an offset in brackets is kept, not taken for a zone's name
        ("8 May 2023 13:56 (+0200)", datetime(2023, 5, 8, 11, 56, tzinfo=UTC)),
        ("8 May 2023 13:56 (UTC+2)", datetime(2023, 5, 8, 11, 56, tzinfo=UTC)),
        ("2023/05/08 @ 1:56pm", datetime(2023, 5, 8, 13, 56)),
        # months and weekdays in the languages a chat app's locale writes them in
        ("Montag, 8. Mai 2023 um 13:56", datetime(2023, 5, 8, 13, 56)),
        ("le 8 mai 2023 à 13h56", datetime(2023, 5, 8, 13, 56)),
        ("mai 8, 2023 1:56pm", datetime(2023, 5, 8, 13, 56)),
        ("martes, 8 de mayo de 2023, 13:56", datetime(2023, 5, 8, 13, 56)),
        ("8 maggio 2023 13:56", datetime(2023, 5, 8, 13, 56)),
        ("segunda-feira, 8 de maio de 2023 às 13:56", datetime(2023, 5, 8, 13, 56)),
        ("8 mei 2023 om 13:56", datetime(2023, 5, 8, 13, 56)),
        ("8 мая 2023 г., 13:56", datetime(2023, 5, 8, 13, 56)),
        ("3 décembre 2023 09:05", datetime(2023, 12, 3, 9, 5)),
        ("Montag, am 8. Mai 2023 um 13:56", datetime(2023, 5, 8, 13, 56)),
        ("8 janv. 2023", datetime(2023, 1, 8)),
        ("8. Dez. 2023 09:05", datetime(2023, 12, 8, 9, 5)),
    ],
)
def test_every_form_of_send_date_is_read(value: object, expected: datetime) -> None:
    parsed = parse_send_date(value)
    assert parsed is not None
    if expected.tzinfo is None:
        assert parsed.replace(tzinfo=None) == expected
    else:
        assert parsed.tzinfo is not None
        assert parsed.astimezone(UTC) == expected


def test_a_text_that_is_no_date_is_none() -> None:
    for value in (
        "",
        "yesterday",
        "Tuesday 3pm",
        "le chat",
        "8 mai",
        # another language's words with a year and no day are no date
        "la 2023",
        "Mars 2023",
        "el 12 de 2023",
        "(none)",
        True,
        [2023],
        "2023-05-08 13:56 GMT+24",
    ):
        assert parse_send_date(value) is None
