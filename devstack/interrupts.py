"""Ctrl-C and SIGTERM for `python -m devstack`: a stop request, raised only where stopping is safe.

Python's default turns SIGINT into a KeyboardInterrupt raised at whatever line the main thread runs. In a
supervisor that line can be inside subprocess's own bookkeeping: between `Popen._internal_poll` taking the
Popen's waitpid lock and the `try` that releases it (every later wait on that child then blocks forever, so
the stop hangs), or between fork and the new child's Popen object existing (a child nobody stops).

A process started as a background job of a non-interactive shell (`make test &`, a CI step, nohup)
inherits SIGINT ignored, and Python then leaves it ignored: `devstack run` started from such a test suite
never stopped on SIGINT (the run test's "still running 60 s after SIGINT"). `handle_stop_signals()` installs
its handler regardless, as uvicorn does.

With `handle_stop_signals()` a signal only records the request. It becomes a KeyboardInterrupt inside
`pause()`, the sleep of every wait loop (readiness, placement, serving), or at `check()`: places where no
lock is held and no child is half-started. Library users that never call `handle_stop_signals()` keep
Python's default; `pause()` is then a plain sleep.
"""

from __future__ import annotations

import signal
import time
from collections.abc import Iterator
from contextlib import contextmanager
from types import FrameType

STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM)

_requested: int | None = None
_pausing = False


def _on_stop_signal(signum: int, _frame: FrameType | None) -> None:
    global _requested
    _requested = signum
    if _pausing:
        raise KeyboardInterrupt


def check() -> None:
    """Raise KeyboardInterrupt if a stop was requested."""
    if _requested is not None:
        raise KeyboardInterrupt


PAUSE_SLICE_SECONDS = 0.25
"""A pause sleeps in slices this long and checks for a stop request after each: a signal the kernel hands
to another thread (any thread that has it unblocked may take a process-directed signal) runs the handler
in the main thread only at its next bytecode, and does not cut the main thread's sleep short."""


def pause(seconds: float) -> None:
    """Sleep; a stop requested before or during the sleep raises KeyboardInterrupt here and only here."""
    global _pausing
    check()
    deadline = time.monotonic() + seconds
    _pausing = True
    try:
        while (remaining := deadline - time.monotonic()) > 0:
            time.sleep(min(remaining, PAUSE_SLICE_SECONDS))
            check()
    finally:
        _pausing = False


@contextmanager
def handle_stop_signals() -> Iterator[None]:
    """SIGINT and SIGTERM become a stop request for the duration (main thread only), even if the parent
    left SIGINT ignored (a background job of a non-interactive shell): "Ctrl-C stops everything" holds."""
    global _requested
    _requested = None
    previous = {sig: signal.signal(sig, _on_stop_signal) for sig in STOP_SIGNALS}
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)
    try:
        yield
    finally:
        for sig, handler in previous.items():
            signal.signal(sig, handler)
        _requested = None
