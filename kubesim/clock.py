"""Simulated time: every controller delay goes through one `Clock`, so a time scale compresses them all.

`time_scale` is real seconds per simulated second: 0.01 runs a 60 s backoff in 0.6 s of wall time.
`now()` is simulated seconds since the clock started (what the controllers' delays are measured in);
`wall_time()` is the real UTC time used for timestamps written into objects.

Virtual mode (`Clock.virtual()`, for tests that assert simulated durations): simulated time is the event
loop's own, on a `VirtualTimeLoop` (`run_virtual`), which jumps to its next timer whenever nothing is ready
to run instead of waiting for it: a discrete-event simulation. Durations come out exact whatever the
machine's load, and a run takes only the CPU time it needs. Only for an in-process cluster: a loop that
jumps over time would also time out real I/O.
"""

from __future__ import annotations

import asyncio
import selectors
import time
from collections.abc import Callable, Coroutine
from datetime import UTC, datetime
from typing import Any, TypeVar

T = TypeVar("T")


class Clock:
    def __init__(self, time_scale: float = 1.0, *, timer: Callable[[], float] = time.monotonic) -> None:
        if not time_scale > 0:
            raise ValueError(
                f"time_scale must be > 0 (real seconds per simulated second), got {time_scale!r}"
            )
        self.time_scale = time_scale
        self._timer = timer
        self._origin = timer()

    @classmethod
    def virtual(cls) -> Clock:
        """A clock on the running `VirtualTimeLoop`'s time (one simulated second per loop second)."""
        loop = asyncio.get_running_loop()
        if not isinstance(loop, VirtualTimeLoop):
            raise TypeError("a virtual clock runs on a VirtualTimeLoop (kubesim.clock.run_virtual)")
        return cls(1.0, timer=loop.time)

    def now(self) -> float:
        """Simulated seconds elapsed since this clock was created."""
        return (self._timer() - self._origin) / self.time_scale

    async def sleep(self, seconds: float) -> None:
        """Sleep `seconds` of simulated time (0 or less just yields to the event loop)."""
        await asyncio.sleep(max(0.0, seconds) * self.time_scale)

    async def sleep_until(self, simulated: float) -> None:
        await self.sleep(simulated - self.now())

    @staticmethod
    def wall_time() -> str:
        """RFC3339 UTC timestamp with seconds precision, as metav1.Time serialises."""
        return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    @staticmethod
    def wall_time_micro() -> str:
        """RFC3339 UTC timestamp with microseconds, as metav1.MicroTime serialises (events' eventTime)."""
        return datetime.now(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


class _JumpingSelector(selectors.DefaultSelector):
    """Polls without blocking; where the loop would wait `timeout` seconds for its next timer, it moves
    the loop's clock that far instead. With no timer at all it blocks (another thread may wake it)."""

    def __init__(self) -> None:
        super().__init__()
        self.jump: Callable[[float], None] = lambda _seconds: None

    def select(self, timeout: float | None = None) -> list[tuple[selectors.SelectorKey, int]]:
        ready = super().select(0)
        if ready or (timeout is not None and timeout <= 0):
            return ready
        if timeout is None:
            return super().select(None)
        self.jump(timeout)
        return []


class VirtualTimeLoop(asyncio.SelectorEventLoop):
    """An event loop whose clock (`time()`) starts at 0 and moves only to the next due timer, and only
    when no callback is ready."""

    def __init__(self) -> None:
        self._virtual_now = 0.0
        selector = _JumpingSelector()
        super().__init__(selector)
        selector.jump = self._jump

    def time(self) -> float:
        return self._virtual_now

    def _jump(self, seconds: float) -> None:
        self._virtual_now += seconds


def run_virtual(main: Coroutine[Any, Any, T]) -> T:
    """Run `main` to completion on a fresh `VirtualTimeLoop` (what `asyncio.run` does on a real one)."""
    with asyncio.Runner(loop_factory=VirtualTimeLoop) as runner:
        return runner.run(main)
