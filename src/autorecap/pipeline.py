"""The whole recap pipeline: message recaps, scene breaks, scene recaps, the running recap.

1. Every message that needs one gets a recap (`recaps.recap_all`).
2. Scene breaks are looked for after the last one, leaving the newest
   `auto_scene_break_message_offset` messages alone and keeping scenes at least
   `auto_scene_break_minimum_scene_length` long; each examined message is marked
   `auto_scene_break_checked`.
3. Every closed scene whose recap is missing or out of date (its hash changed) gets a new
   recap version, unless the user wrote the current one.
4. Closed scenes not yet in the running recap are folded in, one new version each, except the
   latest `running_scene_recap_exclude_latest`, which wait. The result is held under
   `running_scene_recap_max_tokens` by the code as well as by the request.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field

from autorecap.core import running
from autorecap.core.data import get_data, get_memory, set_data
from autorecap.core.model import Chat, Message
from autorecap.core.names import character_name_of, user_name_of
from autorecap.core.scenes import (
    Scene,
    add_recap_version,
    break_indexes,
    content_hash,
    mark_break,
    scenes,
)
from autorecap.core.tokens import TokenCounter
from autorecap.errors import AutorecapError
from autorecap.llm.base import (
    CombineRequest,
    RecapBackend,
    SceneBreakRequest,
    SceneMessage,
    SceneRecapRequest,
)
from autorecap.llm.offline import OfflineBackend, cut_to
from autorecap.llm.offline_scenes import (
    BreakCandidate,
    fit_lines,
    pick_scene_starts,
    score_scene_starts,
)
from autorecap.pacing import pause
from autorecap.recaps import RecapStats, recap_all
from autorecap.settings import Settings

Progress = Callable[[str, int, int], None]
"""`progress(stage, done, total)`."""

_CAPITALISED = re.compile(r"\b[A-ZÀ-Ý][a-zà-ÿ]+(?:\s+[A-ZÀ-Ý][a-zà-ÿ]+)*")
_SENTENCE_SPLIT = re.compile(r"(?<=[.!?])\s+")
_COMMON = frozenset(
    {
        "The",
        "A",
        "An",
        "I",
        "She",
        "He",
        "They",
        "We",
        "You",
        "It",
        "Captain",
        "Mister",
        "Mr",
        "Mrs",
        "Miss",
        "Lady",
        "Lord",
        "Sir",
        "God",
        "Oh",
    }
)
_WINDOW = 40
_SCORE_CONTEXT = 50
"""Messages before the scanned range that the scorer sees (its window, and typical pauses)."""


@dataclass
class PipelineStats:
    """What one run of the pipeline did."""

    messages: RecapStats = field(default_factory=RecapStats)
    breaks_found: list[int] = field(default_factory=list)
    scene_recaps: int = 0
    running_versions: int = 0
    failures: list[str] = field(default_factory=list)


def run_pipeline(
    chat: Chat,
    backend: RecapBackend,
    settings: Settings,
    counter: TokenCounter,
    *,
    now_ms: int,
    progress: Progress | None = None,
    detect: bool = True,
    force: bool = False,
    group_id: str | None = None,
) -> PipelineStats:
    """Run every stage (see the module docstring)."""
    stats = PipelineStats()

    def report(stage: str) -> Callable[[int, int], None]:
        return lambda done, total: progress(stage, done, total) if progress else None

    stats.messages = recap_all(
        chat,
        backend,
        settings,
        counter,
        force=force,
        group_id=group_id,
        progress=report("message recaps"),
        concurrency=1 if isinstance(backend, OfflineBackend) else settings.llm_concurrency,
    )
    stats.failures.extend(stats.messages.errors)
    if detect:
        try:
            stats.breaks_found = detect_scene_breaks(
                chat, backend, settings, progress=report("scenes")
            )
        except AutorecapError as error:
            stats.failures.append(f"scene detection: {error}")
    stats.scene_recaps = recap_scenes(
        chat,
        backend,
        settings,
        counter,
        force=force,
        failures=stats.failures,
        progress=report("scene recaps"),
    )
    stats.running_versions = update_running_recap(
        chat,
        backend,
        settings,
        counter,
        now_ms=now_ms,
        failures=stats.failures,
        progress=report("running recap"),
    )
    return stats


def detect_scene_breaks(
    chat: Chat,
    backend: RecapBackend,
    settings: Settings,
    *,
    progress: Callable[[int, int], None] | None = None,
) -> list[int]:
    """Find and mark scene breaks after the last one; returns the new break indexes."""
    messages = chat.messages
    existing = break_indexes(messages)
    start = existing[-1] + 1 if existing else 0
    end = len(messages) - 1 - settings.auto_scene_break_message_offset
    minimum = settings.auto_scene_break_minimum_scene_length
    if end - start + 1 < minimum:
        return []
    pause()
    if isinstance(backend, OfflineBackend):
        found = _offline_breaks(messages, start, end, minimum)
    else:
        found = _llm_breaks(messages, backend, start, end, minimum, progress)
    first = start
    for number, index in enumerate(found, start=len(existing)):
        mark_break(messages[index], scene_title(messages[first : index + 1], number))
        first = index + 1
    for message in messages[start : end + 1]:
        if not get_data(message, "auto_scene_break_checked"):
            set_data(message, "auto_scene_break_checked", True)
    if progress is not None:
        progress(1, 1)
    return found


def _offline_breaks(messages: list[Message], start: int, end: int, minimum: int) -> list[int]:
    # Only the part after the last break is scored (with the scorer's window around it): a long
    # chat's new messages cost what they are, not what the whole chat is.
    low = max(0, start - _SCORE_CONTEXT)
    part = messages[low : min(len(messages), end + 2 + _SCORE_CONTEXT)]
    candidates = [
        BreakCandidate(c.index + low, c.score, c.cue)
        for c in score_scene_starts(
            [m.text for m in part],
            narrators=[m.is_narrator for m in part],
            times=[m.send_time for m in part],
        )
    ]
    starts = pick_scene_starts(
        candidates,
        count=len(messages),
        minimum_length=minimum,
        first_allowed=start + minimum,
        last_allowed=end + 1,
        existing_starts=[start] if start else [],
    )
    return [s - 1 for s in starts]


def _llm_breaks(
    messages: list[Message],
    backend: RecapBackend,
    start: int,
    end: int,
    minimum: int,
    progress: Callable[[int, int], None] | None,
) -> list[int]:
    found: list[int] = []
    cursor = start
    while end - cursor + 1 >= minimum:
        window_end = min(end + 1, cursor + _WINDOW)
        window = tuple(
            SceneMessage(i, messages[i].name, messages[i].text)
            for i in range(cursor, min(len(messages), window_end + 1))
            if not messages[i].is_hidden
        )
        earliest = cursor + minimum - 1
        latest = min(end, window_end - 1)
        if earliest > latest:
            break
        index = backend.find_scene_break(SceneBreakRequest(window, earliest, latest))
        if index is not None and earliest <= index <= latest:
            found.append(index)
            cursor = index + 1
        else:
            cursor = max(cursor + 1, latest - minimum + 2)
        if progress is not None:
            progress(cursor - start, end - start + 1)
    return found


def scene_title(messages: list[Message], number: int) -> str:
    """A name for a scene: the name or place it mentions most (capitalised words inside a
    sentence, not the speakers)."""
    speakers = {m.name for m in messages} | {w for m in messages for w in m.name.split()}
    counts: Counter[str] = Counter()
    for message in messages:
        for sentence in _SENTENCE_SPLIT.split(message.text.replace("*", "")):
            for match in _CAPITALISED.finditer(sentence):
                phrase = match.group(0)
                if match.start() == len(sentence) - len(sentence.lstrip(" \"'“(")):
                    continue  # the sentence's first word is capitalised anyway
                words = phrase.split()
                if phrase in speakers or words[0] in speakers or words[0] in _COMMON:
                    continue
                counts[phrase] += 1
    if counts:
        place, _ = max(counts.items(), key=lambda item: (item[1], len(item[0])))
        return f"Scene {number + 1}: {place}"
    return f"Scene {number + 1}"


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
                SceneMessage(scene.start + i, m.name, m.text, get_memory(m))
                for i, m in enumerate(members)
                if not m.is_hidden or get_memory(m)
            ),
            name=scene.name,
            user=user_name_of(chat),
            char=character_name_of(chat),
            max_tokens=settings.scene_recap_max_tokens,
        )
        try:
            result = backend.scene_recap(request)
        except AutorecapError as error:
            if failures is not None:
                failures.append(f"scene {scene.number + 1}: {error}")
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


def update_running_recap(
    chat: Chat,
    backend: RecapBackend,
    settings: Settings,
    counter: TokenCounter,
    *,
    now_ms: int,
    failures: list[str] | None = None,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Fold the closed scenes not yet in the running recap into it, one version each (the
    latest `running_scene_recap_exclude_latest` wait). Returns the versions added."""
    closed = [s for s in scenes(chat.messages) if s.closed]
    waiting = settings.running_scene_recap_exclude_latest
    eligible: list[Scene] = closed[: max(0, len(closed) - waiting)]
    for position, scene in enumerate(eligible):
        if not scene.recap:  # its recap failed or is missing: it and every later scene wait
            eligible = eligible[:position]
            break
    current = running.current(chat)
    done_until = int(current.get("new_scene_index", -1)) if current else -1
    pending = [s for s in eligible if s.end > done_until]
    added = 0
    for step, scene in enumerate(pending, start=1):
        pause()
        previous = running.current(chat)
        previous_text = str(previous.get("content", "")) if previous else ""
        try:
            result = backend.combine(
                CombineRequest(
                    previous=previous_text,
                    scene_recap=scene.recap,
                    scene_name=scene.name,
                    max_tokens=settings.running_scene_recap_max_tokens,
                )
            )
        except AutorecapError as error:
            if failures is not None:
                failures.append(f"running recap, scene {scene.number + 1}: {error}")
            break  # later scenes must wait for this one: the recap is cumulative
        text = enforce_cap(result.memory, settings.running_scene_recap_max_tokens, counter)
        running.add_version(
            chat,
            text,
            scene_count=eligible.index(scene) + 1,
            excluded_count=waiting,
            prev_scene_index=int(previous.get("new_scene_index", 0)) if previous else 0,
            new_scene_index=scene.end,
            now_ms=now_ms,
        )
        added += 1
        if progress is not None:
            progress(step, len(pending))
    return added


def enforce_cap(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """Hold a recap under `max_tokens`: its oldest lines are shortened first, then dropped;
    the last (newest) line is only ever shortened, keeping its start (its scene label)."""
    if counter.count(text) <= max_tokens:
        return text
    lines = [line for line in text.splitlines() if line.strip()]
    shrinker = OfflineBackend(counter)
    if len(lines) > 1:
        lines = fit_lines(lines, max_tokens, counter, shrinker.shrink_line)
    joined = "\n".join(lines)
    if counter.count(joined) <= max_tokens:
        return joined
    # The newest line alone is too long: keep its first sentence (label and all), then what
    # else fits, in order; cut characters when even the first sentence does not fit.
    newest = lines[-1]
    sentences = re.split(r"(?<=[.!?…])\s+", newest)
    kept = [sentences[0]]
    for sentence in sentences[1:]:
        if counter.count(" ".join([*kept, sentence])) <= max_tokens:
            kept.append(sentence)
    return cut_to(" ".join(kept), max_tokens, counter)
