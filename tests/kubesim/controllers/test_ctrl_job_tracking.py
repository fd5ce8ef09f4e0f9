"""The Job controller's pod tracking with the `batch.kubernetes.io/job-tracking` finalizer, against the real
in-process API server (k/k pkg/controller/job/job_controller.go trackJobStatusAndRemoveFinalizers,
flushUncountedAndRemoveFinalizers, isPodFailed, syncOrphanPod)."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.apiserver.store import Watcher
from kubesim.controllers.objects import condition_true
from tests.kubesim.controllers.ctrl_harness import Cluster, Run, cluster, index_of, indexed_job

JOB_ONLY = ("job-controller",)
FINALIZER = "batch.kubernetes.io/job-tracking"
Obj = dict[str, Any]


def non_indexed_job(name: str, size: int) -> Obj:
    job = indexed_job(name, size)
    job["spec"]["completionMode"] = "NonIndexed"
    return job


def drain(watcher: Watcher) -> list[tuple[int, str, Obj]]:
    """Every event the watcher queued so far, as (resourceVersion, type, object)."""
    events = []
    while not watcher.queue.empty():
        kind, obj = watcher.queue.get_nowait()
        events.append((int(obj["metadata"]["resourceVersion"]), kind, obj))
    return events


def finalizers(pod: Obj) -> list[str]:
    return list(pod["metadata"].get("finalizers") or [])


async def live_pods(c: Cluster) -> list[Obj]:
    return [p for p in await c.pods() if not p["metadata"].get("deletionTimestamp")]


async def job_status(c: Cluster, name: str) -> Obj:
    return dict((await c.server.get("jobs", name, namespace="default")).get("status") or {})


def test_every_pod_the_job_creates_carries_the_tracking_finalizer(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(components=JOB_ONLY) as c:
            await c.server.create("jobs", indexed_job("held", 3), namespace="default")
            pods = await c.wait_for(lambda: _at_least(c, 3), 30, "three pods")
            assert [finalizers(p) for p in pods] == [[FINALIZER]] * 3

    run(scenario())


def test_a_succeeded_pod_is_recorded_uncounted_then_unfinalized_then_counted(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(components=JOB_ONLY) as c:
            await c.server.create("jobs", non_indexed_job("tracked", 2), namespace="default")
            first, _ = await c.wait_for(lambda: _at_least(c, 2), 30, "two pods")
            jobs_seen = c.server.subscribe("jobs", namespace="default")
            pods_seen = c.server.subscribe("pods", namespace="default")
            uid = first["metadata"]["uid"]
            await c.server.patch(
                "pods",
                first["metadata"]["name"],
                {"status": {"phase": "Succeeded"}},
                namespace="default",
                subresource="status",
            )
            await c.wait_for(lambda: _counted(c, "tracked", "succeeded", 1), 30, "succeeded == 1")
            job_events = drain(jobs_seen)
            pod_events = [e for e in drain(pods_seen) if e[2]["metadata"]["uid"] == uid]
            recorded = [
                (rv, obj["status"])
                for rv, _, obj in job_events
                if uid in (obj["status"].get("uncountedTerminatedPods") or {}).get("succeeded", [])
            ]
            assert recorded, job_events
            assert "succeeded" not in recorded[0][1]
            unfinalized = next(rv for rv, _, obj in pod_events if FINALIZER not in finalizers(obj))
            counted = next(rv for rv, _, obj in job_events if obj["status"].get("succeeded") == 1)
            assert recorded[0][0] < unfinalized < counted
            final = await job_status(c, "tracked")
            assert final["uncountedTerminatedPods"] == {}
            assert final["active"] == 1

    run(scenario())


def test_a_pod_deleted_before_succeeding_counts_as_failed_and_is_replaced(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=4, pools=2) as c:
            await c.server.create("jobs", indexed_job("evicted", 2), namespace="default")
            pods = await c.wait_for(lambda: _running(c, 2), 30, "two running pods")
            victim = next(p for p in pods if index_of(p) == 0)
            marked = await c.server.delete("pods", victim["metadata"]["name"], namespace="default")
            assert marked["metadata"]["deletionTimestamp"]
            await c.wait_for(lambda: _counted(c, "evicted", "failed", 1), 30, "failed == 1")
            await c.wait_for(lambda: _gone(c, victim["metadata"]["uid"]), 30, "the deleted pod gone")
            replacements = await c.wait_for(lambda: _running(c, 2), 30, "a replacement running")
            assert sorted(index_of(p) for p in replacements) == [0, 1]
            assert victim["metadata"]["uid"] not in {p["metadata"]["uid"] for p in replacements}
            status = await job_status(c, "evicted")
            assert status["failed"] == 1
            assert status["uncountedTerminatedPods"] == {}

    run(scenario())


def test_a_job_failing_past_its_backoff_limit_is_failed_only_after_its_pods_are_gone(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=4, pools=2) as c:
            await c.server.create("jobs", indexed_job("fragile", 2, backoff_limit=0), namespace="default")
            pods = await c.wait_for(lambda: _running(c, 2), 30, "two running pods")
            jobs_seen = c.server.subscribe("jobs", namespace="default")
            await c.controllers.fail_nodes(f"kubernetes.io/hostname={pods[0]['spec']['nodeName']}")
            job = await c.wait_for(lambda: _finished(c, "fragile"), 30, "Failed")
            assert [x["type"] for x in job["status"]["conditions"]] == ["FailureTarget", "Failed"]
            assert job["status"]["failed"] == 2
            assert job["status"]["uncountedTerminatedPods"] == {}
            conditions_seen = [
                [x["type"] for x in obj["status"].get("conditions") or []] for _, _, obj in drain(jobs_seen)
            ]
            assert ["FailureTarget"] in conditions_seen
            assert all(FINALIZER not in finalizers(p) for p in await c.pods())

    run(scenario())


def test_pods_orphaned_by_the_garbage_collector_lose_the_tracking_finalizer(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(components=JOB_ONLY) as c:
            await c.server.create("jobs", indexed_job("abandoned", 2), namespace="default")
            pods = await c.wait_for(lambda: _at_least(c, 2), 30, "two pods")
            assert all(finalizers(p) == [FINALIZER] for p in pods)
            await c.server.delete("jobs", "abandoned", namespace="default", propagation_policy="Orphan")
            orphans = await c.wait_for(lambda: _unfinalized(c, 2), 30, "finalizers removed")
            assert all(not p["metadata"].get("ownerReferences") for p in orphans)
            assert all(not p["metadata"].get("deletionTimestamp") for p in orphans)

    run(scenario())


def test_deleting_a_job_deletes_its_running_pods_despite_the_finalizer(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=4, pools=2) as c:
            await c.server.create("jobs", indexed_job("short-lived", 2), namespace="default")
            await c.wait_for(lambda: _running(c, 2), 30, "two running pods")
            await c.server.delete("jobs", "short-lived", namespace="default")
            await c.wait_for(lambda: _no_pods(c), 30, "every pod gone")

    run(scenario())


def test_a_completed_job_has_counted_every_pod_and_kept_none_finalized(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(pod_run_seconds=5) as c:
            await c.server.create("jobs", non_indexed_job("done", 3), namespace="default")
            job = await c.wait_for(lambda: _finished(c, "done"), 60, "Complete")
            assert condition_true(job, "Complete")
            assert job["status"]["succeeded"] == 3
            assert job["status"]["uncountedTerminatedPods"] == {}
            pods = await c.pods()
            assert len(pods) == 3
            assert all(finalizers(p) == [] for p in pods)

    run(scenario())


async def _at_least(c: Cluster, n: int) -> list[Obj] | None:
    pods = await live_pods(c)
    return sorted(pods, key=lambda p: p["metadata"]["name"]) if len(pods) >= n else None


async def _running(c: Cluster, n: int) -> list[Obj] | None:
    pods = [p for p in await live_pods(c) if (p.get("status") or {}).get("phase") == "Running"]
    return pods if len(pods) >= n else None


async def _counted(c: Cluster, name: str, field: str, value: int) -> bool:
    status = await job_status(c, name)
    return status.get(field) == value and status.get("uncountedTerminatedPods") == {}


async def _gone(c: Cluster, uid: str) -> bool:
    return uid not in {p["metadata"]["uid"] for p in await c.pods()}


async def _unfinalized(c: Cluster, n: int) -> list[Obj] | None:
    pods = await c.pods()
    return pods if len(pods) == n and all(FINALIZER not in finalizers(p) for p in pods) else None


async def _no_pods(c: Cluster) -> bool:
    return not await c.pods()


async def _finished(c: Cluster, name: str) -> Obj | None:
    job = await c.server.get("jobs", name, namespace="default")
    return job if condition_true(job, "Complete") or condition_true(job, "Failed") else None


pytestmark = pytest.mark.timeout(120)
