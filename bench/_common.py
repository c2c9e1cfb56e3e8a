"""Shared helpers for the benchmark scripts: timing, printing, recording results."""

from __future__ import annotations

import json
import statistics
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any, TypeVar

RESULTS = Path(__file__).with_name("results.json")
T = TypeVar("T")


def timed(fn: Callable[[], Any], *, repeat: int = 5) -> list[float]:
    """Run `fn` `repeat` times and return each run's wall time in seconds."""
    times = []
    for _ in range(repeat):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return times


def timed_each(work: Iterable[T], call: Callable[[T], Any]) -> list[float]:
    """Call `call` on each item of `work` and return each call's wall time in seconds."""
    times = []
    for item in work:
        start = time.perf_counter()
        call(item)
        times.append(time.perf_counter() - start)
    return times


def median(times: list[float]) -> float:
    return statistics.median(times)


def percentile(times: list[float], pct: float) -> float:
    ordered = sorted(times)
    index = min(len(ordered) - 1, max(0, round(pct / 100 * (len(ordered) - 1))))
    return ordered[index]


def report(section: str, figures: dict[str, Any]) -> None:
    """Print one benchmark's figures and merge them into bench/results.json."""
    print(f"\n== {section}")
    width = max(len(k) for k in figures)
    for key, value in figures.items():
        shown = f"{value:,.4g}" if isinstance(value, float) else str(value)
        print(f"  {key:<{width}}  {shown}")
    existing: dict[str, Any] = {}
    if RESULTS.exists():
        try:
            existing = json.loads(RESULTS.read_text())
        except ValueError:
            existing = {}
    existing[section] = figures
    RESULTS.write_text(json.dumps(existing, indent=2, sort_keys=True) + "\n")
