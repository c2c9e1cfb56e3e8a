"""Seeded generation of realistic SillyTavern chats, for tests, benchmarks and evals.

`generate_chat(n, seed=...)` gives the same chat for the same arguments: a user and a character
talking (a narrator now and then), hidden out-of-character notes, character replies with swipes
and `swipe_info`, ISO send dates, and optionally a recap on every message.
"""

from __future__ import annotations

import random
from datetime import UTC, datetime, timedelta
from typing import Any

from autorecap.core.data import NAMESPACE
from autorecap.core.model import Chat

_PLACES = (
    "the harbour",
    "the old mill",
    "Port Anvil",
    "the glass market",
    "the north road",
    "the archive",
    "the lighthouse",
    "Kestrel's deck",
    "the salt flats",
    "the tavern",
)
_PEOPLE = ("Mira", "Tomas", "Élodie", "Bram", "Juno", "the harbourmaster", "Vell", "Ada")
_THINGS = (
    "a brass key",
    "the chart",
    "a sealed letter",
    "340 crowns",
    "a lantern",
    "the ledger",
    "a broken compass",
    "a silver ring",
    "the map case",
    "a rope ladder",
)
_VERBS = (
    "finds",
    "hides",
    "sells",
    "buys",
    "loses",
    "mends",
    "opens",
    "steals",
    "offers",
    "examines",
)
_MOODS = (
    "quietly",
    "with a grin",
    "without a word",
    "in a hurry",
    "carefully",
    "angrily",
    "half-laughing",
    "under her breath",
)
_FILLER = (
    "The wind picks up.",
    "Somewhere a bell rings twice.",
    "Rain taps on the boards.",
    "A gull screams overhead.",
    "The lamp gutters and steadies.",
    "Footsteps pass outside and fade.",
    "It smells of tar and salt.",
)


def _sentence(rng: random.Random) -> str:
    who = rng.choice(_PEOPLE)
    return (
        f"{who} {rng.choice(_VERBS)} {rng.choice(_THINGS)} near {rng.choice(_PLACES)} "
        f"{rng.choice(_MOODS)}."
    )


def _text(rng: random.Random, sentences: int) -> str:
    parts = []
    for _ in range(sentences):
        parts.append(_sentence(rng) if rng.random() < 0.7 else rng.choice(_FILLER))
    if rng.random() < 0.4:
        parts[0] = f"*{parts[0]}*"
    return " ".join(parts)


def generate_chat(
    n_messages: int,
    *,
    seed: int = 0,
    with_recaps: bool = False,
    user: str = "Tomas",
    character: str = "Captain Mira",
    chat_id: str = "",
) -> Chat:
    """A chat of `n_messages` messages, identical for identical arguments."""
    rng = random.Random(seed)
    start = datetime(2026, 3, 2, 18, 0, tzinfo=UTC)
    header: dict[str, Any] = {
        "chat_metadata": {"integrity": f"00000000-0000-4000-8000-{seed:012d}"},
        "user_name": "unused",
        "character_name": "unused",
    }
    chat = Chat(header=header, chat_id=chat_id or f"generated-{n_messages}-{seed}")
    when = start
    for index in range(n_messages):
        when += timedelta(seconds=rng.randint(20, 600))
        stamp = when.isoformat(timespec="milliseconds").replace("+00:00", "Z")
        roll = rng.random()
        if index == 0 or (roll < 0.45):
            message = _character_message(rng, character, stamp)
        elif roll < 0.9:
            message = {
                "name": user,
                "is_user": True,
                "is_system": False,
                "send_date": stamp,
                "mes": _text(rng, rng.randint(1, 3)),
                "extra": {},
            }
        elif roll < 0.96:
            message = {
                "name": "Narrator",
                "is_user": False,
                "is_system": False,
                "send_date": stamp,
                "mes": _text(rng, rng.randint(1, 2)),
                "extra": {"type": "narrator"},
            }
        else:
            message = {
                "name": user,
                "is_user": True,
                "is_system": True,
                "send_date": stamp,
                "mes": "(OOC: back in a minute)",
                "extra": {},
            }
        if with_recaps and not message["is_system"]:
            recap = {"memory": _sentence(rng), "include": None}
            message["extra"][NAMESPACE] = recap
            for info in message.get("swipe_info", ()):
                info["extra"][NAMESPACE] = dict(recap)
        chat.append(message)
    return chat


def _character_message(rng: random.Random, name: str, stamp: str) -> dict[str, Any]:
    swipe_count = 1 if rng.random() < 0.85 else rng.randint(2, 3)
    swipes = [_text(rng, rng.randint(2, 6)) for _ in range(swipe_count)]
    swipe_id = rng.randrange(swipe_count)
    return {
        "name": name,
        "is_user": False,
        "is_system": False,
        "send_date": stamp,
        "mes": swipes[swipe_id],
        "extra": {"api": "openai", "model": "some-model-v1"},
        "swipe_id": swipe_id,
        "swipes": swipes,
        "swipe_info": [
            {
                "send_date": stamp,
                "gen_started": stamp,
                "gen_finished": stamp,
                "extra": {"api": "openai", "model": "some-model-v1"},
            }
            for _ in swipes
        ],
    }
