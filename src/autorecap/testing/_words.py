"""The generator's word banks and templates, loaded once from `data/generator_words.json`.

Chatter never contains digits, nor any of the invented words fact answers are made of
(`FACT_FIRST_NAMES`, `FACT_PLACE_PREFIXES`), so no answer can turn up by accident. Mid-scene
chatter also avoids the time words scene openings use (later, morning, night, dawn, ...).

Templates are `str.format` strings. Chatter lines (actions, dialogue, sights...) may use the slots
of `Writer._ctx`: {c} {their} {listener} {user} {place} {Place} {prep} {npc} {Npc} {prop} {topic}
{Topic}. The fields of fact templates are listed on `FactKind`.
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from importlib import resources
from typing import Any

DATA_FILE = "generator_words.json"


@dataclass(frozen=True)
class Place:
    """A scene's setting and its own word bank."""

    name: str
    prep: str  # "at", "in" or "on": how one is at the place
    arrivals: tuple[str, ...]  # clauses after a time cue; {who} is a plural subject
    sights: tuple[str, ...]  # sentences; may use {place}
    sounds: tuple[str, ...]
    smells: tuple[str, ...]
    props: tuple[str, ...]
    npcs: tuple[str, ...]
    topics: tuple[str, ...]
    titles: tuple[str, ...]


@dataclass(frozen=True)
class Intent:
    """What a line of dialogue does (asks, warns, plans...)."""

    lines: tuple[str, ...]  # main lines, with a {topic}
    follow_ups: tuple[str, ...]  # follow-up lines, without one
    recap: str  # recap verb phrase; fields: listener, topic


@dataclass(frozen=True)
class FactKind:
    """A kind of planted fact (a code, a name, a price...) and its templates."""

    weight: int
    question: str  # format fields: a, b (the subject's parts)
    clause: str  # for recaps; fields: a, b, ans
    said: tuple[str, ...]  # dialogue sentences; fields: a, A, b, B, ans, place, prep
    narrated: tuple[str, ...]  # narration sentences; same fields


def _texts(data: dict[str, Any], key: str) -> tuple[str, ...]:
    value = data[key]
    if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
        raise TypeError(f"{DATA_FILE}: {key!r} must be a list of strings")
    return tuple(value)


def _text(data: dict[str, Any], key: str) -> str:
    value = data[key]
    if not isinstance(value, str):
        raise TypeError(f"{DATA_FILE}: {key!r} must be a string")
    return value


def _table(data: dict[str, Any], key: str) -> dict[str, Any]:
    value = data[key]
    if not isinstance(value, dict):
        raise TypeError(f"{DATA_FILE}: {key!r} must be an object")
    return value


def _records(data: dict[str, Any], key: str) -> list[dict[str, Any]]:
    value = data[key]
    if not isinstance(value, list) or not all(isinstance(item, dict) for item in value):
        raise TypeError(f"{DATA_FILE}: {key!r} must be a list of objects")
    return value


def _load() -> dict[str, Any]:
    text = (resources.files("autorecap") / "data" / DATA_FILE).read_text(encoding="utf-8")
    data = json.loads(text)
    if not isinstance(data, dict):
        raise TypeError(f"{DATA_FILE} must hold a JSON object")
    return data


_DATA = _load()

PLACES: tuple[Place, ...] = tuple(
    Place(
        name=_text(place, "name"),
        prep=_text(place, "prep"),
        arrivals=_texts(place, "arrivals"),
        sights=_texts(place, "sights"),
        sounds=_texts(place, "sounds"),
        smells=_texts(place, "smells"),
        props=_texts(place, "props"),
        npcs=_texts(place, "npcs"),
        topics=_texts(place, "topics"),
        titles=_texts(place, "titles"),
    )
    for place in _records(_DATA, "places")
)

GLOBAL_TOPICS = _texts(_DATA, "global_topics")
TITLE_HEADS = _texts(_DATA, "title_heads")
TIME_CUES = _texts(_DATA, "time_cues")

# Dialogue: intent name -> its lines and recap. REPLIES: the intents that answer each intent.
INTENTS: dict[str, Intent] = {
    name: Intent(
        lines=_texts(intent, "lines"),
        follow_ups=_texts(intent, "follow_ups"),
        recap=_text(intent, "recap"),
    )
    for name, intent in _table(_DATA, "intents").items()
}
INTENT_NAMES = tuple(INTENTS)
_REPLIES = _table(_DATA, "replies")
REPLIES: dict[str, tuple[str, ...]] = {name: _texts(_REPLIES, name) for name in _REPLIES}

PLACE_REMARKS = _texts(_DATA, "place_remarks")
CHARACTER_ACTIONS = _texts(_DATA, "character_actions")
USER_ACTIONS = _texts(_DATA, "user_actions")
NPC_DOINGS = _texts(_DATA, "npc_doings")
GENERIC_LINES = _texts(_DATA, "generic_lines")
OOC_REASONS = _texts(_DATA, "ooc_reasons")
OOC_TAILS = _texts(_DATA, "ooc_tails")

NAME_TITLES = frozenset(_texts(_DATA, "name_titles"))
_POSSESSIVES = _table(_DATA, "possessives")
POSSESSIVES: dict[str, str] = {name: _text(_POSSESSIVES, name) for name in _POSSESSIVES}
_SUBJECTS = _table(_DATA, "subjects")
SUBJECTS: dict[str, str] = {name: _text(_SUBJECTS, name) for name in _SUBJECTS}
GROUP_COMPANIONS = _texts(_DATA, "group_companions")

# Fact pools: invented words that never occur in chatter, combined into many distinct answers.
_FACT_WORDS = _table(_DATA, "fact_words")
FACT_FIRST_NAMES = _texts(_FACT_WORDS, "first_names")
FACT_LAST_NAMES = _texts(_FACT_WORDS, "last_names")
FACT_PLACE_PREFIXES = _texts(_FACT_WORDS, "place_prefixes")
FACT_PLACE_SUFFIXES = _texts(_FACT_WORDS, "place_suffixes")
MONTHS = _texts(_FACT_WORDS, "months")
CODE_CONTAINERS = _texts(_FACT_WORDS, "code_containers")
CODE_LOCATIONS = _texts(_FACT_WORDS, "code_locations")
ROLES = _texts(_FACT_WORDS, "roles")
ROLE_CLAUSES = _texts(_FACT_WORDS, "role_clauses")
SELLERS = _texts(_FACT_WORDS, "sellers")
PRICED_ITEMS = _texts(_FACT_WORDS, "priced_items")
EVENTS = _texts(_FACT_WORDS, "events")
HIDERS = _texts(_FACT_WORDS, "hiders")
HIDDEN_ITEMS = _texts(_FACT_WORDS, "hidden_items")

FACT_KINDS: dict[str, FactKind] = {
    name: FactKind(
        weight=int(kind["weight"]),
        question=_text(kind, "question"),
        clause=_text(kind, "clause"),
        said=_texts(kind, "said"),
        narrated=_texts(kind, "narrated"),
    )
    for name, kind in _table(_DATA, "fact_kinds").items()
}
FACT_KIND_NAMES = tuple(FACT_KINDS)
FACT_KIND_WEIGHTS = tuple(kind.weight for kind in FACT_KINDS.values())
