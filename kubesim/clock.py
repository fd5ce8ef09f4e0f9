"""Simulated time: every controller delay goes through one `Clock`, so a time scale compresses them all.

`time_scale` is real seconds per simulated second: 0.01 runs a 60 s backoff in 0.6 s of wall time.
`now()` is simulated seconds since the clock started (what the controllers' delays are measured in);
`wall_time()` is the real UTC time used for timestamps written into objects.
"""

from __future__ import annotations

import asyncio
import time
from datetime import UTC, datetime


class Clock:
    def __init__(self, time_scale: float = 1.0) -> None:
        if not time_scale > 0:
            raise ValueError(
                f"time_scale must be > 0 (real seconds per simulated second), got {time_scale!r}"
            )
        self.time_scale = time_scale
        self._origin = time.monotonic()

    def now(self) -> float:
        """Simulated seconds elapsed since this clock was created."""
        return (time.monotonic() - self._origin) / self.time_scale

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
