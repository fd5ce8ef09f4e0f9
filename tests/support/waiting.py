"""Waiting for a condition in tests: poll a probe until it returns something truthy, with a deadline.

A deadline is not a timing assertion: it only bounds how long a broken test hangs, so it is generous. On the
deadline the AssertionError names what was awaited and the last value (or exception) the probe produced;
`what` may be a function, called at the deadline, that describes the state reached (a tally, a log).
`ignoring` lists exceptions that mean "not yet" (a server still starting, a connection reset mid-restart);
any other exception fails at once.
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import TypeVar, cast, overload

T = TypeVar("T")

Ignored = tuple[type[BaseException], ...]
Description = str | Callable[[], str]

DEFAULT_TIMEOUT = 30.0


class _Attempts:
    """The deadline and the last outcome of a poll, shared by the sync and async loops."""

    def __init__(self, what: Description, timeout: float) -> None:
        self.what = what
        self.timeout = timeout
        self.deadline = time.monotonic() + timeout
        self.last: object = None
        self.error: BaseException | None = None

    def saw(self, value: object) -> None:
        self.last, self.error = value, None

    def failed(self, error: BaseException) -> None:
        self.last, self.error = None, error

    def check_deadline(self) -> None:
        if time.monotonic() < self.deadline:
            return
        what = self.what if isinstance(self.what, str) else self.what()
        outcome = f"last error: {self.error!r}" if self.error is not None else f"last value: {self.last!r}"
        raise AssertionError(
            f"timed out after {self.timeout:g}s waiting for {what} ({outcome})"
        ) from self.error


def eventually(
    probe: Callable[[], T | None],
    what: Description,
    timeout: float = DEFAULT_TIMEOUT,
    *,
    interval: float = 0.05,
    ignoring: Ignored = (),
) -> T:
    """Call `probe` every `interval` seconds until it returns something truthy, and return that."""
    attempts = _Attempts(what, timeout)
    while True:
        try:
            value = probe()
        except ignoring as error:
            attempts.failed(error)
        else:
            if value:
                return value
            attempts.saw(value)
        attempts.check_deadline()
        time.sleep(interval)


@overload
async def eventually_async(
    probe: Callable[[], Awaitable[T | None]],
    what: Description,
    timeout: float = DEFAULT_TIMEOUT,
    *,
    interval: float = 0.01,
    ignoring: Ignored = (),
) -> T: ...


@overload
async def eventually_async(
    probe: Callable[[], T | None],
    what: Description,
    timeout: float = DEFAULT_TIMEOUT,
    *,
    interval: float = 0.01,
    ignoring: Ignored = (),
) -> T: ...


async def eventually_async(
    probe: Callable[[], Awaitable[T | None] | T | None],
    what: Description,
    timeout: float = DEFAULT_TIMEOUT,
    *,
    interval: float = 0.01,
    ignoring: Ignored = (),
) -> T:
    """`eventually` inside an event loop: `probe` may be sync or async, and the wait yields to the loop."""
    attempts = _Attempts(what, timeout)
    while True:
        try:
            outcome = probe()
            value = cast("T | None", await outcome if inspect.isawaitable(outcome) else outcome)
        except ignoring as error:
            attempts.failed(error)
        else:
            if value:
                return value
            attempts.saw(value)
        attempts.check_deadline()
        await asyncio.sleep(interval)
