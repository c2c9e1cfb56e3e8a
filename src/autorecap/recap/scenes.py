"""Tier 3, scene recaps: every closed scene whose recap is missing or out of date (its hash
changed) gets a new recap version, unless the user wrote the current one."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import date, timedelta

from autorecap.core.data import get_data, get_memory
from autorecap.core.dates import as_utc
from autorecap.core.model import Chat, Message
from autorecap.core.names import character_name_of, said, spoken, user_name_of
from autorecap.core.scenes import Scene, add_recap_version, content_hash, scenes
from autorecap.core.status_blocks import status_place, without_status
from autorecap.core.tokens import TokenCounter
from autorecap.errors import AutorecapError
from autorecap.pacing import pause
from autorecap.recap.backend import Failure, RecapBackend, SceneMessage, SceneRecapRequest
from autorecap.recap.offline.places import place_of
from autorecap.recap.running_recap import enforce_cap
from autorecap.settings import Settings

DAY_PAUSE_H = 6
"""A pause this long before a scene makes its first message's date the scene's day."""


def recap_scenes(
    chat: Chat,
    backend: RecapBackend,
    settings: Settings,
    counter: TokenCounter,
    *,
    force: bool = False,
    failures: list[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
    only_end: int | None = None,
) -> int:
    """Give every closed scene (or only the one ending at `only_end`) an up-to-date recap;
    returns how many versions were added."""
    closed = [
        s for s in scenes(chat.messages) if s.closed and (only_end is None or s.end == only_end)
    ]
    made = 0
    for done, scene in enumerate(closed, start=1):
        pause()
        message = chat.messages[scene.end]
        members = chat.messages[scene.start : scene.end + 1]
        scene_hash = content_hash(members)
        if not force and not _recap_due(message, scene_hash):
            continue
        request = SceneRecapRequest(
            messages=tuple(
                SceneMessage(scene.start + i, *said(m), get_memory(m), m.is_narrator)
                for i, m in enumerate(members)
                if not m.is_hidden or get_memory(m)
            ),
            name=scene.name,
            user=user_name_of(chat),
            char=character_name_of(chat),
            max_tokens=settings.scene_recap_max_tokens,
            day=scene_day(chat.messages, scene.start),
            place=_place(members),
        )
        try:
            result = backend.scene_recap(request)
        except AutorecapError as error:
            if failures is not None:
                failures.append(Failure(f"scene {scene.number + 1}: {error}", error))
            continue
        add_recap_version(
            message,
            enforce_cap(result.memory, settings.scene_recap_max_tokens, counter),
            scene_hash=scene_hash,
            metadata={"backend": backend.name, "start": scene.start, "end": scene.end},
        )
        made += 1
        if progress is not None:
            progress(done, len(closed))
    return made


def scene_day(messages: Sequence[Message], start: int) -> date | None:
    """The day a scene starting at `start` happened, when the chat's dates tell it: the scene
    opens after a pause of `DAY_PAUSE_H` hours or more (a new session, days or weeks after the
    last). Within an evening of play, the clock says nothing of the story's days."""
    opened = messages[start].send_time
    if opened is None:
        return None
    earlier = next(
        (m.send_time for m in reversed(messages[max(0, start - 5) : start]) if m.send_time),
        None,
    )
    if earlier is not None and as_utc(opened) - as_utc(earlier) < timedelta(hours=DAY_PAUSE_H):
        return None
    return opened.date()


def scene_recap_due(chat: Chat, scene: Scene) -> bool:
    """True when the closed `scene` has no recap, or one made before its texts changed that
    the user did not write (what `recap_scenes` would make a recap for)."""
    members = chat.messages[scene.start : scene.end + 1]
    return _recap_due(chat.messages[scene.end], content_hash(members))


def _recap_due(message: Message, scene_hash: str) -> bool:
    if not get_data(message, "scene_recap_memory"):
        return True
    metadata = get_data(message, "scene_recap_metadata")
    user_wrote_it = isinstance(metadata, dict) and metadata.get("edited")
    return not user_wrote_it and get_data(message, "scene_recap_hash") != scene_hash


def _place(members: Sequence[Message]) -> str:
    """Where a scene happens: where a status block among its first messages says, else the
    place its first messages name."""
    lines = [spoken(m) for m in members]
    for _name, text in lines[:3]:
        if place := status_place(text):
            return place
    return place_of([without_status(text) for _, text in lines[:3]], [name for name, _ in lines])
