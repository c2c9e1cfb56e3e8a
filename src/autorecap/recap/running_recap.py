"""Tier 4, the running recap: closed scenes not yet in it are folded in, one new version each,
except the latest `running_scene_recap_exclude_latest`, which wait. When the recap of a scene
already in it changes (edited by hand, regenerated), it is made again from the first scene, as
one new version.

A scene is folded in as a line of its own ("- [8 May 2023 · Porto] ..."). While the recap with
the new line fits `running_scene_recap_max_tokens`, that is the new version, with no call to the
backend; when it does not, the backend condenses (`combine`: the offline engine shortens the
lines together, the older the more, an LLM rewrites the oldest to `condense_to` of the cap,
leaving room for the next scenes), and the cap is enforced by the code as well.
"""

from __future__ import annotations

import dataclasses
import hashlib
from collections.abc import Callable

from autorecap.core import running
from autorecap.core.model import Chat
from autorecap.core.scenes import Scene, scenes
from autorecap.core.tokens import TokenCounter
from autorecap.errors import AutorecapError
from autorecap.pacing import pause
from autorecap.recap.backend import CombineRequest, Failure, RecapBackend
from autorecap.recap.offline.engine import OfflineBackend, cut_to
from autorecap.settings import Settings


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
    folded = _folded(chat)
    changed = [
        s
        for s in eligible
        if s.end <= done_until and folded.get(str(s.end)) not in (None, _digest(s.recap))
    ]
    if changed:
        # A scene already in it has another recap now (edited, regenerated, another version
        # chosen): the recap is made again from the first scene, as one new version.
        return _rebuild(chat, eligible, backend, settings, counter, now_ms, failures, waiting)
    pending = [s for s in eligible if s.end > done_until]
    added = 0
    for step, scene in enumerate(pending, start=1):
        pause()
        previous = running.current(chat)
        previous_text = str(previous.get("content", "")) if previous else ""
        text = _fold(previous_text, scene, backend, settings, counter, failures)
        if text is None:
            break  # later scenes must wait for this one: the recap is cumulative
        running.add_version(
            chat,
            text,
            scene_count=eligible.index(scene) + 1,
            excluded_count=waiting,
            prev_scene_index=int(previous.get("new_scene_index", 0)) if previous else 0,
            new_scene_index=scene.end,
            now_ms=now_ms,
        )
        folded[str(scene.end)] = _digest(scene.recap)
        _keep_folded(chat, folded)
        added += 1
        if progress is not None:
            progress(step, len(pending))
    return added


FOLDED_KEY = "autorecap_folded"
"""In the running recap's storage: each folded scene's last message -> a digest of the recap
it was folded with (a scene recap changed since is noticed, `update_running_recap`)."""


def _folded(chat: Chat) -> dict[str, str]:
    store = running.storage(chat)
    found = store.get(FOLDED_KEY) if store is not None else None
    return dict(found) if isinstance(found, dict) else {}


def _keep_folded(chat: Chat, folded: dict[str, str]) -> None:
    store = running.storage(chat, create=True)
    assert store is not None
    store[FOLDED_KEY] = dict(folded)


def _digest(recap: str) -> str:
    return hashlib.sha1(" ".join(recap.split()).encode("utf-8")).hexdigest()[:16]


def _fold(
    previous_text: str,
    scene: Scene,
    backend: RecapBackend,
    settings: Settings,
    counter: TokenCounter,
    failures: list[str] | None,
) -> str | None:
    """The running recap with `scene` folded in (None when the backend failed)."""
    request = CombineRequest(
        previous=previous_text,
        scene_recap=scene.recap,
        scene_name=scene.name,
        max_tokens=settings.running_scene_recap_max_tokens,
    )
    appended = f"{previous_text}\n{request.line}" if previous_text else request.line
    if counter.count(appended) <= request.max_tokens:
        return appended  # the new scene's line fits as it is: no call, nothing shortened
    target = max(50, round(request.max_tokens * backend.condense_to))
    try:
        result = backend.combine(dataclasses.replace(request, max_tokens=target))
    except AutorecapError as error:
        if failures is not None:
            failures.append(Failure(f"running recap, scene {scene.number + 1}: {error}", error))
        return None
    return enforce_cap(result.memory, request.max_tokens, counter)


def _rebuild(
    chat: Chat,
    eligible: list[Scene],
    backend: RecapBackend,
    settings: Settings,
    counter: TokenCounter,
    now_ms: int,
    failures: list[str] | None,
    waiting: int,
) -> int:
    """The running recap made again from every eligible scene, as one new version (the
    earlier versions stay, to go back to)."""
    text = ""
    for scene in eligible:
        pause()
        folded = _fold(text, scene, backend, settings, counter, failures)
        if folded is None:
            return 0
        text = folded
    running.add_version(
        chat,
        text,
        scene_count=len(eligible),
        excluded_count=waiting,
        prev_scene_index=0,
        new_scene_index=eligible[-1].end,
        now_ms=now_ms,
    )
    _keep_folded(chat, {str(s.end): _digest(s.recap) for s in eligible})
    return 1


def enforce_cap(text: str, max_tokens: int, counter: TokenCounter) -> str:
    """Hold a recap under `max_tokens`: its lines are shortened together, the older the
    more, each to no less than its most telling sentence, then the oldest are dropped (see
    `select.fit_lines`). A text that still does not fit (one line too long alone) is shortened
    as one paragraph and cut with "…"."""
    if counter.count(text) <= max_tokens:
        return text
    engine = OfflineBackend(counter)
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) > 1:
        lines = engine.fit(lines, max_tokens)
    joined = "\n".join(lines)
    if counter.count(joined) <= max_tokens:
        return joined
    return cut_to(engine.shorten(joined, max_tokens), max_tokens, counter)
