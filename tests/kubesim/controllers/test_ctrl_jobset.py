"""JobSet controller: child Jobs with JobSet's labels/annotations, status, restarts, completion."""

from __future__ import annotations

import asyncio
import hashlib
from collections.abc import Awaitable
from typing import Any

import pytest

from kubesim.controllers.jobset_constants import NODE_SELECTOR_STRATEGY_ANNOTATION
from kubesim.controllers.jobset_jobs import (
    build_child_job,
    job_is_ready,
    job_key,
    replicated_jobs_to_start,
    with_startup_condition,
)
from kubesim.controllers.objects import condition_true
from placement.constants import (
    GKE_NODEPOOL_LABEL,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    JOBSET_JOB_INDEX_LABEL,
    JOBSET_JOB_KEY_LABEL,
    JOBSET_NAME_LABEL,
    JOBSET_REPLICATED_JOB_NAME_LABEL,
    JOBSET_REPLICATED_JOB_REPLICAS_LABEL,
    JOBSET_RESTART_ATTEMPT_LABEL,
)
from tests.kubesim.controllers.ctrl_harness import Cluster, Run, cluster, pod_spec

pytestmark = pytest.mark.timeout(120)


def _jobset(name: str = "train", replicas: int = 2, size: int = 2, max_restarts: int = 0) -> dict[str, Any]:
    job_template = {
        "metadata": {"labels": {"team": "ml"}, "annotations": {"note": "kept"}},
        "spec": {
            "completionMode": "Indexed",
            "completions": size,
            "parallelism": size,
            "backoffLimit": 0,
            "template": {"metadata": {"labels": {"app": "trainer"}}, "spec": pod_spec(gpus=1)},
        },
    }
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: GKE_NODEPOOL_LABEL},
        },
        "spec": {
            "failurePolicy": {"maxRestarts": max_restarts},
            "replicatedJobs": [
                {"name": "workers", "replicas": replicas, "template": job_template},
                {"name": "driver", "replicas": 1, "template": job_template},
            ],
        },
    }


def test_job_key_is_sha1_of_namespace_and_job_name() -> None:
    assert job_key("default", "train-workers-0") == hashlib.sha1(b"default/train-workers-0").hexdigest()


def test_child_job_carries_jobset_labels_annotations_and_owner() -> None:
    jobset = _jobset()
    jobset["metadata"]["uid"] = "js-uid"
    jobset["status"] = {"restarts": 2}
    replicated = jobset["spec"]["replicatedJobs"][0]
    job = build_child_job(jobset, replicated, 1)
    expected = {
        JOBSET_NAME_LABEL: "train",
        JOBSET_REPLICATED_JOB_NAME_LABEL: "workers",
        JOBSET_JOB_INDEX_LABEL: "1",
        JOBSET_RESTART_ATTEMPT_LABEL: "2",
        JOBSET_REPLICATED_JOB_REPLICAS_LABEL: "2",
        JOBSET_JOB_KEY_LABEL: job_key("default", "train-workers-1"),
    }
    assert job["metadata"]["name"] == "train-workers-1"
    assert job["metadata"]["labels"] == {"team": "ml", **expected}
    assert job["metadata"]["annotations"] == {
        "note": "kept",
        **expected,
        JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: GKE_NODEPOOL_LABEL,
    }
    template_meta = job["spec"]["template"]["metadata"]
    assert template_meta["labels"] == {"app": "trainer", **expected}
    assert template_meta["annotations"] == {
        **expected,
        JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: GKE_NODEPOOL_LABEL,
    }
    assert job["spec"]["template"]["spec"]["subdomain"] == "train"
    assert job["spec"]["suspend"] is False
    assert job["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "name": "train",
            "uid": "js-uid",
            "controller": True,
            "blockOwnerDeletion": True,
        }
    ]
    # the JobSet's own template is untouched
    assert "subdomain" not in replicated["template"]["spec"]["template"]["spec"]


def test_replicated_job_level_exclusive_annotation_is_copied_too() -> None:
    jobset = _jobset()
    jobset["metadata"]["uid"] = "u"
    del jobset["metadata"]["annotations"]
    replicated = jobset["spec"]["replicatedJobs"][0]
    replicated["template"]["metadata"]["annotations"][JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION] = "rack"
    job = build_child_job(jobset, replicated, 0)
    assert job["spec"]["template"]["metadata"]["annotations"][JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION] == "rack"


def test_node_selector_mode_is_copied_with_its_node_selector_and_toleration() -> None:
    """jobset_controller.go labelAndAnnotateObject / constructJob: the node-selector annotation travels
    with the exclusive one, and the pods select the nodes labelled `<namespace>_<job>`."""
    jobset = _jobset()
    jobset["metadata"]["uid"] = "u"
    jobset["metadata"]["annotations"][NODE_SELECTOR_STRATEGY_ANNOTATION] = "true"
    job = build_child_job(jobset, jobset["spec"]["replicatedJobs"][0], 1)
    for meta in (job["metadata"], job["spec"]["template"]["metadata"]):
        assert meta["annotations"][NODE_SELECTOR_STRATEGY_ANNOTATION] == "true"
    pod = job["spec"]["template"]["spec"]
    assert pod["nodeSelector"] == {"alpha.jobset.sigs.k8s.io/namespaced-job": "default_train-workers-1"}
    assert pod["tolerations"] == [
        {"key": "alpha.jobset.sigs.k8s.io/no-schedule", "operator": "Exists", "effect": "NoSchedule"}
    ]


def test_node_selector_annotation_without_exclusive_placement_is_not_node_selector_mode() -> None:
    jobset = _jobset()
    jobset["metadata"]["uid"] = "u"
    jobset["metadata"]["annotations"] = {NODE_SELECTOR_STRATEGY_ANNOTATION: "true"}
    job = build_child_job(jobset, jobset["spec"]["replicatedJobs"][0], 0)
    assert NODE_SELECTOR_STRATEGY_ANNOTATION not in job["metadata"]["annotations"]
    assert "nodeSelector" not in job["spec"]["template"]["spec"]


async def _jobs(c: Cluster) -> list[dict[str, Any]]:
    items, _ = await c.server.list("jobs", namespace="default")
    return items


def test_jobset_creates_its_child_jobs_and_counts_them(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=8, pools=4) as c:
            await c.server.create("jobsets", _jobset(), namespace="default")
            jobs = await c.wait_for(lambda: _at_least(_jobs(c), 3), 30, "three child Jobs")
            assert sorted(j["metadata"]["name"] for j in jobs) == [
                "train-driver-0",
                "train-workers-0",
                "train-workers-1",
            ]
            pods = await c.wait_for(lambda: _running_pods(c, 6), 30, "six running pods")
            for pod in pods:
                labels = pod["metadata"]["labels"]
                assert labels[JOBSET_JOB_KEY_LABEL] == job_key(
                    "default", labels["batch.kubernetes.io/job-name"]
                )
                assert (
                    pod["metadata"]["annotations"][JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION] == GKE_NODEPOOL_LABEL
                )
                assert pod["spec"]["subdomain"] == "train"
            # each child Job's status reaches the JobSet controller through its own watch: wait for both
            jobset = await c.wait_for(
                lambda: _ready(c, {"workers": 2, "driver": 1}), 30, "replicatedJobsStatus ready"
            )
            statuses = {s["name"]: s for s in jobset["status"]["replicatedJobsStatus"]}
            assert statuses["workers"]["active"] == 2
            assert statuses["driver"]["ready"] == 1

            await c.server.delete("jobsets", "train", namespace="default")
            await c.wait_for(lambda: _none(_jobs(c)), 30, "child Jobs garbage-collected")

    run(scenario())


def test_jobset_completes_when_all_child_jobs_complete(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=8, pools=4, pod_run_seconds=5) as c:
            await c.server.create("jobsets", _jobset(replicas=1), namespace="default")
            jobset = await c.wait_for(lambda: _condition(c, "Completed"), 60, "Completed")
            assert jobset["status"]["terminalState"] == "Completed"
            statuses = {s["name"]: s["succeeded"] for s in jobset["status"]["replicatedJobsStatus"]}
            assert statuses == {"workers": 1, "driver": 1}

    run(scenario())


def test_a_failed_child_job_restarts_the_jobset_then_fails_it_past_max_restarts(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=8, pools=4) as c:
            await c.server.create("jobsets", _jobset(replicas=1, size=1, max_restarts=1), namespace="default")
            await c.wait_for(lambda: _running_pods(c, 2), 30, "running pods")
            first = {j["metadata"]["name"]: j["metadata"]["uid"] for j in await _jobs(c)}
            await c.controllers.fail_nodes("")  # every node
            await c.controllers.recover_nodes("")
            jobs = await c.wait_for(lambda: _restarted(c, first), 60, "child Jobs recreated")
            assert {j["metadata"]["labels"][JOBSET_RESTART_ATTEMPT_LABEL] for j in jobs} == {"1"}
            assert sorted(j["metadata"]["name"] for j in jobs) == sorted(first)
            jobset = await c.server.get("jobsets", "train", namespace="default")
            assert jobset["status"]["restarts"] == 1

            await c.wait_for(lambda: _running_pods(c, 2), 30, "running pods after the restart")
            await c.controllers.fail_nodes("")
            jobset = await c.wait_for(lambda: _condition(c, "Failed"), 60, "Failed")
            failed = next(x for x in jobset["status"]["conditions"] if x["type"] == "Failed")
            assert failed["reason"] == "ReachedMaxRestarts"

    run(scenario())


async def _at_least(items_coro: Awaitable[list[dict[str, Any]]], n: int) -> list[dict[str, Any]] | None:
    items = await items_coro
    return items if len(items) >= n else None


async def _none(items_coro: Awaitable[list[dict[str, Any]]]) -> bool:
    return not await items_coro


async def _running_pods(c: Cluster, n: int) -> list[dict[str, Any]] | None:
    pods = [p for p in await c.pods() if p.get("status", {}).get("phase") == "Running"]
    return pods if len(pods) >= n else None


async def _ready(c: Cluster, wanted: dict[str, int]) -> dict[str, Any] | None:
    """The JobSet once each named replicatedJob reports at least its wanted number of ready Jobs."""
    jobset = await c.server.get("jobsets", "train", namespace="default")
    ready = {s["name"]: s["ready"] for s in (jobset.get("status") or {}).get("replicatedJobsStatus") or []}
    return jobset if all(ready.get(name, 0) >= n for name, n in wanted.items()) else None


async def _condition(c: Cluster, kind: str) -> dict[str, Any] | None:
    jobset = await c.server.get("jobsets", "train", namespace="default")
    return jobset if condition_true(jobset, kind) else None


async def _restarted(c: Cluster, first: dict[str, str]) -> list[dict[str, Any]] | None:
    jobs = await _jobs(c)
    fresh = [j for j in jobs if j["metadata"]["uid"] not in first.values()]
    return fresh if len(fresh) == len(first) and len(jobs) == len(first) else None


# --- startupPolicy InOrder and dependsOn (jobset_controller.go reconcileReplicatedJobs) --------------------


def _status(name: str, ready: int = 0, succeeded: int = 0, failed: int = 0) -> dict[str, Any]:
    return {
        "name": name,
        "ready": ready,
        "succeeded": succeeded,
        "failed": failed,
        "active": 0,
        "suspended": 0,
    }


def _spec(*replicated: dict[str, Any], in_order: bool = False, suspend: bool = False) -> dict[str, Any]:
    spec: dict[str, Any] = {"replicatedJobs": list(replicated), "suspend": suspend}
    if in_order:
        spec["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
    return {"spec": spec}


A, B = {"name": "a", "replicas": 2}, {"name": "b", "replicas": 1}
B_AFTER_A_READY = {"name": "b", "replicas": 1, "dependsOn": [{"name": "a", "status": "Ready"}]}
B_AFTER_A_COMPLETE = {"name": "b", "replicas": 1, "dependsOn": [{"name": "a", "status": "Complete"}]}


@pytest.mark.parametrize(
    ("jobset", "statuses", "started", "condition"),
    [
        (_spec(A, B), [_status("a"), _status("b")], ["a", "b"], None),
        (_spec(A, B, in_order=True), [_status("a"), _status("b")], ["a"], "StartupPolicyInProgress"),
        (_spec(A, B, in_order=True), [_status("a", ready=1), _status("b")], ["a"], "StartupPolicyInProgress"),
        (
            _spec(A, B, in_order=True),
            [_status("a", ready=1, failed=1), _status("b")],
            ["b"],
            "StartupPolicyInProgress",
        ),
        (
            _spec(A, B, in_order=True),
            [_status("a", ready=2), _status("b", succeeded=1)],
            [],
            "StartupPolicyCompleted",
        ),
        (_spec(A, B, in_order=True, suspend=True), [_status("a"), _status("b")], ["a", "b"], None),
        (_spec(A, B_AFTER_A_READY), [_status("a", ready=1), _status("b")], ["a"], None),
        (_spec(A, B_AFTER_A_READY), [_status("a", ready=2), _status("b")], ["a", "b"], None),
        (_spec(A, B_AFTER_A_COMPLETE), [_status("a", ready=2), _status("b")], ["a"], None),
        (_spec(A, B_AFTER_A_COMPLETE), [_status("a", succeeded=2), _status("b")], ["a", "b"], None),
    ],
    ids=[
        "any order",
        "InOrder: the first",
        "InOrder: the first not all ready",
        "InOrder: failed counts as started",
        "InOrder: all started",
        "InOrder while suspended",
        "dependsOn Ready: not yet",
        "dependsOn Ready: reached",
        "dependsOn Complete: ready is not enough",
        "dependsOn Complete: reached",
    ],
)
def test_which_replicated_jobs_are_started(
    jobset: dict[str, Any], statuses: list[dict[str, Any]], started: list[str], condition: str | None
) -> None:
    to_start, startup = replicated_jobs_to_start(jobset, statuses)
    assert [replicated["name"] for replicated in to_start] == started
    assert startup == condition


@pytest.mark.parametrize(
    ("spec", "status", "ready"),
    [
        ({"parallelism": 8, "completions": 8}, {"ready": 1}, False),
        ({"parallelism": 1, "completions": 1}, {"ready": 1}, True),  # a shrunk Job: its leader alone
        ({"parallelism": 8, "completions": 2}, {"ready": 2}, True),  # min(parallelism, completions)
        ({"parallelism": 4, "completions": 4}, {"ready": 3, "succeeded": 1}, True),
        ({}, {"ready": 1}, True),  # parallelism defaults to 1
    ],
)
def test_a_child_job_is_ready_from_its_current_spec(
    spec: dict[str, Any], status: dict[str, Any], ready: bool
) -> None:
    assert job_is_ready({"spec": spec, "status": status}) is ready


def test_startup_conditions_are_mutually_exclusive() -> None:
    now = "2026-05-01T10:00:00Z"
    in_progress = with_startup_condition([], "StartupPolicyInProgress", now)
    assert [(c["type"], c["status"]) for c in in_progress] == [("StartupPolicyInProgress", "True")]
    assert with_startup_condition(in_progress, "StartupPolicyInProgress", "later") == in_progress
    completed = with_startup_condition(in_progress, "StartupPolicyCompleted", now)
    assert [(c["type"], c["status"]) for c in completed] == [
        ("StartupPolicyInProgress", "False"),
        ("StartupPolicyCompleted", "True"),
    ]
    assert completed[1]["reason"] == "InOrderStartupPolicyCompleted"


def test_in_order_jobsets_start_each_replicated_job_once_the_previous_is_ready(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=8, pools=4) as c:
            seen: dict[str, dict[str, Any]] = {}
            workers_when_driver_came: list[dict[str, Any]] = []

            async def follow_jobs() -> None:
                """The Jobs' writes in resourceVersion order: what the workers were when the driver came."""
                async for event in c.server.watch("jobs", namespace="default"):
                    job = event["object"]
                    if event["type"] == "ADDED" and job["metadata"]["name"] == "train-driver-0":
                        workers_when_driver_came.extend(seen.values())
                    elif job["metadata"]["name"].startswith("train-workers"):
                        seen[job["metadata"]["name"]] = job

            watching = asyncio.create_task(follow_jobs())
            jobset = _jobset(replicas=2, size=2)
            jobset["spec"]["startupPolicy"] = {"startupPolicyOrder": "InOrder"}
            await c.server.create("jobsets", jobset, namespace="default")
            jobs = await c.wait_for(lambda: _at_least(_jobs(c), 2), 30, "the workers' Jobs")
            assert sorted(j["metadata"]["name"] for j in jobs) == ["train-workers-0", "train-workers-1"]
            assert condition_true(
                await c.server.get("jobsets", "train", namespace="default"), "StartupPolicyInProgress"
            )
            await c.wait_for(lambda: workers_when_driver_came, 30, "the driver's Job")
            watching.cancel()
            assert sorted(w["metadata"]["name"] for w in workers_when_driver_came) == [
                "train-workers-0",
                "train-workers-1",
            ]
            assert all((w.get("status") or {}).get("ready") == 2 for w in workers_when_driver_came)
            await c.wait_for(lambda: _condition(c, "StartupPolicyCompleted"), 30, "StartupPolicyCompleted")

    run(scenario())
