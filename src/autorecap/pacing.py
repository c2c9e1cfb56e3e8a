"""Pause points: where long recap work lets requests go first.

The server's recap worker shares the process (and Python's GIL) with the requests it serves. A
job that computes for a few hundred milliseconds (the offline engine folding forty scenes into
the running recap) would slow every request answered meanwhile. So long loops call `pause()`
once per unit of work; in a thread where the worker installed a hook (`pausing`), the hook waits
while requests are being answered. Elsewhere (the CLI, tests, the library) `pause()` does
nothing.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_local = threading.local()


def pause() -> None:
    """Let requests go first, when this thread's work is meant to (see the module docstring)."""
    hook: Callable[[], None] | None = getattr(_local, "hook", None)
    if hook is not None:
        hook()


@contextmanager
def pausing(hook: Callable[[], None]) -> Iterator[None]:
    """Call `hook` at every `pause()` this thread makes inside the block."""
    previous = getattr(_local, "hook", None)
    _local.hook = hook
    try:
        yield
    finally:
        _local.hook = previous
