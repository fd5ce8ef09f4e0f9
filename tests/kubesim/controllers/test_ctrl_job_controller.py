"""Job controller fidelity against the real in-process API server (kube-controller-manager behaviour)."""

from __future__ import annotations

import itertools
import time
from typing import Any

import pytest

from kubesim.apiserver.server import ApiServer
from kubesim.controllers.job_pods import build_pod
from kubesim.controllers.objects import condition_true
from tests.kubesim.controllers.ctrl_harness import (
    Cluster,
    Run,
    cluster,
    index_of,
    indexed_job,
    standalone_job_controller,
)

JOB_ONLY = ("job-controller",)


async def _job(c: Cluster, name: str) -> dict[str, Any]:
    return await c.server.get("jobs", name, namespace="default")


def _intervals(c: Cluster, times: list[float]) -> list[float]:
    return [c.simulated(b - a) for a, b in itertools.pairwise(times)]


def test_denied_pods_are_retried_with_a_doubling_per_job_backoff_one_create_per_sync(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(components=JOB_ONLY, time_scale=0.1) as c:
            c.api.deny = lambda _pod: "leader pod not yet scheduled"
            await c.server.create("jobs", indexed_job("denied", 4), namespace="default")
            await c.wait_for(lambda: len(c.api.attempts) >= 5, 30, "five create attempts")
            attempts = c.api.attempts[:5]
            # slow start: the first (size 1) batch fails, so each sync attempts exactly one pod: index 0
            assert [a.index for a in attempts] == ["0"] * 5
            assert not any(a.allowed for a in attempts)
            gaps = _intervals(c, [a.at for a in attempts])
            for gap, expected in zip(gaps, [1, 2, 4, 8], strict=True):
                assert expected * 0.9 <= gap <= expected * 1.5 + 1, (gaps, "expected 1, 2, 4, 8 s")
            events, _ = await c.server.list(
                "events", namespace="default", field_selector="reason=FailedCreate"
            )
            # identical FailedCreate events are one Event whose count grows (client-go's EventCorrelator)
            (event,) = events
            assert event["count"] >= 4
            assert "denied the request: leader pod not yet scheduled" in event["message"]
            assert (event["type"], event["involvedObject"]["name"]) == ("Warning", "denied")
            assert await c.pods() == []

    run(scenario())


def test_an_owned_pod_update_requeues_the_job_after_about_one_second(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(components=JOB_ONLY, time_scale=0.1) as c:
            gate_open = False
            c.api.deny = lambda pod: (
                None if gate_open or _index(pod) == "0" else "leader pod not yet scheduled"
            )
            await c.server.create("jobs", indexed_job("gated", 4), namespace="default")
            await c.wait_for(lambda: sum(not a.allowed for a in c.api.attempts) >= 5, 30, "denied followers")
            # first sync: the leader (batch of 1) then a batch of 2 followers, both denied
            assert [(a.index, a.allowed) for a in c.api.attempts[:3]] in (
                [("0", True), ("1", False), ("2", False)],
                [("0", True), ("2", False), ("1", False)],
            )
            # every later failing sync tries exactly one pod
            assert all(a.index == "1" and not a.allowed for a in c.api.attempts[3:])
            denied_before = len(c.api.attempts)
            pending_backoff = c.controllers.job_controller.queue.backoff("default/gated")
            assert pending_backoff >= 8
            gate_open = True
            (leader,) = await c.pods()
            await c.server.patch(
                "pods",
                leader["metadata"]["name"],
                {"metadata": {"labels": {"touched": "1"}}},
                namespace="default",
            )
            await c.wait_for(lambda: len(c.api.attempts) > denied_before, 30, "a retry")
            gap = c.simulated(c.api.attempts[denied_before].at - c.api.attempts[denied_before - 1].at)
            assert gap < pending_backoff, (gap, pending_backoff)
            pods = await c.wait_for(lambda: _n_pods(c, 4), 30, "all four pods")
            assert sorted(index_of(p) for p in pods) == [0, 1, 2, 3]
            recovered = c.api.attempts[denied_before:]
            assert [a.allowed for a in recovered] == [True, True, True]

    run(scenario())


def test_pod_update_retry_lands_one_second_after_the_update(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(components=JOB_ONLY, time_scale=0.1) as c:
            c.api.deny = lambda pod: None if _index(pod) == "0" else "leader pod not yet scheduled"
            await c.server.create("jobs", indexed_job("timed", 3), namespace="default")
            await c.wait_for(lambda: len(c.api.attempts) >= 6, 30, "backoff to build up")
            seen = len(c.api.attempts)
            (leader,) = await c.pods()
            await c.server.patch(
                "pods", leader["metadata"]["name"], {"metadata": {"labels": {"x": "y"}}}, namespace="default"
            )
            patched_at = time.monotonic()
            await c.wait_for(lambda: len(c.api.attempts) > seen, 30, "the retry")
            delay = c.simulated(c.api.attempts[seen].at - patched_at)
            assert 0.9 <= delay <= 3.0, delay

    run(scenario())


def test_elastic_resize_creates_exactly_the_new_indexes_and_deletes_out_of_range(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(components=JOB_ONLY) as c:
            await c.server.create("jobs", indexed_job("elastic", 1), namespace="default")
            (leader,) = await c.wait_for(lambda: _n_pods(c, 1), 30, "the leader")
            await c.server.patch(
                "jobs", "elastic", {"spec": {"completions": 4, "parallelism": 4}}, namespace="default"
            )
            pods = await c.wait_for(lambda: _n_pods(c, 4), 30, "four pods")
            assert sorted(index_of(p) for p in pods) == [0, 1, 2, 3]
            assert leader["metadata"]["name"] in {p["metadata"]["name"] for p in pods}
            assert sorted(a.index or "" for a in c.api.attempts) == ["0", "1", "2", "3"]
            await c.wait_for(lambda: _status(c, "elastic", "active", 4), 30, "status.active == 4")

            await c.server.patch(
                "jobs", "elastic", {"spec": {"completions": 2, "parallelism": 2}}, namespace="default"
            )
            pods = await c.wait_for(lambda: _n_pods(c, 2, exact=True), 30, "two pods")
            assert sorted(index_of(p) for p in pods) == [0, 1]
            assert len(c.api.attempts) == 4

            await c.server.patch(
                "jobs", "elastic", {"spec": {"completions": 0, "parallelism": 0}}, namespace="default"
            )
            job = await c.wait_for(lambda: _finished(c, "elastic"), 30, "Complete")
            assert condition_true(job, "Complete")
            assert await c.pods() == []

    run(scenario())


def test_pods_that_succeed_complete_the_job(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(pod_run_seconds=5) as c:
            await c.server.create("jobs", indexed_job("done", 3), namespace="default")
            job = await c.wait_for(lambda: _finished(c, "done"), 60, "Complete")
            assert condition_true(job, "Complete")
            assert [x["type"] for x in job["status"]["conditions"]] == ["SuccessCriteriaMet", "Complete"]
            status = job["status"]
            assert status["succeeded"] == 3
            assert status["completedIndexes"] == "0-2"
            assert "active" not in status
            assert status["startTime"] <= status["completionTime"]
            assert c.stats.pods_running == 3

    run(scenario())


def test_failed_pods_are_replaced_and_counted(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=4, pools=2) as c:
            await c.server.create("jobs", indexed_job("survivor", 1), namespace="default")
            (pod,) = await c.wait_for(lambda: _running(c, 1), 30, "a running pod")
            node = pod["spec"]["nodeName"]
            result = await c.controllers.fail_nodes(f"kubernetes.io/hostname={node}")
            assert result == {"nodes": 1, "pods": 1}
            replacement = await c.wait_for(lambda: _running(c, 1), 30, "a replacement")
            assert replacement[0]["spec"]["nodeName"] != node
            assert index_of(replacement[0]) == 0
            await c.wait_for(lambda: _status(c, "survivor", "failed", 1), 30, "status.failed == 1")

    run(scenario())


def test_a_job_fails_once_past_its_backoff_limit(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=4, pools=2) as c:
            await c.server.create("jobs", indexed_job("fragile", 2, backoff_limit=0), namespace="default")
            pods = await c.wait_for(lambda: _running(c, 2), 30, "running pods")
            await c.controllers.fail_nodes(f"kubernetes.io/hostname={pods[0]['spec']['nodeName']}")
            job = await c.wait_for(lambda: _finished(c, "fragile"), 30, "Failed")
            failed = [x for x in job["status"]["conditions"] if x["type"] == "Failed"]
            assert failed[0]["reason"] == "BackoffLimitExceeded"
            remaining = await c.wait_for(lambda: _no_active(c), 30, "active pods gone")
            assert remaining

    run(scenario())


def test_non_indexed_job_runs_parallel_pods_to_completion(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(pod_run_seconds=3) as c:
            job = indexed_job("plain", 4, parallelism=2)
            job["spec"]["completionMode"] = "NonIndexed"
            await c.server.create("jobs", job, namespace="default")
            done = await c.wait_for(lambda: _finished(c, "plain"), 60, "Complete")
            assert condition_true(done, "Complete")
            assert done["status"]["succeeded"] == 4
            assert all(a.index is None for a in c.api.attempts)
            assert len(c.api.attempts) == 4

    run(scenario())


def test_a_spec_change_syncs_at_once_and_a_pod_change_after_the_batch_period(run: Run) -> None:
    """updateJob: a new generation is enqueued immediately; addPod/updatePod wait syncJobBatchPeriod (1 s)."""

    async def scenario() -> None:
        async with cluster(components=JOB_ONLY, time_scale=0.5) as c:
            await c.server.create("jobs", indexed_job("prompt", 1), namespace="default")
            await c.wait_for(lambda: len(c.api.attempts) >= 1, 30, "the first pod")
            patched_at = time.monotonic()
            await c.server.patch(
                "jobs", "prompt", {"spec": {"completions": 2, "parallelism": 2}}, namespace="default"
            )
            await c.wait_for(lambda: len(c.api.attempts) >= 2, 30, "the second pod")
            assert c.simulated(c.api.attempts[1].at - patched_at) < 0.5
            await c.wait_for(lambda: _status(c, "prompt", "active", 2), 30, "status.active == 2")
            syncs_before = c.stats.by_verb_resource["update jobs/status"]
            (first, _) = sorted(await c.pods(), key=index_of)
            touched_at = time.monotonic()
            await c.server.patch(
                "pods",
                first["metadata"]["name"],
                {"status": {"phase": "Failed"}},
                namespace="default",
                subresource="status",
            )
            await c.wait_for(
                lambda: c.stats.by_verb_resource["update jobs/status"] > syncs_before, 30, "the pod's sync"
            )
            assert c.simulated(time.monotonic() - touched_at) >= 0.9

    run(scenario())


def test_scaling_down_unfinalizes_then_deletes_and_counts_no_failure(run: Run) -> None:
    """deleteJobPods: the tracking finalizer comes off before the DELETE: a removed pod is never counted."""

    async def scenario() -> None:
        async with cluster(components=JOB_ONLY) as c:
            await c.server.create("jobs", indexed_job("shrinking", 3), namespace="default")
            await c.wait_for(lambda: _n_pods(c, 3), 30, "three pods")
            watcher = c.server.subscribe("pods", namespace="default")
            await c.server.patch(
                "jobs", "shrinking", {"spec": {"completions": 1, "parallelism": 1}}, namespace="default"
            )
            await c.wait_for(lambda: _n_pods(c, 1, exact=True), 30, "one pod left")
            await c.wait_for(lambda: _status(c, "shrinking", "active", 1), 30, "status.active == 1")
            events: dict[str, list[tuple[str, list[str]]]] = {}
            while not watcher.queue.empty():
                kind, pod = watcher.queue.get_nowait()
                events.setdefault(pod["metadata"]["name"], []).append(
                    (kind, list(pod["metadata"].get("finalizers") or []))
                )
            removed = {name: seen for name, seen in events.items() if seen[-1][0] == "DELETED"}
            assert len(removed) == 2
            for seen in removed.values():
                assert [kind for kind, _ in seen] == ["MODIFIED", "DELETED"]
                assert seen[0][1] == [], "the finalizer was removed before the delete"
            status = (await _job(c, "shrinking"))["status"]
            assert "failed" not in status
            assert status["uncountedTerminatedPods"] == {}

    run(scenario())


def test_deletions_take_precedence_over_creations_within_a_sync(run: Run) -> None:
    """manageJob: a sync that deletes pods (an out-of-range index) creates none; the next one creates."""

    async def scenario() -> None:
        server = ApiServer(seed=0)
        standalone = standalone_job_controller(server)
        try:
            job = await server.create("jobs", indexed_job("mixed", 2), namespace="default")
            standalone.jobs.assume(job)
            stray = build_pod(job, 5)
            stray["metadata"]["name"] = "mixed-5-stray"
            standalone.pods.assume(await server.create("pods", stray, namespace="default"))
            assert await standalone.controller.sync("default/mixed") is True
            assert (await server.list("pods", namespace="default"))[0] == []
            standalone.pods.forget("default/mixed-5-stray")
            assert await standalone.controller.sync("default/mixed") is True
            created, _ = await server.list("pods", namespace="default")
            assert sorted(index_of(p) for p in created) == [0, 1]
        finally:
            await server.aclose()

    run(scenario())


def test_a_suspended_job_runs_no_pods_until_resumed(run: Run) -> None:
    """manageJob with spec.suspend: every active pod is deleted (finalizer first), none is counted failed."""

    async def scenario() -> None:
        async with cluster(components=JOB_ONLY) as c:
            await c.server.create("jobs", indexed_job("paused", 2), namespace="default")
            await c.wait_for(lambda: _n_pods(c, 2), 30, "two pods")
            await c.server.patch("jobs", "paused", {"spec": {"suspend": True}}, namespace="default")
            await c.wait_for(lambda: _no_pods(c), 30, "pods deleted")
            # The status follows the pods' deletion one informer delivery later: wait for it to settle.
            await c.wait_for(lambda: _status(c, "paused", "terminating", 0), 30, "nothing terminating")
            await c.wait_for(lambda: _status(c, "paused", "active", None), 30, "no active pod counted")
            status = (await _job(c, "paused"))["status"]
            assert "failed" not in status
            await c.server.patch("jobs", "paused", {"spec": {"suspend": False}}, namespace="default")
            pods = await c.wait_for(lambda: _n_pods(c, 2), 30, "two pods again")
            assert sorted(index_of(p) for p in pods) == [0, 1]

    run(scenario())


def _index(pod: dict[str, Any]) -> str | None:
    return ((pod.get("metadata") or {}).get("annotations") or {}).get(
        "batch.kubernetes.io/job-completion-index"
    )


async def _n_pods(c: Cluster, n: int, exact: bool = False) -> list[dict[str, Any]] | None:
    pods = [p for p in await c.pods() if not p["metadata"].get("deletionTimestamp")]
    return pods if (len(pods) == n if exact else len(pods) >= n) else None


async def _running(c: Cluster, n: int) -> list[dict[str, Any]] | None:
    pods = [p for p in await c.pods() if (p.get("status") or {}).get("phase") == "Running"]
    return pods if len(pods) >= n else None


async def _no_pods(c: Cluster) -> bool:
    return not await c.pods()


async def _no_active(c: Cluster) -> bool:
    pods = await c.pods()
    return all((p.get("status") or {}).get("phase") in ("Succeeded", "Failed") for p in pods)


async def _status(c: Cluster, name: str, field: str, value: int | None) -> bool:
    return ((await _job(c, name)).get("status") or {}).get(field) == value


async def _finished(c: Cluster, name: str) -> dict[str, Any] | None:
    job = await _job(c, name)
    return job if condition_true(job, "Complete") or condition_true(job, "Failed") else None


pytestmark = pytest.mark.timeout(120)
