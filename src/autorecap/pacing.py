"""Pause points: where long recap work lets requests go first.

The server's recap worker shares the process (and Python's GIL) with the requests it serves. A
job that computes for a few hundred milliseconds (the offline engine folding forty scenes into
the running recap) would slow every request answered meanwhile. So long loops call `pause()`
once per unit of work; in a thread where the worker installed a hook (`pausing`), the hook waits
while requests are being answered, and lets go of the chat the job holds meanwhile, so that no
request for that chat waits for the job (`Worker._pause`). Elsewhere (the CLI, tests, the
library) `pause()` does nothing.

A loop that may not let go of its chat (it copies the chat, and the copy must be of one moment)
says so: `pause(step_aside=False)`. Everywhere else, what the work computed so far must stay
valid when messages are appended or edited meanwhile; a chat whose messages were removed or
moved meanwhile stops the job, which runs again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

_local = threading.local()


Hook = Callable[[bool], None]
"""`hook(step_aside)`: what a pause point does in a worker's thread."""


def pause(*, step_aside: bool = True) -> None:
    """Let requests go first, when this thread's work is meant to (see the module docstring)."""
    hook: Hook | None = getattr(_local, "hook", None)
    if hook is not None:
        hook(step_aside)


@contextmanager
def pausing(hook: Hook) -> Iterator[None]:
    """Call `hook` at every `pause()` this thread makes inside the block."""
    previous = getattr(_local, "hook", None)
    _local.hook = hook
    try:
        yield
    finally:
        _local.hook = previous
