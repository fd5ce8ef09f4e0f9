"""The benchmark's pod watch (bench.recorder.watch_pods) against an API server that ends watches, as
kube-apiserver ends one whose client falls behind (the fake API server of the unit tests, told to end each
watch after one event): resumed from the last resourceVersion, bookmarks included, nothing lost."""

from __future__ import annotations

import asyncio
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from bench.recorder import WATCH_RESUMES, watch_pods
from tests.support.builders import make_pod
from tests.support.fake_api import FakeKubeApi

Observe = Callable[[str, dict[str, Any]], None]


class Seen(Exception):
    """Raised by the observer once it saw what the test waits for."""


def pod(name: str) -> dict[str, Any]:
    return make_pod(name, "ns").obj()


def version_of(obj: dict[str, Any] | None) -> str:
    assert obj is not None
    return str(obj["metadata"]["resourceVersion"])


def watch(api: FakeKubeApi, observe: Observe) -> None:
    """`watch_pods` of namespace ns on `api` until it returns or raises."""

    async def run() -> None:
        async with httpx.AsyncClient(base_url=api.url) as http:
            await watch_pods(http, "ns", asyncio.Event(), observe)

    asyncio.run(run())


def started_from(api: FakeKubeApi) -> list[str | None]:
    """The resourceVersion each watch request asked to start from (None: from now)."""
    return [call.query.get("resourceVersion") for call in api.calls_of("watch", "pods")]


def follow(api: FakeKubeApi, until: int, after_first: Callable[[], None]) -> list[tuple[str, str]]:
    """The events `watch_pods` delivers until the `until`-th; `after_first` runs once the first arrived
    (changes made while the first watch is open)."""
    seen: list[tuple[str, str]] = []

    def observe(kind: str, obj: dict[str, Any]) -> None:
        seen.append((kind, obj["metadata"]["name"]))
        if len(seen) == 1:
            after_first()
        if len(seen) == until:
            raise Seen

    with pytest.raises(Seen):
        watch(api, observe)
    return seen


def test_a_watch_the_server_ended_resumes_where_it_stopped(fake_api: FakeKubeApi) -> None:
    added = version_of(fake_api.put("pods", pod("a")))
    fake_api.end_watches(after=1)
    versions: list[str] = []

    def meanwhile() -> None:
        versions.append(version_of(fake_api.put("pods", {**pod("a"), "spec": {"nodeName": "node-1"}})))
        versions.append(str(fake_api.bookmark()))
        versions.append(version_of(fake_api.put("pods", pod("b"))))
        fake_api.delete("pods", pod("a"))

    seen = follow(fake_api, until=4, after_first=meanwhile)
    assert seen == [("ADDED", "a"), ("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "a")]
    assert started_from(fake_api) == [None, added, *versions]


def test_an_error_event_ends_the_watch_with_it(fake_api: FakeKubeApi) -> None:
    fake_api.put("pods", pod("a"))
    fake_api.end_watches(after=1)

    def observe(kind: str, obj: dict[str, Any]) -> None:
        fake_api.compact()  # the next watch starts from a version no longer served: 410 Expired

    with pytest.raises(RuntimeError, match="Expired"):
        watch(fake_api, observe)


def test_a_server_that_keeps_ending_the_watch_is_given_up_on(fake_api: FakeKubeApi) -> None:
    fake_api.end_watches(after=0)

    with pytest.raises(RuntimeError, match="ended the watch of /api/v1/namespaces/ns/pods"):
        watch(fake_api, lambda kind, pod: None)
    assert len(started_from(fake_api)) == WATCH_RESUMES + 1
