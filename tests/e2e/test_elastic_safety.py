"""elastic in the situations kubesim now models as a real cluster does (README "Risks"):

- a JobSet with `startupPolicy: InOrder`: JobSet counts a child Job ready from its current parallelism, so
  a shrunk Job would start the next replicated Job once its leader alone is ready; such Jobs keep their
  size (gate) and the next replicated Job starts only once the previous one is ready for real;
- Jobs whose `maxFailedIndexes` or `successPolicy` the API server rejects at size 1 (422, which JobSet
  retried forever): maxFailedIndexes is lowered and restored by the resize, successPolicy falls back;
- a leader re-created in another domain: the resizer deletes the followers still pinned to the old one
  (JobSet's pod reconciler does the same), and the Job runs whole in the new domain.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import httpx
import pytest

from devstack.commands import KubesimFlags
from devstack.exclusivity import node_domains
from devstack.manifests import exclusive_jobset
from devstack.scenario import ensure_namespace
from devstack.stack import Stack
from placement.constants import (
    GKE_NODEPOOL_LABEL,
    JOB_COMPLETION_INDEX_ANNOTATION,
    RESIZE_LABEL,
    STRATEGY_ANNOTATION,
    TARGET_MAX_FAILED_INDEXES_ANNOTATION,
)
from tests.e2e.jobset_e2e_support import (
    Watch,
    assert_each_job_whole_in_its_own_pool,
    domains_by_job,
    ordered_jobset,
    plain_job,
    pods_of,
    running_pods,
    set_taint,
    with_job_spec,
)
from tests.support.metrics import resizer_metric
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]


def test_in_order_jobsets_are_not_shrunk_and_start_in_order(stack_factory: Callable[..., Stack]) -> None:
    # No resizer: the leaders get Ready before any resize could happen (a resizer restarting, or slower than
    # a pod's start-up). A shrunk worker Job would then count as ready with its leader alone, and JobSet
    # would create the driver while the workers' followers do not even exist.
    stack = stack_factory(resizer_replicas=0)
    namespace = "in-order"
    ensure_namespace(stack.client, namespace)
    with Watch(stack, "Job", namespace) as jobs:
        stack.client.create(ordered_jobset("ordered", namespace, "InOrder"))
        eventually(
            lambda: any(
                kind == "ADDED" and job["metadata"]["name"] == "ordered-driver-0" for kind, job in jobs.events
            ),
            "the driver's Job created",
            90,
            ignoring=(httpx.HTTPError,),
        )
    workers_seen: dict[str, Obj] = {}
    when_driver_created: list[Obj] = []
    for kind, job in jobs.events:
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
        lambda: running_pods(stack, namespace) == 10, "10 pods running", 90, ignoring=(httpx.HTTPError,)
    )
    for job in stack.client.list("Job", namespace=namespace):
        assert RESIZE_LABEL not in (job["metadata"].get("labels") or {})
        assert job["spec"]["template"]["metadata"]["annotations"][STRATEGY_ANNOTATION] == "gate"
    assert_each_job_whole_in_its_own_pool(stack, namespace, 3)


def test_jobs_the_api_server_would_reject_at_size_one_run_whole(stack: Stack) -> None:
    namespace = "validation"
    ensure_namespace(stack.client, namespace)
    per_index = with_job_spec(
        exclusive_jobset("per-index", jobs=1, pods_per_job=4, namespace=namespace),
        backoffLimitPerIndex=1,
        maxFailedIndexes=3,
    )
    success = with_job_spec(
        exclusive_jobset("success", jobs=1, pods_per_job=4, namespace=namespace),
        successPolicy={"rules": [{"succeededCount": 4}]},
    )
    stack.client.create(per_index)
    stack.client.create(success)
    eventually(lambda: running_pods(stack, namespace) == 8, "8 pods running", 90, ignoring=(httpx.HTTPError,))
    adapted = stack.client.get("Job", "per-index-w-0", namespace=namespace)
    assert adapted["metadata"]["labels"][RESIZE_LABEL] == "done"
    assert adapted["metadata"]["annotations"][TARGET_MAX_FAILED_INDEXES_ANNOTATION] == "3"
    assert (adapted["spec"]["completions"], adapted["spec"]["maxFailedIndexes"]) == (4, 3)
    assert adapted["metadata"]["generation"] == 2  # shrunk at creation, resized once
    fallen_back = stack.client.get("Job", "success-w-0", namespace=namespace)
    assert RESIZE_LABEL not in (fallen_back["metadata"].get("labels") or {})
    assert fallen_back["spec"]["template"]["metadata"]["annotations"][STRATEGY_ANNOTATION] == "gate"
    assert_each_job_whole_in_its_own_pool(stack, namespace, 2)
    events = stack.client.list("Event", namespace=namespace)
    assert not [e for e in events if e.get("reason") == "JobCreationFailed"]  # no 422 retried by JobSet


def test_followers_pinned_where_a_re_created_leader_is_not_are_repaired(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory(cluster=KubesimFlags(nodes=4, pools=2, time_scale=0.05), resizer_replicas=0)
    namespace = "repair"
    ensure_namespace(stack.client, namespace)
    pools = node_domains(stack.client.list("Node"), GKE_NODEPOOL_LABEL)
    stack.client.create(plain_job("moves", namespace, 3))

    def leader() -> Obj | None:
        return next(
            (
                p
                for p in pods_of(stack, namespace)
                if p["metadata"]["annotations"].get(JOB_COMPLETION_INDEX_ANNOTATION) == "0"
                and p["spec"].get("nodeName")
                and not p["metadata"].get("deletionTimestamp")
            ),
            None,
        )

    first = eventually(leader, "the first leader bound", 90, ignoring=(httpx.HTTPError,))
    old_pool = pools[first["spec"]["nodeName"]]
    # The old pool takes no new pod: the followers the resize creates stay Pending, pinned to it.
    old_nodes = [name for name, pool in pools.items() if pool == old_pool]
    set_taint(stack, old_nodes, {"key": "example.com/full", "value": "true", "effect": "NoSchedule"})
    stack.add_resizer()
    pinned = eventually(
        lambda: (
            [
                p
                for p in pods_of(stack, namespace)
                if (p["spec"].get("nodeSelector") or {}).get(GKE_NODEPOOL_LABEL)
            ]
            if len(pods_of(stack, namespace)) == 3
            else None
        ),
        "the followers created, pinned to the old pool",
        90,
        ignoring=(httpx.HTTPError,),
    )
    assert {p["spec"]["nodeSelector"][GKE_NODEPOOL_LABEL] for p in pinned} == {old_pool}

    with Watch(stack, "Pod", namespace) as pods:
        stack.client.delete("Pod", first["metadata"]["name"], namespace=namespace)
        eventually(
            lambda: running_pods(stack, namespace) == 3,
            "the Job running whole again",
            90,
            ignoring=(httpx.HTTPError,),
        )
    (new_pool,) = domains_by_job(stack, namespace)["moves"]  # whole, in one pool
    assert new_pool != old_pool
    assert resizer_metric(stack, "follower_repairs_total") == 2
    # each repaired follower was marked before it was deleted
    repaired = {p["metadata"]["name"] for p in pinned}
    marked = {
        obj["metadata"]["name"]
        for kind, obj in pods.events
        if kind == "MODIFIED"
        and any(
            c["type"] == "DisruptionTarget" and c.get("reason") == "ExclusivePlacementViolation"
            for c in (obj.get("status") or {}).get("conditions") or []
        )
    }
    assert marked == repaired
    job = stack.client.get("Job", "moves", namespace=namespace)
    assert not any(
        c["type"] == "Failed" and c["status"] == "True" for c in job["status"].get("conditions") or []
    )
