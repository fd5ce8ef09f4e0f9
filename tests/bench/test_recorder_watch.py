"""The benchmark's pod watch (bench.recorder.watch_pods) against an API server that ends watches, as
kube-apiserver ends one whose client falls behind: resumed from the last resourceVersion, nothing lost."""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest

from bench.recorder import WATCH_RESUMES, watch_pods


def event(kind: str, name: str, version: str) -> dict[str, Any]:
    return {"type": kind, "object": {"metadata": {"name": name, "resourceVersion": version}}}


class EndingWatches:
    """Serves each watch request the next batch of events, then ends the stream; remembers the
    resourceVersion each request asked to start from."""

    def __init__(self, batches: list[list[dict[str, Any]]]) -> None:
        self.batches = iter(batches)
        self.started_from: list[str | None] = []

    def handle(self, request: httpx.Request) -> httpx.Response:
        self.started_from.append(request.url.params.get("resourceVersion"))
        body = "".join(json.dumps(e) + "\n" for e in next(self.batches, []))
        return httpx.Response(200, content=body.encode())


class Seen(Exception):
    """Raised by the observer once it saw what the test waits for."""


def watch(server: EndingWatches, observe: Callable[[str, dict[str, Any]], None]) -> None:
    """`watch_pods` against `server` until it returns or raises."""

    async def run() -> None:
        transport = httpx.MockTransport(server.handle)
        async with httpx.AsyncClient(base_url="https://kube.test", transport=transport) as http:
            await watch_pods(http, "ns", asyncio.Event(), observe)

    asyncio.run(run())


def follow(server: EndingWatches, until: int) -> list[tuple[str, str]]:
    seen: list[tuple[str, str]] = []

    def observe(kind: str, pod: dict[str, Any]) -> None:
        seen.append((kind, pod["metadata"]["name"]))
        if len(seen) == until:
            raise Seen

    with pytest.raises(Seen):
        watch(server, observe)
    return seen


def test_a_watch_the_server_ended_resumes_where_it_stopped() -> None:
    server = EndingWatches(
        [
            [event("ADDED", "a", "10"), event("MODIFIED", "a", "11")],
            [event("BOOKMARK", "", "15")],
            [event("ADDED", "b", "16"), event("DELETED", "a", "17")],
        ]
    )
    seen = follow(server, until=4)
    assert seen == [("ADDED", "a"), ("MODIFIED", "a"), ("ADDED", "b"), ("DELETED", "a")]
    assert server.started_from == [None, "11", "15"]


def test_an_error_event_ends_the_watch_with_it() -> None:
    expired = {"type": "ERROR", "object": {"code": 410, "reason": "Expired"}}
    server = EndingWatches([[event("ADDED", "a", "10")], [expired]])

    with pytest.raises(RuntimeError, match="Expired"):
        watch(server, lambda kind, pod: None)


def test_a_server_that_keeps_ending_the_watch_is_given_up_on() -> None:
    server = EndingWatches([])

    with pytest.raises(RuntimeError, match="ended the watch of /api/v1/namespaces/ns/pods"):
        watch(server, lambda kind, pod: None)
    assert len(server.started_from) == WATCH_RESUMES + 1
