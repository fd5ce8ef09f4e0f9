"""All-or-nothing JobSets queued through Kueue, on the real control plane: Kueue's quota admits both, the
pools fit one at a time (two JobSets of 3 Jobs on 4 pools), and Kueue's `waitForPodsReady` is on with a
timeout of KUEUE_TIMEOUT, longer than the resizer's all-or-nothing timeout (RESIZER_TIMEOUT).

The second JobSet, admitted by Kueue, waits in this project's queue (its leaders gated) while the first
holds the pools. No deadlock and no fight: the resizer's safety net covers only a *released* gang whose
leaders do not bind, so it never acts on a gang that waits for domains, however short its timeout; Kueue's
timeout, counted from admission whatever the pods wait for, evicts the waiting JobSet (its gated leaders
deleted, none bound) and requeues it; re-admitted, it queues again. Once the first is deleted the second is
placed, each Job alone in a pool, and no pool ever holds two Jobs' pods at once.

A released JobSet whose leaders cannot bind (pods without a job key fill 2 pools' GPUs: the queue sees 4
free pools) is undone first by the resizer's safety net, the shorter timeout: its Jobs are suspended and
resumed, the JobSet stays admitted. Kueue's clock is not reset by that (it runs from admission until
PodsReady), so Kueue evicts it at its own timeout as well; once the pools are free it is placed, no Job
failed. With elastic before the resizer skipped suspended Jobs and rewound resized ones, it failed 3 runs of
3: the eviction raced the gang's resize (docs/kueue.md); and while the eviction deleted the waiting
JobSet's gated leaders one by one, the queue released the one still live into the one free pool, until a
gang counted only live leaders as present.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import pytest

from devstack.controlplane import kueue
from devstack.controlplane.kueue import WaitForPodsReady
from devstack.exclusivity import node_domains
from devstack.manifests import exclusive_jobset
from devstack.stack import Stack
from kubekit.client import KubeError
from placement.constants import (
    ALL_OR_NOTHING_ANNOTATION,
    ALL_OR_NOTHING_GATE,
    GKE_NODEPOOL_LABEL,
    GPU_RESOURCE,
    JOB_COMPLETION_INDEX_ANNOTATION,
)
from placement.gang import parse_time
from tests.kube.conftest import kube_options
from tests.kube.kube_support import create_namespace, empty_namespace
from tests.kube.kueue_support import (
    bound_pods_of,
    condition,
    create_local_queue,
    pods_of_jobset,
    pools_ever_shared,
    running,
    workload_of,
)
from tests.kube.workloads import Watch, assert_each_job_whole_in_its_own_pool
from tests.support.metrics import resizer_metric
from tests.support.waiting import eventually

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-kueue-all-or-nothing")]

Obj = dict[str, Any]
JOBS, PODS, GPUS_PER_POD = 3, 2, 4
"""3 Jobs on 4 pools: one JobSet at a time."""
QUOTA = 2 * JOBS * PODS * GPUS_PER_POD
"""Kueue admits both JobSets at once."""
KUEUE_TIMEOUT = 30
RESIZER_TIMEOUT = 10


@pytest.fixture(scope="module")
def kube_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    options = kube_options(
        tmp_path_factory.mktemp("kube-kueue-all-or-nothing"),
        kueue=True,
        kueue_gpu_quota=QUOTA,
        kueue_wait_for_pods_ready=WaitForPodsReady(
            timeout_seconds=KUEUE_TIMEOUT, backoff_base_seconds=1, backoff_max_seconds=4
        ),
        resizer_replicas=0,
    )
    with Stack(options) as stack:
        stack.add_resizer(("--all-or-nothing-timeout-seconds", str(RESIZER_TIMEOUT)))
        yield stack


def queued_all_or_nothing_jobset(name: str, namespace: str) -> Obj:
    jobset = exclusive_jobset(
        name, jobs=JOBS, pods_per_job=PODS, gpus_per_pod=GPUS_PER_POD, namespace=namespace
    )
    jobset["metadata"]["annotations"][ALL_OR_NOTHING_ANNOTATION] = "true"
    jobset["metadata"]["labels"] = {kueue.QUEUE_NAME_LABEL: kueue.LOCAL_QUEUE}
    return jobset


def gated_leaders(stack: Stack, namespace: str, jobset: str) -> set[str]:
    return {
        pod["metadata"]["uid"]
        for pod in pods_of_jobset(stack, namespace, jobset)
        if pod["metadata"]["annotations"][JOB_COMPLETION_INDEX_ANNOTATION] == "0"
        and {"name": ALL_OR_NOTHING_GATE} in (pod["spec"].get("schedulingGates") or [])
        and not pod["metadata"].get("deletionTimestamp")
    }


def waiting_in_our_queue(stack: Stack, namespace: str, jobset: str) -> set[str] | None:
    """Its leaders' uids when Kueue has admitted the JobSet and each of its Jobs has a gated leader."""
    admitted = condition(workload_of(stack, namespace, jobset), "Admitted") == "True"
    leaders = gated_leaders(stack, namespace, jobset)
    return leaders if admitted and len(leaders) == JOBS else None


def transition(workload: Obj, kind: str, reason: str | None = None) -> float | None:
    """When the Workload's `kind` condition last became True (with `reason`, if given)."""
    for entry in workload.get("status", {}).get("conditions", []):
        if entry["type"] == kind and entry["status"] == "True" and reason in (None, entry["reason"]):
            return parse_time(entry["lastTransitionTime"])
    return None


def first_transition(
    events: list[tuple[str, Obj]], owner: str, kind: str, reason: str | None = None
) -> float | None:
    """The first time a watched Workload of `owner` showed `kind` True (with `reason`)."""
    for _, workload in events:
        if any(ref["name"] == owner for ref in workload["metadata"].get("ownerReferences", [])):
            when = transition(workload, kind, reason)
            if when is not None:
                return when
    return None


def setup_local_queue(stack: Stack, namespace: str) -> None:
    create_local_queue(stack, namespace)


def setup_first_placed(stack: Stack, namespace: str) -> None:
    setup_local_queue(stack, namespace)
    stack.client.create(queued_all_or_nothing_jobset("first", namespace))
    eventually(
        lambda: running(pods_of_jobset(stack, namespace, "first")) == JOBS * PODS,
        f"the first JobSet's {JOBS * PODS} pods running",
        120,
        ignoring=(KubeError,),
    )
    eventually(
        lambda: condition(workload_of(stack, namespace, "first"), "PodsReady") == "True",
        "the first JobSet's Workload PodsReady",
        60,
        ignoring=(KubeError,),
    )


@pytest.mark.timeout(420)
def test_an_admitted_all_or_nothing_jobset_waits_gated_for_the_pools_kueue_evicts_it_not_the_resizer(
    kube_stack: Stack, namespace: str
) -> None:
    stack = kube_stack
    with Watch(stack, "Pod", namespace) as pods, Watch(stack, "Workload", namespace) as workloads:
        setup_first_placed(stack, namespace)
        stack.client.create(queued_all_or_nothing_jobset("second", namespace))
        first_leaders = eventually(
            lambda: waiting_in_our_queue(stack, namespace, "second"),
            "the second JobSet admitted by Kueue, its leaders gated by this project",
            90,
            ignoring=(KubeError,),
        )
        # Kueue's timeout evicts it; requeued and admitted again, it waits gated again (new leaders).
        eventually(
            lambda: (
                (leaders := waiting_in_our_queue(stack, namespace, "second")) and not leaders & first_leaders
            ),
            "the second JobSet evicted by Kueue, admitted again, its new leaders gated",
            KUEUE_TIMEOUT * 4 + 60,
            ignoring=(KubeError,),
        )
        while_first_lives = list(pods.events)
        stack.client.delete("JobSet", "first", namespace=namespace)
        eventually(
            lambda: not pods_of_jobset(stack, namespace, "first"),
            "the first JobSet's pods gone",
            90,
            ignoring=(KubeError,),
        )
        first_gone = time.time()
        eventually(
            lambda: running(pods_of_jobset(stack, namespace, "second")) == JOBS * PODS,
            f"the second JobSet's {JOBS * PODS} pods running",
            120,
            ignoring=(KubeError,),
        )
        placed_after = time.time() - first_gone
        stack.check_alive()
    assert bound_pods_of(while_first_lives, "second") == set()
    pools = node_domains(stack.client.list("Node"), GKE_NODEPOOL_LABEL)
    assert pools_ever_shared(pods.events, pools) == {}
    assert_each_job_whole_in_its_own_pool(stack, namespace, JOBS)
    # The resizer's safety net never acted (nothing of it was released while it waited); Kueue's did.
    assert resizer_metric(stack, "gang_timeouts_total") == 0
    events = list(workloads.events)
    assert first_transition(events, "first", "Evicted") is None
    admitted = first_transition(events, "second", "Admitted")
    evicted = first_transition(events, "second", "Evicted", "PodsReadyTimeout")
    assert admitted is not None, events
    assert evicted is not None, events
    assert evicted - admitted >= KUEUE_TIMEOUT - 1  # lastTransitionTime has whole seconds
    print(
        f"Kueue evicted the waiting JobSet {evicted - admitted:.0f} s after admitting it; "
        f"placed {placed_after:.1f} s after the first JobSet's pods were gone"
    )


def filler(name: str, pool: str) -> Obj:
    """A pod of no Job, without the job key, taking a whole node's GPUs in `pool`: invisible to the queue."""
    gpus = {GPU_RESOURCE: "8"}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name},
        "spec": {
            "nodeSelector": {GKE_NODEPOOL_LABEL: pool},
            "containers": [
                {
                    "name": "pause",
                    "image": "registry.example/pause:3",
                    "resources": {"requests": gpus, "limits": gpus},
                }
            ],
        },
    }


def evicted_by_kueue(stack: Stack, namespace: str, jobset: str) -> bool:
    workload = workload_of(stack, namespace, jobset)
    return workload is not None and transition(workload, "Evicted", "PodsReadyTimeout") is not None


@pytest.fixture
def fillers(kube_stack: Stack, namespace: str) -> Iterator[str]:
    """Another namespace whose pods fill every GPU of two pools (the namespace's name)."""
    name = f"fill-{namespace[-8:]}"
    create_namespace(kube_stack, name)
    pools = sorted(set(node_domains(kube_stack.client.list("Node"), GKE_NODEPOOL_LABEL).values()))[:2]
    for pool in pools:
        for n in range(2):
            kube_stack.client.create(filler(f"fill-{pool}-{n}", pool), namespace=name)
    eventually(
        lambda: all(p["spec"].get("nodeName") for p in kube_stack.client.list("Pod", namespace=name)),
        "the fillers bound",
        60,
        ignoring=(KubeError,),
    )
    yield name
    empty_namespace(kube_stack, name)


@pytest.mark.timeout(420)
def test_a_released_jobset_that_cannot_bind_is_undone_by_the_resizer_first_then_evicted_by_kueue(
    kube_stack: Stack, namespace: str, fillers: str
) -> None:
    stack = kube_stack
    setup_local_queue(stack, namespace)
    before = resizer_metric(stack, "gang_timeouts_total")
    stack.client.create(queued_all_or_nothing_jobset("stuck", namespace))

    def resizer_timed_out() -> tuple[bool] | None:
        if resizer_metric(stack, "gang_timeouts_total") <= before:
            return None
        return (evicted_by_kueue(stack, namespace, "stuck"),)

    (kueue_first,) = eventually(
        resizer_timed_out, "the resizer's safety net", KUEUE_TIMEOUT + 60, interval=0.5
    )
    assert kueue_first is False
    assert condition(workload_of(stack, namespace, "stuck"), "Admitted") == "True"
    eventually(
        lambda: evicted_by_kueue(stack, namespace, "stuck"),
        "Kueue's PodsReady timeout evicting the JobSet all the same",
        KUEUE_TIMEOUT + 60,
        ignoring=(KubeError,),
    )
    for pod in stack.client.list("Pod", namespace=fillers):
        stack.client.delete("Pod", pod["metadata"]["name"], namespace=fillers)
    eventually(
        lambda: (
            failed_jobs(stack, namespace) or running(pods_of_jobset(stack, namespace, "stuck")) == JOBS * PODS
        ),
        f"the JobSet's {JOBS * PODS} pods running once the pools are free (or a Job failed)",
        180,
        ignoring=(KubeError,),
    )
    stack.check_alive()
    assert failed_jobs(stack, namespace) == []
    assert_each_job_whole_in_its_own_pool(stack, namespace, JOBS)


def failed_jobs(stack: Stack, namespace: str) -> list[str]:
    return [
        job["metadata"]["name"]
        for job in stack.client.list("Job", namespace=namespace)
        if job["status"].get("failed")
    ]
