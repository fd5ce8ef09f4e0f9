"""elastic where the real API server and JobSet's real controller judge the shrunk Job, and the resizer's
repairs (README "Risks"):

- `maxFailedIndexes` above 1 (with `backoffLimitPerIndex`) is invalid at size 1 (kube-apiserver answers
  422): the webhook lowers it to 1 and the resize restores it; a `successPolicy` with `succeededCount` 4 is
  invalid at size 1 and immutable, so that Job falls back to `gate`. JobSet creates both without one
  `JobCreationFailed`;
- `startupPolicy: InOrder` and `dependsOn` (status Ready): JobSet counts a child Job ready from its current
  parallelism, so a shrunk Job would start the next replicated Job once its leader alone is ready. The
  Jobs whose readiness is waited for keep their size (gate), and JobSet creates the driver only once every
  worker pod is ready. No resizer runs until the driver exists, so nothing could grow a shrunk worker
  before JobSet looks at it;
- a leader re-created in another domain: the followers still pinned (unbound) to the old one are marked
  DisruptionTarget (ExclusivePlacementViolation) and deleted; the real Job controller re-creates them,
  the webhook pins them to the new domain, and the Job runs whole there without failing. JobSet v0.12.0
  never deletes such a mispinned follower (fixed on its main branch by kubernetes-sigs/jobset#1269);
- a leader that failed and was replaced: the failed pod of completion index 0 stays, finished, beside its
  replacement; the followers are pinned to the replacement's domain. JobSet v0.12.0 counts the finished
  pod as a second leader and rejects the followers for ever (fixed on its main branch by #1276);
- a running leader deleted: the real Job controller re-creates index 0; its pod affinity to its own Job's
  followers brings it back into the same domain, so nothing is repaired;
- a Job whose `spec.managedBy` names another controller keeps its size (`gate`): that controller runs it;
- a Job is resized at its leader's bind: with a leader that starts 10 s later, its followers exist before it
  is Ready.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import pytest

from devstack.controlplane.kwok import start_time_annotations
from devstack.exclusivity import node_domains
from devstack.manifests import exclusive_jobset
from devstack.stack import Stack
from kubekit.client import KubeError
from placement.constants import (
    ELASTIC_FALLBACK_ANNOTATION,
    GKE_NODEPOOL_LABEL,
    JOB_COMPLETION_INDEX_ANNOTATION,
    RESIZE_LABEL,
    STRATEGY_ANNOTATION,
    TARGET_MAX_FAILED_INDEXES_ANNOTATION,
)
from tests.kube.kube_support import resizer_stopped
from tests.kube.workloads import (
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

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-elastic-safety")]

Obj = dict[str, Any]
Events = list[tuple[str, Obj]]

WORKERS = {"ordered-workers-0", "ordered-workers-1"}
DRIVER = "ordered-driver-0"
FULL = {"key": "example.com/full", "value": "true", "effect": "NoSchedule"}
START_SECONDS = 10


def jobs_the_api_server_would_reject_at_size_one_run_whole(stack: Stack, namespace: str) -> None:
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
    eventually(lambda: running_pods(stack, namespace) == 8, "8 pods running", 90, ignoring=(KubeError,))
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


def an_ordered_jobset_starts_in_order(stack: Stack, namespace: str, order: str) -> None:
    """The ordered JobSet (`ordered_jobset`: workers, then the driver by `order`) created while no resizer
    runs: the leaders get Ready before any resize could happen. A shrunk worker Job would count as ready with
    its leader alone, and JobSet would create the driver while the workers' followers do not even exist;
    instead JobSet creates it once both worker Jobs are whole and all their pods ready, and every Job runs
    whole in its own pool. InOrder: every Job's readiness is waited for, so the webhook keeps them all whole;
    dependsOn: only the workers', so the driver, on which nothing depends, is shrunk and resized as usual."""
    with resizer_stopped(stack), Watch(stack, "Job", namespace) as job_events:
        stack.client.create(ordered_jobset("ordered", namespace, order))
        eventually(
            lambda: driver_created(job_events.events), "the driver's Job created", 90, ignoring=(KubeError,)
        )
    when_driver_created = workers_when_driver_created(list(job_events.events))
    assert sorted(j["metadata"]["name"] for j in when_driver_created) == sorted(WORKERS)
    for worker in when_driver_created:
        assert (worker["spec"]["completions"], worker["status"]["ready"]) == (4, 4)
    eventually(lambda: running_pods(stack, namespace) == 10, "10 pods running", 90, ignoring=(KubeError,))
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


def running_leader(stack: Stack, namespace: str) -> Obj | None:
    """The bound leader once kwok has marked it Running. A status set to Failed before that can be
    overwritten: kwok's `pod-ready` stage, which matches Pending pods, may still patch the pod Running."""
    leader = bound_leader(stack, namespace)
    return leader if leader is not None and leader["status"].get("phase") == "Running" else None


def job_failed(stack: Stack, namespace: str, name: str) -> bool:
    job = stack.client.get("Job", name, namespace=namespace)
    return any(c["type"] == "Failed" and c["status"] == "True" for c in job["status"].get("conditions") or [])


def pinned_followers(stack: Stack, namespace: str, pods: int) -> list[Obj] | None:
    """Once the namespace has `pods` pods and every follower has a node-pool nodeSelector: the followers
    (None before). A follower created before the follower policy's params reached kube-apiserver's
    informer is created unpinned behind the leader-scheduled gate, and the resizer pins it a moment later."""
    current = pods_of(stack, namespace)
    pinned = [p for p in current if (p["spec"].get("nodeSelector") or {}).get(GKE_NODEPOOL_LABEL)]
    return pinned if len(current) == pods and len(pinned) == pods - 1 else None


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


def followers_pinned_where_a_re_created_leader_is_not_are_repaired(stack: Stack, namespace: str) -> None:
    """A Job of 3 whose leader binds while no resizer runs; its pool then takes no new pod, so the followers
    the resize creates stay Pending, pinned to it. The leader deleted, the re-created one binds in another
    pool: the resizer marks the 2 pinned followers DisruptionTarget (ExclusivePlacementViolation) before
    deleting them, and the Job runs whole in the new pool without failing. The caller reads the resizer's
    `follower_repairs_total` (2 more) afterwards."""
    pools = node_domains(stack.client.list("Node"), GKE_NODEPOOL_LABEL)
    with resizer_stopped(stack):
        stack.client.create(plain_job("moves", namespace, 3))
        first = eventually(
            lambda: bound_leader(stack, namespace), "the first leader bound", 90, ignoring=(KubeError,)
        )
        old_pool = pools[first["spec"]["nodeName"]]
        old_nodes = [name for name, pool in pools.items() if pool == old_pool]
        set_taint(stack, old_nodes, FULL)
    try:
        pinned = eventually(
            lambda: pinned_followers(stack, namespace, 3),
            "the followers created, pinned to the old pool",
            90,
            ignoring=(KubeError,),
        )
        assert {p["spec"]["nodeSelector"][GKE_NODEPOOL_LABEL] for p in pinned} == {old_pool}
        with Watch(stack, "Pod", namespace) as pods:
            stack.client.delete("Pod", first["metadata"]["name"], namespace=namespace)
            eventually(
                lambda: running_pods(stack, namespace) == 3,
                "the Job running whole again",
                90,
                ignoring=(KubeError,),
            )
    finally:
        set_taint(stack, old_nodes, None)
    (new_pool,) = domains_by_job(stack, namespace)["moves"]  # whole, in one pool
    assert new_pool != old_pool
    # each repaired follower was marked before it was deleted
    assert marked_for_violation(pods.events) == {p["metadata"]["name"] for p in pinned}
    assert not job_failed(stack, namespace, "moves")


def test_jobs_the_api_server_would_reject_at_size_one_run_whole(kube_stack: Stack, namespace: str) -> None:
    jobs_the_api_server_would_reject_at_size_one_run_whole(kube_stack, namespace)


def test_a_job_another_controller_manages_keeps_its_size(kube_stack: Stack, namespace: str) -> None:
    """`spec.managedBy` (GA in Kubernetes 1.35): kube-controller-manager's Job controller leaves such a Job to
    the controller it names, which may copy it elsewhere (Kueue's MultiKueue does) at the admitted size."""
    job = plain_job("elsewhere", namespace, 4)
    job["spec"]["managedBy"] = "example.com/elsewhere"
    kube_stack.client.create(job)
    stored = kube_stack.client.get("Job", "elsewhere", namespace=namespace)
    assert stored["spec"]["managedBy"] == "example.com/elsewhere"
    assert (stored["spec"]["completions"], stored["spec"]["parallelism"]) == (4, 4)
    assert (
        "spec.managedBy is 'example.com/elsewhere'"
        in stored["metadata"]["annotations"][ELASTIC_FALLBACK_ANNOTATION]
    )
    assert RESIZE_LABEL not in (stored["metadata"].get("labels") or {})
    assert stored["spec"]["template"]["metadata"]["annotations"][STRATEGY_ANNOTATION] == "gate"


def condition_time(pod: Obj, kind: str) -> datetime:
    (condition,) = [c for c in pod["status"]["conditions"] if c["type"] == kind]
    return datetime.fromisoformat(condition["lastTransitionTime"])


def test_a_job_is_resized_at_its_leaders_bind_not_once_the_leader_is_ready(
    kube_stack: Stack, namespace: str
) -> None:
    """kwok starts a pod asking a start time (`start_time_annotations`) that long after its bind, as a slow
    container start would (bench scenario `32x32-slow-start`); the followers are created meanwhile."""
    job = plain_job("slow-start", namespace, 3)
    job["spec"]["template"]["metadata"] = {"annotations": start_time_annotations(START_SECONDS)}
    kube_stack.client.create(job)
    eventually(lambda: running_pods(kube_stack, namespace) == 3, "3 pods running", 90, ignoring=(KubeError,))
    pods = pods_of(kube_stack, namespace)
    (leader,) = [p for p in pods if p["metadata"]["annotations"][JOB_COMPLETION_INDEX_ANNOTATION] == "0"]
    ready = condition_time(leader, "Ready")
    assert (ready - condition_time(leader, "PodScheduled")).total_seconds() >= START_SECONDS - 1
    followers = [p for p in pods if p is not leader]
    assert all(datetime.fromisoformat(p["metadata"]["creationTimestamp"]) <= ready for p in followers)


@pytest.mark.parametrize("order", ["InOrder", "dependsOn"])
def test_ordered_jobsets_are_not_shrunk_and_start_in_order(
    kube_stack: Stack, namespace: str, order: str
) -> None:
    an_ordered_jobset_starts_in_order(kube_stack, namespace, order)


def test_followers_pinned_where_a_re_created_leader_is_not_are_repaired(
    kube_stack: Stack, namespace: str
) -> None:
    repairs_before = resizer_metric(kube_stack, "follower_repairs_total")
    followers_pinned_where_a_re_created_leader_is_not_are_repaired(kube_stack, namespace)
    assert resizer_metric(kube_stack, "follower_repairs_total") - repairs_before == 2


def test_a_deleted_running_leader_comes_back_into_its_jobs_domain(kube_stack: Stack, namespace: str) -> None:
    repairs_before = resizer_metric(kube_stack, "follower_repairs_total")
    kube_stack.client.create(plain_job("stays", namespace, 4))
    eventually(lambda: running_pods(kube_stack, namespace) == 4, "4 pods running", 90, ignoring=(KubeError,))
    (pool,) = domains_by_job(kube_stack, namespace)["stays"]
    first = bound_leader(kube_stack, namespace)
    assert first is not None
    kube_stack.client.delete("Pod", first["metadata"]["name"], namespace=namespace)

    def replaced() -> Obj | None:
        current = bound_leader(kube_stack, namespace)
        if current is None or current["metadata"]["uid"] == first["metadata"]["uid"]:
            return None
        return current if running_pods(kube_stack, namespace) == 4 else None

    eventually(replaced, "a new leader running next to its followers", 90, ignoring=(KubeError,))
    assert domains_by_job(kube_stack, namespace)["stays"] == {pool}
    assert resizer_metric(kube_stack, "follower_repairs_total") == repairs_before
    assert not job_failed(kube_stack, namespace, "stays")


def leaders(stack: Stack, namespace: str) -> list[Obj]:
    """Every pod of completion index 0 in the namespace, whatever its phase."""
    return [
        pod
        for pod in pods_of(stack, namespace)
        if pod["metadata"]["annotations"].get(JOB_COMPLETION_INDEX_ANNOTATION) == "0"
    ]


def test_followers_are_pinned_to_the_leader_that_replaced_a_failed_one(
    kube_stack: Stack, namespace: str
) -> None:
    pools = node_domains(kube_stack.client.list("Node"), GKE_NODEPOOL_LABEL)
    with resizer_stopped(kube_stack):  # the Job stays at size 1: its followers come after the failure
        kube_stack.client.create(plain_job("relead", namespace, 3))
        first = eventually(
            lambda: running_leader(kube_stack, namespace),
            "the first leader running",
            90,
            ignoring=(KubeError,),
        )
        old_pool = pools[first["spec"]["nodeName"]]
        old_nodes = [name for name, pool in pools.items() if pool == old_pool]
        set_taint(kube_stack, old_nodes, FULL)  # the replacement binds in another pool
        kube_stack.client.patch(
            "Pod",
            first["metadata"]["name"],
            {"status": {"phase": "Failed"}},
            namespace=namespace,
            subresource="status",
        )

        def replacement() -> Obj | None:
            return next(
                (
                    pod
                    for pod in leaders(kube_stack, namespace)
                    if pod["metadata"]["uid"] != first["metadata"]["uid"] and pod["spec"].get("nodeName")
                ),
                None,
            )

        second = eventually(replacement, "a replacement leader bound", 90, ignoring=(KubeError,))
    try:
        eventually(
            lambda: running_pods(kube_stack, namespace) == 3,
            "the Job running whole",
            90,
            ignoring=(KubeError,),
        )
    finally:
        set_taint(kube_stack, old_nodes, None)
    new_pool = pools[second["spec"]["nodeName"]]
    assert new_pool != old_pool
    phases = sorted(pod["status"].get("phase", "") for pod in leaders(kube_stack, namespace))
    assert phases == ["Failed", "Running"]  # the finished leader is still there: no second leader
    followers = [
        p
        for p in pods_of(kube_stack, namespace)
        if p["metadata"]["uid"] not in {first["metadata"]["uid"], second["metadata"]["uid"]}
    ]
    assert len(followers) == 2
    assert {p["spec"]["nodeSelector"][GKE_NODEPOOL_LABEL] for p in followers} == {new_pool}
    assert domains_by_job(kube_stack, namespace)["relead"] == {new_pool}
    assert not job_failed(kube_stack, namespace, "relead")
