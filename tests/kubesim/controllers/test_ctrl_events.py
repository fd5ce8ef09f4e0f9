"""Events and per-pod writes of the controllers against the real in-process API server: what the Job
controller, kube-scheduler and the kubelet write upstream, request by request."""

from __future__ import annotations

import asyncio
import contextlib
import time
from collections.abc import AsyncIterator, Callable
from typing import Any

import pytest

from kubesim.controllers.preemption import NO_VICTIMS
from kubesim.controllers.scheduler import NOTE_LENGTH_LIMIT, truncate_note
from tests.kubesim.controllers.ctrl_harness import Cluster, cluster, index_of, indexed_job, pod_spec

Obj = dict[str, Any]

JOB_ONLY = ("job-controller",)
SCHEDULER_ONLY = ("scheduler",)
SCHEDULER_AND_KUBELET = ("scheduler", "kubelet")


def bare_pod(gpus: int = 8) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": pod_spec(gpus=gpus),
    }


async def events_about(c: Cluster, name: str, reason: str | None = None) -> list[Obj]:
    selector = f"involvedObject.name={name}" + (f",reason={reason}" if reason else "")
    items, _ = await c.server.list("events", namespace="default", field_selector=selector)
    return items


def writes(c: Cluster, verb_resource: str) -> int:
    return c.stats.by_verb_resource[verb_resource]


# --- Job controller: identical FailedCreate events become count patches ----------------------------------


def test_every_denied_follower_patches_the_count_of_one_failed_create_event(
    run: Callable[[Any], Any],
) -> None:
    async def scenario() -> None:
        async with cluster(components=JOB_ONLY) as c:
            c.api.deny = lambda pod: None if index_of(pod) == 0 else "leader pod not yet scheduled"
            await c.server.create("jobs", indexed_job("gated", 4), namespace="default")

            def denied() -> int:
                return sum(not a.allowed for a in c.api.attempts)

            await c.wait_for(lambda: denied() >= 6, 30, "six denied follower creates")

            async def settled() -> bool:
                failed = await events_about(c, "gated", "FailedCreate")
                n = denied()
                # upstream: SuccessfulCreate (leader) + FailedCreate created once, every repeat a PATCH
                return (
                    len(failed) == 1
                    and failed[0]["count"] == n
                    and (writes(c, "create events"), writes(c, "patch events")) == (2, n - 1)
                )

            await c.wait_for(settled, 30, "one FailedCreate event counting every denied create")

    run(scenario())


# --- kubelet: the status manager's writes, in order ----------------------------------------------------


def _state(container_status: Obj) -> str:
    ((kind, detail),) = container_status["state"].items()
    return f"{kind}:{detail['reason']}" if detail.get("reason") else str(kind)


def _describe(pod: Obj) -> tuple[str, bool, tuple[str, ...], str | None]:
    """(phase, bound, container states, Ready condition status) of one watched pod version."""
    status = pod.get("status") or {}
    states = tuple(_state(item) for item in status.get("containerStatuses") or [])
    ready = next((c.get("status") for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    return str(status.get("phase")), bool((pod.get("spec") or {}).get("nodeName")), states, ready


@contextlib.asynccontextmanager
async def watching(c: Cluster, name: str) -> AsyncIterator[list[tuple[float, Obj]]]:
    """Every version of the pod as a watch delivers it, with the real time it arrived."""
    seen: list[tuple[float, Obj]] = []
    _, since = await c.server.list("pods", namespace="default")  # every version after this one

    async def collect() -> None:
        stream = c.server.watch(
            "pods", namespace="default", resource_version=since, field_selector=f"metadata.name={name}"
        )
        async for event in stream:
            seen.append((time.monotonic(), event["object"]))

    task = asyncio.create_task(collect())
    try:
        yield seen
    finally:
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task


CREATED = ("Pending", False, (), None)
BOUND = ("Pending", True, (), None)
ADMITTED = ("Pending", True, ("waiting:ContainerCreating",), "False")
RUNNING = ("Running", True, ("running",), "True")
SUCCEEDED = ("Succeeded", True, ("terminated:Completed",), "False")


START_DELAY = 50.0


@pytest.mark.parametrize(
    ("run_seconds", "versions"),
    [
        (None, [CREATED, BOUND, ADMITTED, RUNNING]),
        (30.0, [CREATED, BOUND, ADMITTED, RUNNING, SUCCEEDED]),
    ],
)
def test_the_kubelet_writes_pending_then_running_then_terminal_status_each_a_get_and_a_patch(
    run: Callable[[Any], Any], run_seconds: float | None, versions: list[Any]
) -> None:
    async def scenario() -> None:
        settings: dict[str, Any] = {
            "pod_run_seconds": run_seconds,
            "kubelet_start_delay_seconds": START_DELAY,
        }
        async with cluster(components=SCHEDULER_AND_KUBELET, **settings) as c:
            async with watching(c, "p") as seen:
                await c.server.create("pods", bare_pod(), namespace="default")
                await c.wait_for(lambda: len(seen) >= len(versions), 30, "every status version")
                kubelet_writes = len(versions) - 2
                await c.wait_for(
                    lambda: writes(c, "patch pods/status") == kubelet_writes, 30, "the kubelet's last write"
                )
            assert [_describe(p) for _, p in seen] == versions
            assert writes(c, "get pods") == kubelet_writes  # the status manager GETs before each PATCH
            at = {_describe(p): c.simulated(t) for t, p in seen}
            assert at[ADMITTED] - at[BOUND] < START_DELAY / 2  # admitted at once, not at the start delay
            assert at[RUNNING] - at[BOUND] >= START_DELAY * 0.9
            if run_seconds is not None:
                assert at[SUCCEEDED] - at[RUNNING] >= run_seconds * 0.9
            admitted, running = (next(p for _, p in seen if _describe(p) == v) for v in (ADMITTED, RUNNING))
            assert running["status"]["startTime"] == admitted["status"]["startTime"]
            assert running["status"]["qosClass"] == admitted["status"]["qosClass"] == "Burstable"

    run(scenario())


def test_a_started_pod_has_the_events_scheduler_and_kubelet_write(run: Callable[[Any], Any]) -> None:
    async def scenario() -> None:
        async with cluster(components=SCHEDULER_AND_KUBELET) as c:
            await c.server.create("pods", bare_pod(), namespace="default")

            async def all_four() -> list[Obj]:
                events = await events_about(c, "p")
                return events if len(events) == 4 else []

            events = await c.wait_for(all_four, 30, "Scheduled, Pulled, Created, Started")
            by_reason = {e["reason"]: e for e in events}
            node = (await c.server.get("pods", "p", namespace="default"))["spec"]["nodeName"]
            scheduled = by_reason["Scheduled"]
            assert scheduled["message"] == f"Successfully assigned default/p to {node}"
            assert (scheduled["action"], scheduled["reportingComponent"]) == ("Binding", "default-scheduler")
            assert by_reason["Pulled"]["message"] == (
                'Container image "busybox:1.36" already present on machine and can be accessed by the pod'
            )
            assert (by_reason["Created"]["message"], by_reason["Started"]["message"]) == (
                "Container created",
                "Container started",
            )
            for reason in ("Pulled", "Created", "Started"):
                assert by_reason[reason]["source"] == {"component": "kubelet", "host": node}
                assert by_reason[reason]["involvedObject"]["fieldPath"] == "spec.containers{main}"

    run(scenario())


def test_deleting_a_running_pod_stops_its_containers_then_removes_it(run: Callable[[Any], Any]) -> None:
    async def scenario() -> None:
        async with cluster(components=SCHEDULER_AND_KUBELET) as c:
            await c.server.create("pods", bare_pod(), namespace="default")
            await c.wait_for(lambda: c.stats.pods_running == 1, 30, "the pod running")
            deleted_at = time.monotonic()
            await c.server.delete("pods", "p", namespace="default")

            async def gone() -> bool:
                return await c.pods() == []

            await c.wait_for(gone, 30, "the kubelet's final delete")
            assert c.simulated(time.monotonic() - deleted_at) >= c.settings.kubelet_stop_delay_seconds * 0.9
            (killing,) = await c.wait_for(lambda: events_about(c, "p", "Killing"), 30, "the Killing event")
            assert killing["message"] == "Stopping container main"

    run(scenario())


# --- scheduler: FailedScheduling as an events.k8s.io series, Unschedulable only on change --------------


UNSCHEDULABLE: dict[str, Any] = {"scheduler_unschedulable_flush_seconds": 1.0}


@pytest.mark.parametrize(
    ("length", "expected"),
    [
        (NOTE_LENGTH_LIMIT, "x" * NOTE_LENGTH_LIMIT),
        (NOTE_LENGTH_LIMIT + 1, "x" * (NOTE_LENGTH_LIMIT - 4) + " ..."),
    ],
)
def test_a_failed_scheduling_note_is_cut_to_the_events_api_limit(length: int, expected: str) -> None:
    assert truncate_note("x" * length) == expected


def test_failed_scheduling_events_form_a_series_about_the_pod_as_queued(run: Callable[[Any], Any]) -> None:
    async def scenario() -> None:
        async with cluster(components=SCHEDULER_ONLY, **UNSCHEDULABLE) as c:
            await c.server.create("pods", bare_pod(gpus=16), namespace="default")
            await c.wait_for(lambda: c.stats.scheduler_attempts >= 5, 30, "five scheduling attempts")

            async def two_events() -> list[Obj]:
                events = await events_about(c, "p", "FailedScheduling")
                return events if len(events) == 2 and writes(c, "patch events") == 1 else []

            # attempt 1 is about the pod as created; the Unschedulable condition patch changes its
            # resourceVersion, so attempt 2 starts a new series, which attempt 3 PATCHes to count 2 and
            # later attempts only count in memory
            first, second = sorted(
                await c.wait_for(two_events, 30, "two FailedScheduling events"),
                key=lambda e: int(e["involvedObject"]["resourceVersion"]),
            )
            assert "series" not in first
            assert second["series"]["count"] == 2
            assert writes(c, "create events") == 2
            assert first["message"] == (
                "0/8 nodes are available: 8 Insufficient nvidia.com/gpu. "
                f"preemption: 0/8 nodes are available: 8 {NO_VICTIMS}."
            )
            assert (first["action"], first["type"]) == ("Scheduling", "Warning")

    run(scenario())


def test_the_unschedulable_condition_is_patched_only_when_its_message_changes(
    run: Callable[[Any], Any],
) -> None:
    async def scenario() -> None:
        async with cluster(components=SCHEDULER_ONLY, **UNSCHEDULABLE) as c:
            await c.server.create("pods", bare_pod(gpus=16), namespace="default")
            await c.wait_for(lambda: c.stats.scheduler_attempts >= 4, 30, "four scheduling attempts")
            assert writes(c, "patch pods/status") == 1
            nodes, _ = await c.server.list("nodes")
            taint = {"key": "dedicated", "value": "other", "effect": "NoSchedule"}
            await c.server.patch("nodes", nodes[0]["metadata"]["name"], {"spec": {"taints": [taint]}})
            await c.wait_for(lambda: writes(c, "patch pods/status") == 2, 30, "the new message written")
            attempts = c.stats.scheduler_attempts
            await c.wait_for(lambda: c.stats.scheduler_attempts >= attempts + 3, 30, "three more attempts")
            assert writes(c, "patch pods/status") == 2
            pod = await c.server.get("pods", "p", namespace="default")
            (condition,) = pod["status"]["conditions"]
            assert "1 node(s) had untolerated taint {dedicated: other}" in condition["message"]

    run(scenario())
