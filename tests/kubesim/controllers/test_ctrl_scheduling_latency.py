"""Scheduling latency: watch delivery, the scheduling cycle and the asynchronous bind all take simulated time,
so a pod is never bound in the instant it is created. The durations are measured in virtual time
(`kubesim.clock.Clock.virtual`): exact, whatever the machine's load."""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from typing import Any

import pytest

from kubesim.apiserver.server import ApiServer
from kubesim.clock import Clock
from kubesim.controllers.informer import Handlers, Informer
from kubesim.interface import WatchEvent
from placement.constants import JOB_COMPLETION_INDEX_ANNOTATION
from tests.kubesim.controllers.ctrl_harness import Run, cluster, indexed_job, pod_spec
from tests.support.waiting import eventually_async


def _index(pod: dict[str, Any]) -> str | None:
    annotations = (pod.get("metadata") or {}).get("annotations") or {}
    value = annotations.get(JOB_COMPLETION_INDEX_ANNOTATION)
    return str(value) if value is not None else None


def _leader_bound(server: ApiServer) -> bool:
    return any(
        _index(pod) == "0" and (pod.get("spec") or {}).get("nodeName")
        for pod in server.store.iter("pods", "default")
    )


def _bare_pod(name: str) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": pod_spec(gpus=8)}


async def _bound(server: ApiServer, names: list[str]) -> dict[str, str] | None:
    nodes = {}
    for name in names:
        node = (await server.get("pods", name, namespace="default"))["spec"].get("nodeName")
        if not node:
            return None
        nodes[name] = node
    return nodes


def test_the_second_slow_start_batch_is_admitted_before_the_leader_is_bound(run_virtual_time: Run) -> None:
    """Upstream's race: the Job controller creates indexes 1 and 2 right after the leader, and they reach
    admission while the leader is still on its way through the scheduler, so JobSet's webhook rejects them."""

    async def scenario() -> None:
        # virtual time: the leader's path (delivery + cycle + bind) beats nothing by real-time luck
        async with cluster(nodes=8, pools=2, virtual_time=True) as c:
            leader_bound_at_admission: dict[str, bool] = {}

            def observe(pod: dict[str, Any]) -> None:
                leader_bound_at_admission[str(_index(pod))] = _leader_bound(c.server)

            c.api.deny = observe
            await c.server.create("jobs", indexed_job("latency", 4), namespace="default")
            await c.wait_for(lambda: len(leader_bound_at_admission) == 4, 10, "four admissions")
            assert leader_bound_at_admission["1"] is False
            assert leader_bound_at_admission["2"] is False
            await c.wait_for(lambda: _leader_bound(c.server), 10, "the leader bound in the end")

    run_virtual_time(scenario())


def test_a_pod_is_bound_a_delivery_a_cycle_and_a_round_trip_after_its_creation(run_virtual_time: Run) -> None:
    cycle = 0.5  # scheduler_pods_per_second=2

    async def scenario() -> None:
        async with cluster(components=("scheduler",), virtual_time=True, scheduler_pods_per_second=2) as c:
            created = c.controllers.clock.now()
            await c.server.create("pods", _bare_pod("solo"), namespace="default")
            await c.wait_for(lambda: "solo" in c.api.bound_at, 10, "the pod bound")
            settings = c.settings
            expected = settings.watch_delivery_seconds + cycle + settings.api_request_latency_seconds
            assert c.api.bound_at["solo"] - created == pytest.approx(expected)

    run_virtual_time(scenario())


def test_the_bind_is_asynchronous_the_next_cycle_does_not_wait_for_it(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=4, pools=1, components=("scheduler",)) as c:
            c.api.hold_bindings = release = asyncio.Event()
            for name in ("first", "second"):
                await c.server.create("pods", _bare_pod(name), namespace="default")
            # both cycles ran while the first binding request is still in flight
            await c.wait_for(
                lambda: c.stats.scheduler_attempts == 2 and c.api.bindings_started == 2, 10, "two cycles"
            )
            assert await _bound(c.server, ["first"]) is None
            release.set()
            nodes = await c.wait_for(lambda: _bound(c.server, ["first", "second"]), 10, "both bound")
            # the first pod was assumed on its node: the second (8 GPUs each) had to go elsewhere
            assert nodes["first"] != nodes["second"]

    run(scenario())


class _StreamingApi:
    """A fake API: one empty list, then a watch stream fed by the test."""

    def __init__(self) -> None:
        self.events: asyncio.Queue[WatchEvent] = asyncio.Queue()

    async def list(self, resource: str, **_: Any) -> tuple[list[dict[str, Any]], str]:
        return [], "1"

    def watch(self, resource: str, **_: Any) -> AsyncIterator[WatchEvent]:
        return self._stream()

    async def _stream(self) -> AsyncIterator[WatchEvent]:
        while True:
            yield await self.events.get()


def _event(kind: str, name: str, rv: int) -> WatchEvent:
    obj = {"metadata": {"name": name, "namespace": "ns", "resourceVersion": str(rv)}}
    return {"type": kind, "object": obj}  # type: ignore[typeddict-item]


def test_watch_events_reach_the_handlers_a_delivery_delay_later_in_order(run_virtual_time: Run) -> None:
    async def scenario() -> list[tuple[str, str, float]]:
        clock = Clock.virtual()
        api = _StreamingApi()
        informer = Informer(api, "pods", clock=clock, delivery_seconds=2.0)  # type: ignore[arg-type]
        seen: list[tuple[str, str, float]] = []
        informer.add_handlers(
            Handlers(
                on_add=lambda o: seen.append(("add", o["metadata"]["name"], clock.now())),
                on_update=lambda _o, o: seen.append(("update", o["metadata"]["name"], clock.now())),
                on_delete=lambda o: seen.append(("delete", o["metadata"]["name"], clock.now())),
            )
        )
        task = asyncio.create_task(informer.run())
        await informer.synced.wait()
        sent = clock.now()
        for event in (_event("ADDED", "a", 2), _event("MODIFIED", "a", 3), _event("ADDED", "b", 4)):
            api.events.put_nowait(event)
        await eventually_async(api.events.empty, "the informer took the three events")
        # all three received by the informer, none delivered yet
        assert seen == []
        assert informer.get("ns/a") is None
        await eventually_async(lambda: len(seen) == 3, lambda: f"three deliveries (seen: {seen})")
        task.cancel()
        return [(kind, name, at - sent) for kind, name, at in seen]

    seen = run_virtual_time(scenario())
    assert [(kind, name) for kind, name, _ in seen] == [("add", "a"), ("update", "a"), ("add", "b")]
    assert [delay for _, _, delay in seen] == pytest.approx([2.0, 2.0, 2.0])
