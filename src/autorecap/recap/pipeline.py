"""The whole recap pipeline, tier by tier:

1. message recaps (`recap.messages`);
2. scene breaks after the last one (`recap.detection`);
3. a recap of every closed scene that needs one (`recap.scenes`);
4. the closed scenes folded into the running recap (`recap.running_recap`);
5. with `combined_recap_enabled`, the message recaps merged into the combined recap
   (`recap.combined_recap`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field

from autorecap.core.model import Chat
from autorecap.core.tokens import TokenCounter
from autorecap.errors import AutorecapError
from autorecap.recap.backend import RecapBackend
from autorecap.recap.combined_recap import update_combined_recap
from autorecap.recap.detection import detect_scene_breaks
from autorecap.recap.messages import RecapStats, recap_all
from autorecap.recap.offline.engine import OfflineBackend
from autorecap.recap.running_recap import update_running_recap
from autorecap.recap.scenes import recap_scenes
from autorecap.settings import Settings

Progress = Callable[[str, int, int], None]
"""`progress(stage, done, total)`."""


@dataclass
class PipelineStats:
    """What one run of the pipeline did."""

    messages: RecapStats = field(default_factory=RecapStats)
    breaks_found: list[int] = field(default_factory=list)
    scene_recaps: int = 0
    running_versions: int = 0
    combined_versions: int = 0
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
    if settings.combined_recap_enabled:
        stats.combined_versions = update_combined_recap(
            chat, backend, settings, counter, now_ms=now_ms, failures=stats.failures, force=force
        )
    return stats
