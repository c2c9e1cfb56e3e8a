"""Tier 4, the running recap: closed scenes not yet in it are folded in, one new version each,
except the latest `running_scene_recap_exclude_latest`, which wait.

A scene is folded in as a line of its own ("- [8 May 2023 · Porto] ..."). While the recap with
the new line fits `running_scene_recap_max_tokens`, that is the new version, with no call to the
backend; when it does not, the backend condenses (`combine`: the offline engine shortens the
oldest lines first, an LLM rewrites them to `condense_to` of the cap, leaving room for the
next scenes), and the cap is enforced by the code as well.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable

from autorecap.core import running
from autorecap.core.model import Chat
from autorecap.core.scenes import Scene, scenes
from autorecap.core.tokens import TokenCounter
from autorecap.errors import AutorecapError
from autorecap.pacing import pause
from autorecap.recap.backend import CombineRequest, RecapBackend
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
    pending = [s for s in eligible if s.end > done_until]
    added = 0
    for step, scene in enumerate(pending, start=1):
        pause()
        previous = running.current(chat)
        previous_text = str(previous.get("content", "")) if previous else ""
        request = CombineRequest(
            previous=previous_text,
            scene_recap=scene.recap,
            scene_name=scene.name,
            max_tokens=settings.running_scene_recap_max_tokens,
        )
        appended = f"{previous_text}\n{request.line}" if previous_text else request.line
        if counter.count(appended) <= request.max_tokens:
            text = appended  # the new scene's line fits as it is: no call, nothing shortened
        else:
            target = max(50, round(request.max_tokens * backend.condense_to))
            try:
                result = backend.combine(dataclasses.replace(request, max_tokens=target))
            except AutorecapError as error:
                if failures is not None:
                    failures.append(f"running recap, scene {scene.number + 1}: {error}")
                break  # later scenes must wait for this one: the recap is cumulative
            text = enforce_cap(result.memory, request.max_tokens, counter)
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
    the last (newest) line is only shortened when it alone is too long."""
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
