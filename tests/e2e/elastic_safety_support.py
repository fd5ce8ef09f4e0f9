"""elastic's safety scenarios as both e2e tiers (kubesim, kube) replay them (README "Risks"): Jobs the API
server would reject at size 1, an ordered JobSet whose Jobs' readiness JobSet waits for, and followers pinned
to a domain their re-created leader is not in. Each tier says only which errors of its client mean "not
yet" and, where a scenario's first part runs while no resizer does, how that is (a stack started without
one, or its resizer stopped for the block).
"""

from __future__ import annotations

from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

from devstack.exclusivity import node_domains
from devstack.manifests import exclusive_jobset
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
from tests.support.waiting import Ignored, eventually

Obj = dict[str, Any]
Events = list[tuple[str, Obj]]
WithoutResizer = Callable[[Stack], AbstractContextManager[object]]
"""(stack) -> a block in which no resizer runs (after it, one may)."""

WORKERS = {"ordered-workers-0", "ordered-workers-1"}
DRIVER = "ordered-driver-0"
FULL = {"key": "example.com/full", "value": "true", "effect": "NoSchedule"}


def jobs_the_api_server_would_reject_at_size_one_run_whole(
    stack: Stack, namespace: str, *, ignoring: Ignored
) -> None:
    """`maxFailedIndexes` 3 (with `backoffLimitPerIndex`) is invalid at size 1 (422): the webhook lowers it
    and the resize restores it. A `successPolicy` with `succeededCount` 4 is invalid at size 1 and immutable:
    that Job falls back to `gate`. JobSet creates both without one `JobCreationFailed`, and they run whole."""
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
    eventually(lambda: running_pods(stack, namespace) == 8, "8 pods running", 90, ignoring=ignoring)
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


def driver_created(events: Events) -> bool:
    return any(kind == "ADDED" and job["metadata"]["name"] == DRIVER for kind, job in events)


def workers_when_driver_created(events: Events) -> list[Obj]:
    """The worker Jobs, each as the Job watch last showed it, at the moment the driver's Job was created."""
    workers_seen: dict[str, Obj] = {}
    when_driver_created: list[Obj] = []
    for kind, job in events:
        name = job["metadata"]["name"]
        if name.startswith("ordered-workers"):
            workers_seen[name] = job
        elif name == DRIVER and kind == "ADDED":
            when_driver_created = list(workers_seen.values())
    return when_driver_created


def kept_whole(jobs: dict[str, Obj]) -> set[str]:
    """The names of `jobs` (by name) the webhook left at their size: not shrunk for a resize, and `gate`."""
    return {
        name
        for name, job in jobs.items()
        if RESIZE_LABEL not in (job["metadata"].get("labels") or {})
        and job["spec"]["template"]["metadata"]["annotations"].get(STRATEGY_ANNOTATION) == "gate"
    }


def an_ordered_jobset_starts_in_order(
    stack: Stack, namespace: str, order: str, *, without_resizer: WithoutResizer, ignoring: Ignored
) -> None:
    """The ordered JobSet (`ordered_jobset`: workers, then the driver by `order`) created while no resizer
    runs: the leaders get Ready before any resize could happen. A shrunk worker Job would count as ready with
    its leader alone, and JobSet would create the driver while the workers' followers do not even exist;
    instead JobSet creates it once both worker Jobs are whole and all their pods ready, and every Job runs
    whole in its own pool. InOrder: every Job's readiness is waited for, so the webhook keeps them all whole;
    dependsOn: only the workers', so the driver, on which nothing depends, is shrunk and resized as usual."""
    with without_resizer(stack), Watch(stack, "Job", namespace) as job_events:
        stack.client.create(ordered_jobset("ordered", namespace, order))
        eventually(
            lambda: driver_created(job_events.events), "the driver's Job created", 90, ignoring=ignoring
        )
    when_driver_created = workers_when_driver_created(list(job_events.events))
    assert sorted(j["metadata"]["name"] for j in when_driver_created) == sorted(WORKERS)
    for worker in when_driver_created:
        assert (worker["spec"]["completions"], worker["status"]["ready"]) == (4, 4)
    eventually(lambda: running_pods(stack, namespace) == 10, "10 pods running", 90, ignoring=ignoring)
    created = {job["metadata"]["name"]: job for job in stack.client.list("Job", namespace=namespace)}
    if order == "InOrder":
        assert kept_whole(created) == set(created) == {*WORKERS, DRIVER}
    else:
        assert kept_whole(created) == WORKERS
        assert created[DRIVER]["metadata"]["labels"][RESIZE_LABEL] == "done"
    assert_each_job_whole_in_its_own_pool(stack, namespace, 3)


def bound_leader(stack: Stack, namespace: str) -> Obj | None:
    """The namespace's bound pod of completion index 0 that is not being deleted, if any."""
    return next(
        (
            pod
            for pod in pods_of(stack, namespace)
            if pod["metadata"]["annotations"].get(JOB_COMPLETION_INDEX_ANNOTATION) == "0"
            and pod["spec"].get("nodeName")
            and not pod["metadata"].get("deletionTimestamp")
        ),
        None,
    )


def job_failed(stack: Stack, namespace: str, name: str) -> bool:
    job = stack.client.get("Job", name, namespace=namespace)
    return any(c["type"] == "Failed" and c["status"] == "True" for c in job["status"].get("conditions") or [])


def pinned_pods(stack: Stack, namespace: str, pods: int) -> list[Obj] | None:
    """Once the namespace has `pods` pods: those with a node-pool nodeSelector (None before)."""
    current = pods_of(stack, namespace)
    if len(current) != pods:
        return None
    return [p for p in current if (p["spec"].get("nodeSelector") or {}).get(GKE_NODEPOOL_LABEL)]


def marked_for_violation(events: Events) -> set[str]:
    """Pods a watch showed marked DisruptionTarget for an ExclusivePlacementViolation."""
    return {
        obj["metadata"]["name"]
        for kind, obj in events
        if kind == "MODIFIED"
        and any(
            c["type"] == "DisruptionTarget" and c.get("reason") == "ExclusivePlacementViolation"
            for c in (obj.get("status") or {}).get("conditions") or []
        )
    }


def followers_pinned_where_a_re_created_leader_is_not_are_repaired(
    stack: Stack, namespace: str, *, without_resizer: WithoutResizer, ignoring: Ignored
) -> None:
    """A Job of 3 whose leader binds while no resizer runs; its pool then takes no new pod, so the followers
    the resize creates stay Pending, pinned to it. The leader deleted, the re-created one binds in another
    pool: the resizer marks the 2 pinned followers DisruptionTarget (ExclusivePlacementViolation) before
    deleting them, and the Job runs whole in the new pool without failing. The caller reads the resizer's
    `follower_repairs_total` (2 more) afterwards."""
    pools = node_domains(stack.client.list("Node"), GKE_NODEPOOL_LABEL)
    with without_resizer(stack):
        stack.client.create(plain_job("moves", namespace, 3))
        first = eventually(
            lambda: bound_leader(stack, namespace), "the first leader bound", 90, ignoring=ignoring
        )
        old_pool = pools[first["spec"]["nodeName"]]
        old_nodes = [name for name, pool in pools.items() if pool == old_pool]
        set_taint(stack, old_nodes, FULL)
    try:
        pinned = eventually(
            lambda: pinned_pods(stack, namespace, 3),
            "the followers created, pinned to the old pool",
            90,
            ignoring=ignoring,
        )
        assert {p["spec"]["nodeSelector"][GKE_NODEPOOL_LABEL] for p in pinned} == {old_pool}
        with Watch(stack, "Pod", namespace) as pods:
            stack.client.delete("Pod", first["metadata"]["name"], namespace=namespace)
            eventually(
                lambda: running_pods(stack, namespace) == 3,
                "the Job running whole again",
                90,
                ignoring=ignoring,
            )
    finally:
        set_taint(stack, old_nodes, None)
    (new_pool,) = domains_by_job(stack, namespace)["moves"]  # whole, in one pool
    assert new_pool != old_pool
    # each repaired follower was marked before it was deleted
    assert marked_for_violation(pods.events) == {p["metadata"]["name"] for p in pinned}
    assert not job_failed(stack, namespace, "moves")
