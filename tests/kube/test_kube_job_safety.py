"""elastic where the real API server and JobSet's real controller judge the shrunk Job (README "Risks"):

- `maxFailedIndexes` above 1 (with `backoffLimitPerIndex`) is invalid at size 1 (kube-apiserver answers
  422): the webhook lowers it to 1 and the resize restores it; a `successPolicy` with `succeededCount` 4 is
  invalid at size 1 and immutable, so that Job falls back to `gate`. JobSet creates both without one
  `JobCreationFailed`;
- `startupPolicy: InOrder` and `dependsOn` (status Ready): JobSet counts a child Job ready from its current
  parallelism, so a shrunk Job would start the next replicated Job once its leader alone is ready. The
  Jobs whose readiness is waited for keep their size (gate), and JobSet creates the driver only once every
  worker pod is ready. No resizer runs until the driver exists, so nothing could grow a shrunk worker
  before JobSet looks at it.
"""

from __future__ import annotations

from typing import Any

import pytest

from devstack.kube import KubeError
from devstack.manifests import exclusive_jobset
from devstack.stack import Stack
from placement.constants import RESIZE_LABEL, STRATEGY_ANNOTATION, TARGET_MAX_FAILED_INDEXES_ANNOTATION
from tests.e2e.jobset_e2e_support import (
    Watch,
    assert_each_job_whole_in_its_own_pool,
    ordered_jobset,
    running_pods,
    with_job_spec,
)
from tests.kube.kube_support import resizer_stopped
from tests.support.waiting import eventually

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-job-safety")]

Obj = dict[str, Any]


def test_jobs_the_api_server_would_reject_at_size_one_run_whole(kube_stack: Stack, namespace: str) -> None:
    per_index = with_job_spec(
        exclusive_jobset("per-index", jobs=1, pods_per_job=4, namespace=namespace),
        backoffLimitPerIndex=1,
        maxFailedIndexes=3,
    )
    success = with_job_spec(
        exclusive_jobset("success", jobs=1, pods_per_job=4, namespace=namespace),
        successPolicy={"rules": [{"succeededCount": 4}]},
    )
    kube_stack.client.create(per_index)
    kube_stack.client.create(success)
    eventually(lambda: running_pods(kube_stack, namespace) == 8, "8 pods running", 90, ignoring=(KubeError,))
    adapted = kube_stack.client.get("Job", "per-index-w-0", namespace=namespace)
    assert adapted["metadata"]["labels"][RESIZE_LABEL] == "done"
    assert adapted["metadata"]["annotations"][TARGET_MAX_FAILED_INDEXES_ANNOTATION] == "3"
    assert (adapted["spec"]["completions"], adapted["spec"]["maxFailedIndexes"]) == (4, 3)
    assert adapted["metadata"]["generation"] == 2  # shrunk at creation, resized once
    fallen_back = kube_stack.client.get("Job", "success-w-0", namespace=namespace)
    assert RESIZE_LABEL not in (fallen_back["metadata"].get("labels") or {})
    assert fallen_back["spec"]["template"]["metadata"]["annotations"][STRATEGY_ANNOTATION] == "gate"
    assert_each_job_whole_in_its_own_pool(kube_stack, namespace, 2)
    events = kube_stack.client.list("Event", namespace=namespace)
    assert not [e for e in events if e.get("reason") == "JobCreationFailed"]  # no 422 retried by JobSet


@pytest.mark.parametrize("order", ["InOrder", "dependsOn"])
def test_ordered_jobsets_are_not_shrunk_and_start_in_order(
    kube_stack: Stack, namespace: str, order: str
) -> None:
    with resizer_stopped(kube_stack), Watch(kube_stack, "Job", namespace) as job_events:
        kube_stack.client.create(ordered_jobset("ordered", namespace, order))
        eventually(
            lambda: any(
                kind == "ADDED" and job["metadata"]["name"] == "ordered-driver-0"
                for kind, job in job_events.events
            ),
            "the driver's Job created",
            90,
            ignoring=(KubeError,),
        )
    workers_seen: dict[str, Obj] = {}
    when_driver_created: list[Obj] = []
    for kind, job in list(job_events.events):
        name = job["metadata"]["name"]
        if name.startswith("ordered-workers"):
            workers_seen[name] = job
        elif name == "ordered-driver-0" and kind == "ADDED":
            when_driver_created = list(workers_seen.values())
    assert sorted(j["metadata"]["name"] for j in when_driver_created) == [
        "ordered-workers-0",
        "ordered-workers-1",
    ]
    for worker in when_driver_created:
        assert (worker["spec"]["completions"], worker["status"]["ready"]) == (4, 4)
    eventually(
        lambda: running_pods(kube_stack, namespace) == 10, "10 pods running", 90, ignoring=(KubeError,)
    )
    created = {job["metadata"]["name"]: job for job in kube_stack.client.list("Job", namespace=namespace)}
    kept_whole = {
        name
        for name, job in created.items()
        if RESIZE_LABEL not in (job["metadata"].get("labels") or {})
        and job["spec"]["template"]["metadata"]["annotations"].get(STRATEGY_ANNOTATION) == "gate"
    }
    # InOrder: every Job's readiness is waited for, so the webhook keeps them all whole; dependsOn: only the
    # workers', so the driver, on which nothing depends, is shrunk and resized as usual
    workers = {"ordered-workers-0", "ordered-workers-1"}
    if order == "InOrder":
        assert kept_whole == {*workers, "ordered-driver-0"}
    else:
        assert kept_whole == workers
        assert created["ordered-driver-0"]["metadata"]["labels"][RESIZE_LABEL] == "done"
    assert_each_job_whole_in_its_own_pool(kube_stack, namespace, 3)
