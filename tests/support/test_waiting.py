"""The shared polling helpers: what they return, what they ignore, and what they say on the deadline."""

from __future__ import annotations

import asyncio
from collections.abc import Callable, Iterator

import pytest

from tests.support.waiting import eventually, eventually_async


def answers(*values: object) -> Callable[[], object]:
    """A probe returning `values` in turn (raising those that are exceptions), then the last one forever."""
    remaining: Iterator[object] = iter(values)
    last: list[object] = [None]

    def probe() -> object:
        last[0] = next(remaining, last[0])
        if isinstance(last[0], BaseException):
            raise last[0]
        return last[0]

    return probe


def test_returns_the_first_truthy_value() -> None:
    assert eventually(answers(None, 0, [], "ready"), "ready", 5, interval=0) == "ready"


def test_names_what_was_awaited_and_the_last_value_on_the_deadline() -> None:
    with pytest.raises(
        AssertionError, match=r"timed out after 0.05s waiting for the leader \(last value: \[\]\)"
    ):
        eventually(answers(None, []), "the leader", 0.05, interval=0.01)


def test_a_description_function_is_called_at_the_deadline() -> None:
    tally = {"ok": 0}

    def one_admission() -> bool:
        tally["ok"] = 1
        return False

    with pytest.raises(AssertionError, match=r"waiting for 3 admissions \(stalled at \{'ok': 1\}\)"):
        eventually(one_admission, lambda: f"3 admissions (stalled at {tally})", 0.05, interval=0.01)


def test_ignored_exceptions_mean_not_yet_and_the_last_one_is_reported() -> None:
    assert (
        eventually(answers(ConnectionError("refused"), "up"), "up", 5, interval=0, ignoring=(OSError,))
        == "up"
    )
    with pytest.raises(AssertionError, match=r"last error: ConnectionError\('refused'\)") as failure:
        eventually(answers(ConnectionError("refused")), "up", 0.05, interval=0.01, ignoring=(OSError,))
    assert isinstance(failure.value.__cause__, ConnectionError)


def test_other_exceptions_fail_at_once() -> None:
    with pytest.raises(KeyError):
        eventually(answers(KeyError("boom")), "never", 60, ignoring=(OSError,))


def test_async_accepts_sync_and_async_probes() -> None:
    async def ready() -> str | None:
        await asyncio.sleep(0)
        return "ready"

    async def both() -> tuple[object, object]:
        from_sync = await eventually_async(answers(None, 1), "one", 5, interval=0)
        from_async = await eventually_async(ready, "ready", 5)
        return from_sync, from_async

    assert asyncio.run(both()) == (1, "ready")


def test_async_names_what_was_awaited_on_the_deadline() -> None:
    with pytest.raises(AssertionError, match=r"waiting for the sentinel \(last value: 0\)"):
        asyncio.run(eventually_async(lambda: 0, "the sentinel", 0.05))
