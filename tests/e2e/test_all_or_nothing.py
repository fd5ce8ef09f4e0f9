"""All-or-nothing JobSets on the whole stack (kubesim + webhook + resizer as real processes, real TLS):

- three JobSets of 3 elastic Jobs on 4 pools: the webhook gates every leader, the resizer lets one JobSet's
  leaders go only when 3 pools are free, so at no moment do two JobSets each hold part of what they need;
  no follower binds before every leader of its JobSet has; all complete;
- a resizer that died after ungating one of a JobSet's three leaders (that state written into the API, as
  the killed process left it): a fresh resizer ungates the other two, admits nothing twice, deletes no
  leader, and every JobSet completes (slow);
- the same with the real process SIGKILLed between two of its gate removals (API requests slowed so the
  release spans a second).
"""

from __future__ import annotations

import contextlib
import time
from collections.abc import Callable, Iterator
from dataclasses import replace
from typing import Any

import httpx
import pytest

from devstack.commands import KubesimFlags
from devstack.exclusivity import node_domains
from devstack.manifests import exclusive_jobset
from devstack.scenario import ensure_namespace
from devstack.stack import Stack
from placement.constants import (
    ALL_OR_NOTHING_ANNOTATION,
    ALL_OR_NOTHING_GATE,
    ALL_OR_NOTHING_TIMEOUT_REASON,
    GKE_NODEPOOL_LABEL,
    JOB_COMPLETION_INDEX_ANNOTATION,
    RELEASED_AT_ANNOTATION,
)
from placement.gang import format_time
from tests.e2e.all_or_nothing_support import (
    JOBS,
    a_resizer_sigkilled_between_two_gate_removals_loses_and_doubles_nothing,
    all_or_nothing_jobsets_never_hold_part_of_the_domains_they_need,
    assert_released_whole,
    completed,
    create_gated,
    gated_leaders,
    run_to_completion,
)
from tests.e2e.jobset_e2e_support import Watch, set_taint
from tests.support.metrics import resizer_metric
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]
CLUSTER = KubesimFlags(nodes=4, pools=4, gpus_per_node=8, time_scale=0.05, pod_run_seconds=20)
"""4 pools of one eight-GPU node; a Job of 2 four-GPU pods fills one; a pod runs 20 simulated s (1 s)."""


def test_all_or_nothing_jobsets_never_hold_part_of_the_domains_they_need(
    stack_factory: Callable[..., Stack],
) -> None:
    stack = stack_factory(cluster=CLUSTER)
    namespace, names = "gangs", ["a", "b", "c"]
    ensure_namespace(stack.client, namespace)
    all_or_nothing_jobsets_never_hold_part_of_the_domains_they_need(stack, namespace, names)
    assert resizer_metric(stack, "gang_admissions_total") == len(names)
    assert resizer_metric(stack, "leader_releases_total") == len(names) * JOBS
    assert resizer_metric(stack, "gang_timeouts_total") == 0


@pytest.mark.slow  # the SIGKILL test below covers it with the real process; this one pins exact counts
def test_a_release_cut_short_by_a_killed_resizer_is_finished_once_by_the_next(
    stack_factory: Callable[..., Stack],
) -> None:
    # Pods run 3 s here: the leader released before the "crash" must still be running when the new resizer
    # has started (were it done, its JobSet would simply queue again for its 2 other Jobs).
    stack = stack_factory(cluster=replace(CLUSTER, pod_run_seconds=60), resizer_replicas=0)
    namespace, names = "crash", ["a", "b"]
    ensure_namespace(stack.client, namespace)
    with Watch(stack, "Pod", namespace) as watch:
        create_gated(stack, namespace, names)
        # What a resizer killed between its first and second gate removal leaves behind.
        first = sorted(gated_leaders(stack, namespace, "a"), key=lambda pod: str(pod["metadata"]["name"]))[0]
        index = first["spec"]["schedulingGates"].index({"name": ALL_OR_NOTHING_GATE})
        httpx.patch(
            f"{stack.server}/api/v1/namespaces/{namespace}/pods/{first['metadata']['name']}",
            json=[
                {"op": "remove", "path": f"/spec/schedulingGates/{index}"},
                {
                    "op": "add",
                    "path": f"/metadata/annotations/{RELEASED_AT_ANNOTATION.replace('/', '~1')}",
                    "value": format_time(time.time()),
                },
            ],
            headers={"Content-Type": "application/json-patch+json"},
            timeout=10,
        ).raise_for_status()
        leaders_before = {
            pod["metadata"]["uid"] for name in names for pod in gated_leaders(stack, namespace, name)
        }
        stack.add_resizer()
        placement = run_to_completion(stack, namespace, names, watch)
    released_leaders = {
        pod["metadata"]["uid"]
        for kind, pod in watch.events
        if kind == "MODIFIED"
        and pod["metadata"]["annotations"][JOB_COMPLETION_INDEX_ANNOTATION] == "0"
        and RELEASED_AT_ANNOTATION in pod["metadata"]["annotations"]
    }
    assert leaders_before | {first["metadata"]["uid"]} == released_leaders  # the same pods, none re-created
    assert_released_whole(placement)
    assert resizer_metric(stack, "gang_admissions_total") == 1  # b; a was finished, not admitted again
    assert resizer_metric(stack, "leader_releases_total") == 2 * JOBS - 1
    assert resizer_metric(stack, "gang_timeouts_total") == 0


def set_faults(stack: Stack, spec: str) -> None:
    httpx.post(f"{stack.server}/debug/faults", json={"faults": spec}, timeout=10).raise_for_status()


@contextlib.contextmanager
def api_requests_slowed(stack: Stack, namespace: str) -> Iterator[None]:
    """kubesim answers every API request after 0.35 to 0.45 s for the block (its fault injection)."""
    set_faults(stack, "latency-ms=350-450")
    try:
        yield
    finally:
        set_faults(stack, "")


def test_a_resizer_sigkilled_between_two_gate_removals_loses_and_doubles_nothing(
    stack_factory: Callable[..., Stack],
) -> None:
    """The real process, killed mid-release: every API request is slowed to ~0.4 s so the resizer's three
    sequential gate removals take over a second (pods run 10 s, so the first leader still runs when the
    restarted resizer takes over)."""
    stack = stack_factory(cluster=replace(CLUSTER, pod_run_seconds=200), resizer_replicas=0)
    namespace = "sigkill"
    ensure_namespace(stack.client, namespace)
    a_resizer_sigkilled_between_two_gate_removals_loses_and_doubles_nothing(
        stack, namespace, slowing=api_requests_slowed
    )


NO_SCHEDULE = {"key": "maintenance", "value": "true", "effect": "NoSchedule"}


def timed_out_leaders(events: list[tuple[str, Obj]]) -> set[str]:
    return {
        pod["metadata"]["name"]
        for _kind, pod in events
        if any(
            condition.get("reason") == ALL_OR_NOTHING_TIMEOUT_REASON
            for condition in pod.get("status", {}).get("conditions") or []
        )
    }


@pytest.mark.slow
def test_a_reservation_that_cannot_bind_times_out_and_the_jobset_queues_again(
    stack_factory: Callable[..., Stack],
) -> None:
    """A pool is closed in a way the queue does not see (a taint): the JobSet of 4 is released into 4
    "free" pools, 3 leaders bind, the 4th cannot; after the timeout its leaders are marked and deleted,
    re-created gated and queued again; once the pool opens, the JobSet is released and completes.
    Pods run 10 s, longer than the 2 s timeout: a bound leader does not free its pool before it."""
    stack = stack_factory(cluster=replace(CLUSTER, pod_run_seconds=200), resizer_replicas=0)
    stack.add_resizer(extra_args=["--all-or-nothing-timeout-seconds", "2"])
    namespace = "timeout"
    ensure_namespace(stack.client, namespace)
    pools = node_domains(stack.client.list("Node"), GKE_NODEPOOL_LABEL)
    tainted = [node for node, pool in pools.items() if pool == "pool-03"]
    set_taint(stack, tainted, NO_SCHEDULE)  # the queue reads spec.unschedulable, not taints
    jobset = exclusive_jobset("x", jobs=4, pods_per_job=1, gpus_per_pod=8, namespace=namespace)
    jobset["metadata"]["annotations"][ALL_OR_NOTHING_ANNOTATION] = "true"
    jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["backoffLimit"] = 6  # a deleted pod is a failure
    with Watch(stack, "Pod", namespace) as watch:
        stack.client.create(jobset)
        eventually(lambda: resizer_metric(stack, "gang_timeouts_total") >= 1, "the reservation timed out", 60)
        set_taint(stack, tainted, None)
        eventually(
            lambda: completed(stack, namespace, ["x"]),
            "the JobSet completed",
            60,
            ignoring=(httpx.HTTPError,),
        )
    stack.check_alive()
    assert len(timed_out_leaders(watch.events)) >= 4  # all 4 of the first attempt: bound or not
    assert resizer_metric(stack, "gang_admissions_total") >= 2
