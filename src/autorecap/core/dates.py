"""SillyTavern's `send_date` in all the forms real chat files use."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

# "2023-4-21 @20h 02m 47s 124ms" (ST 1.2-1.8 messages) and "2024-10-18@20h52m17s" (headers).
_HUMANIZED = re.compile(
    r"^(\d{4})-(\d{1,2})-(\d{1,2}) ?@ ?(\d{1,2})h ?(\d{1,2})m ?(\d{1,2})s(?: ?(\d{1,3}) ?ms)?$"
)
# "June 19, 2023 2:20pm" (ST before 1.14).
_LONG_FORMS = ("%B %d, %Y %I:%M%p", "%B %d, %Y %I:%M %p", "%b %d, %Y %I:%M%p")


def parse_send_date(value: Any) -> datetime | None:
    """Read a `send_date` (or a header's `create_date`); None when it is missing or unreadable.

    Epoch milliseconds and ISO strings give aware UTC datetimes. The humanized forms carry no time
    zone (they are the writer's local time) and come back naive.
    """
    if isinstance(value, bool) or value is None:
        return None
    if isinstance(value, int | float):
        return _from_millis(float(value))
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text:
        return None
    if text.isdigit():
        return _from_millis(float(text))
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        pass
    else:
        return parsed if parsed.tzinfo else parsed.replace(tzinfo=UTC)
    match = _HUMANIZED.match(text)
    if match:
        year, month, day, hour, minute, second = (int(g) for g in match.groups()[:6])
        millis = int(match.group(7) or 0)
        try:
            return datetime(year, month, day, hour, minute, second, millis * 1000)
        except ValueError:
            return None
    for form in _LONG_FORMS:
        try:
            return datetime.strptime(text, form)
        except ValueError:
            continue
    return None


def _from_millis(millis: float) -> datetime | None:
    try:
        return datetime.fromtimestamp(millis / 1000, tz=UTC)
    except (OverflowError, OSError, ValueError):
        return None
