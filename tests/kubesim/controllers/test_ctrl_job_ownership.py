"""Which pods a Job owns: claim by selector with adoption and release (k/k pkg/controller/
controller_ref_manager.go PodControllerRefManager.ClaimPods, RecheckDeletionTimestamp; job_controller.go
getPodsForJob), against the real in-process API server."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.apiserver.server import ApiServer
from kubesim.stats import Stats
from tests.kubesim.controllers.ctrl_harness import Cluster, Run, cluster, pod_spec, standalone_job_controller

JOB_ONLY = ("job-controller",)
FINALIZER = "batch.kubernetes.io/job-tracking"
Obj = dict[str, Any]


def selected_job(name: str, app: str, size: int = 2, finalizers: list[str] | None = None) -> Obj:
    """A NonIndexed Job with a manual selector `app=<app>` (so pods it did not create can match it)."""
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "finalizers": finalizers or []},
        "spec": {
            "completions": size,
            "parallelism": size,
            "manualSelector": True,
            "selector": {"matchLabels": {"app": app}},
            "template": {"metadata": {"labels": {"app": app}}, "spec": pod_spec(gpus=0)},
        },
    }


def bare_pod(name: str, app: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": app}},
        "spec": pod_spec(gpus=0),
    }


def controller_uid(pod: Obj) -> str | None:
    refs = [r for r in pod["metadata"].get("ownerReferences") or [] if r.get("controller")]
    return str(refs[0]["uid"]) if refs else None


def test_an_orphan_pod_matching_the_selector_is_adopted_and_counted(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(components=JOB_ONLY) as c:
            await c.server.create("pods", bare_pod("stray", "adopt"), namespace="default")
            job = await c.server.create("jobs", selected_job("adopter", "adopt"), namespace="default")
            pods = await c.wait_for(lambda: _owned(c, job, 2), 30, "two owned pods")
            stray = next(p for p in pods if p["metadata"]["name"] == "stray")
            assert stray["metadata"]["finalizers"] == [FINALIZER]
            ref = stray["metadata"]["ownerReferences"][0]
            assert (ref["kind"], ref["name"], ref["controller"], ref["blockOwnerDeletion"]) == (
                "Job",
                "adopter",
                True,
                True,
            )
            await c.wait_for(lambda: _status(c, "adopter", "active", 2), 30, "status.active == 2")
            assert len(await c.pods()) == 2, "the adopted pod counts: only one pod is created"

    run(scenario())


def test_a_pod_that_stops_matching_is_released_not_deleted(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(components=JOB_ONLY) as c:
            job = await c.server.create("jobs", selected_job("releaser", "rel"), namespace="default")
            first, _ = await c.wait_for(lambda: _owned(c, job, 2), 30, "two owned pods")
            name = first["metadata"]["name"]
            await c.server.patch(
                "pods", name, {"metadata": {"labels": {"app": "elsewhere"}}}, namespace="default"
            )
            released = await c.wait_for(lambda: _released(c, name), 30, "the pod released")
            assert FINALIZER not in (released["metadata"].get("finalizers") or [])
            assert not released["metadata"].get("deletionTimestamp")
            await c.wait_for(lambda: _owned(c, job, 2), 30, "a replacement")
            assert len(await c.pods()) == 3

    run(scenario())


def test_a_job_being_deleted_adopts_nothing_even_when_its_cache_is_stale(run: Run) -> None:
    """RecheckDeletionTimestamp: the controller's cached Job is not being deleted, a fresh GET says it is."""

    async def scenario() -> None:
        stats = Stats()
        server = ApiServer(stats, seed=0)
        standalone = standalone_job_controller(server)
        controller, jobs, pods = standalone.controller, standalone.jobs, standalone.pods
        try:
            job = await server.create(
                "jobs", selected_job("doomed", "doom", finalizers=["example.com/hold"]), namespace="default"
            )
            stray = await server.create("pods", bare_pod("stray", "doom"), namespace="default")
            jobs.assume(job)
            pods.assume(stray)
            await server.delete("jobs", "doomed", namespace="default")
            gets_before = stats.by_verb_resource["get jobs"]
            assert await controller.sync("default/doomed") is False
            assert stats.by_verb_resource["get jobs"] == gets_before + 1
            untouched = await server.get("pods", "stray", namespace="default")
            assert not untouched["metadata"].get("ownerReferences")
            assert not untouched["metadata"].get("finalizers")
            assert stats.by_verb_resource["create pods"] == 1, "no pod created by a Job whose claim failed"
        finally:
            await server.aclose()

    run(scenario())


def test_a_job_with_a_stale_cache_that_is_not_being_deleted_adopts(run: Run) -> None:
    """The same setup without the deletion: the recheck passes and the orphan is adopted (control case)."""

    async def scenario() -> None:
        server = ApiServer(Stats(), seed=0)
        standalone = standalone_job_controller(server)
        controller, jobs, pods = standalone.controller, standalone.jobs, standalone.pods
        try:
            job = await server.create("jobs", selected_job("keeper", "keep", size=1), namespace="default")
            stray = await server.create("pods", bare_pod("stray", "keep"), namespace="default")
            jobs.assume(job)
            pods.assume(stray)
            assert await controller.sync("default/keeper") is True
            adopted = await server.get("pods", "stray", namespace="default")
            assert controller_uid(adopted) == job["metadata"]["uid"]
            assert adopted["metadata"]["finalizers"] == [FINALIZER]
        finally:
            await server.aclose()

    run(scenario())


async def _owned(c: Cluster, job: Obj, n: int) -> list[Obj] | None:
    uid = job["metadata"]["uid"]
    pods = sorted(
        (p for p in await c.pods() if controller_uid(p) == uid), key=lambda p: p["metadata"]["name"]
    )
    return pods if len(pods) == n else None


async def _released(c: Cluster, name: str) -> Obj | None:
    pod = await c.server.get("pods", name, namespace="default")
    return pod if not pod["metadata"].get("ownerReferences") else None


async def _status(c: Cluster, name: str, field: str, value: int) -> bool:
    job = await c.server.get("jobs", name, namespace="default")
    return (job.get("status") or {}).get(field) == value


pytestmark = pytest.mark.timeout(120)
