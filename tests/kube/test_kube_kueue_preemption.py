"""Kueue preempts a running exclusive JobSet for a higher-priority one, on the real control plane: a
ClusterQueue of QUOTA GPUs that preempts lower-priority workloads within it (`preemption.withinClusterQueue:
LowerPriority`, as a user sets it), two WorkloadPriorityClasses, JobSets naming theirs with
`kueue.x-k8s.io/priority-class`.

Replaying a pod watch from outside: the victim's pools are released (its pods gone, none bound while the
preemptor runs), the preemptor is placed each Job alone in a pool, the victim re-admitted after the
preemptor is deleted is placed so again, no follower ever binds in a pool other than that of its own Job's
leader bound at that moment (JobSet #1021: a terminating leader from before the eviction misplacing the
followers), and no two Jobs' pods ever share a pool.

JobSet suspends a preempted JobSet's child Jobs in place and resumes them at full size. An `elastic` Job,
resized and with its followers pinned to its previous leader's domain (`leader-domain`), had every
follower created at once beside a new leader bound elsewhere, the follower repair deleted them and the Job
failed on its backoffLimit. The resizer's rewind (`placement.rewind`) puts a suspended, resized Job back to
size 1 with no recorded domain: here each of the victim's Jobs is rewound once, resized again beside its
new leader after the re-admission, and no follower is repaired.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from devstack.controlplane import kueue
from devstack.exclusivity import node_domains
from devstack.manifests import exclusive_jobset
from devstack.stack import Stack
from kubekit.client import KubeError
from placement.constants import (
    CONTROLLER_UID_LABEL,
    GKE_NODEPOOL_LABEL,
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOBSET_NAME_LABEL,
    RESIZE_DONE,
    RESIZE_LABEL,
    STRATEGIES,
    Strategy,
)
from tests.kube.conftest import kube_options
from tests.kube.kueue_support import condition, create_local_queue, pods_of_jobset, running, workload_of
from tests.kube.workloads import Watch, assert_each_job_whole_in_its_own_pool, pods_of
from tests.support.metrics import resizer_metric
from tests.support.waiting import eventually

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-kueue-preemption")]

JOBS, PODS = 2, 4
QUOTA = JOBS * PODS
"""GPUs of the preempting ClusterQueue: one JobSet of JOBS x PODS one-GPU pods, not two."""
CLUSTER_QUEUE, LOCAL_QUEUE = "preempting-queue", "preempting"
PRIORITY_CLASS_LABEL = "kueue.x-k8s.io/priority-class"
PRIORITIES = {"low": 100, "high": 1000}
Obj = dict[str, Any]
Events = list[tuple[str, Obj]]


@pytest.fixture(scope="module")
def kube_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    options = kube_options(tmp_path_factory.mktemp("kube-kueue-preemption"), kueue=True)
    with Stack(options) as stack:
        yield stack


@pytest.fixture(scope="module")
def preempting_queue(kube_stack: Stack) -> str:
    """A ClusterQueue of QUOTA GPUs preempting lower priorities within it, and the priority classes."""
    quota = [
        {"name": "cpu", "nominalQuota": "100000"},
        {"name": "memory", "nominalQuota": "100000Gi"},
        {"name": kueue.GPU, "nominalQuota": str(QUOTA)},
    ]
    kube_stack.client.create(
        {
            "apiVersion": kueue.API_VERSION,
            "kind": "ClusterQueue",
            "metadata": {"name": CLUSTER_QUEUE},
            "spec": {
                "namespaceSelector": {},
                "preemption": {"withinClusterQueue": "LowerPriority"},
                "resourceGroups": [
                    {
                        "coveredResources": [entry["name"] for entry in quota],
                        "flavors": [{"name": kueue.RESOURCE_FLAVOR, "resources": quota}],
                    }
                ],
            },
        }
    )
    for name, value in PRIORITIES.items():
        kube_stack.client.create(
            {
                "apiVersion": kueue.API_VERSION,
                "kind": "WorkloadPriorityClass",
                "metadata": {"name": name},
                "value": value,
            }
        )
    return CLUSTER_QUEUE


@pytest.fixture
def queue(kube_stack: Stack, namespace: str, preempting_queue: str) -> str:
    return create_local_queue(kube_stack, namespace, LOCAL_QUEUE, preempting_queue)


def prioritized_jobset(name: str, namespace: str, queue: str, priority: str, strategy: str) -> Obj:
    jobset = exclusive_jobset(name, jobs=JOBS, pods_per_job=PODS, namespace=namespace, strategy=strategy)
    jobset["metadata"]["labels"] = {kueue.QUEUE_NAME_LABEL: queue, PRIORITY_CLASS_LABEL: priority}
    return jobset


def placed_alone(stack: Stack, namespace: str, name: str) -> None:
    """The JobSet admitted, all its pods Running, each of its Jobs alone in a pool (the only pods left)."""
    eventually(
        lambda: condition(workload_of(stack, namespace, name), "Admitted") == "True",
        f"JobSet {name}'s Workload Admitted",
        90,
        ignoring=(KubeError,),
    )
    eventually(
        lambda: (
            len(pods_of(stack, namespace)) == JOBS * PODS
            and running(pods_of_jobset(stack, namespace, name)) == JOBS * PODS
        ),
        f"the {JOBS * PODS} pods of {name} running, and only they",
        120,
        ignoring=(KubeError,),
    )
    stack.check_alive()
    assert_each_job_whole_in_its_own_pool(stack, namespace, JOBS)


def is_live_bound(kind: str, pod: Obj) -> bool:
    phase = pod.get("status", {}).get("phase")
    return kind != "DELETED" and bool(pod["spec"].get("nodeName")) and phase not in ("Succeeded", "Failed")


def pools_ever_shared(events: Events, pools: dict[str, str]) -> dict[str, set[str]]:
    """Replaying a pod watch: pool -> the Jobs (JobSet/Job) bound in it at one moment, for every pool that
    ever held two Jobs' pods at once. A terminating pod still counts."""
    bound: dict[str, tuple[str, str]] = {}
    shared: dict[str, set[str]] = {}
    for kind, pod in events:
        labels = pod["metadata"]["labels"]
        if is_live_bound(kind, pod):
            job = f"{labels.get(JOBSET_NAME_LABEL)}/{labels['batch.kubernetes.io/job-name']}"
            bound[pod["metadata"]["name"]] = (job, pools[pod["spec"]["nodeName"]])
        else:
            bound.pop(pod["metadata"]["name"], None)
        for pool in {where for _, where in bound.values()}:
            jobs = {job for job, where in bound.values() if where == pool}
            if len(jobs) > 1:
                shared.setdefault(pool, set()).update(jobs)
    return shared


def followers_bound_away_from_their_leader(events: Events, pools: dict[str, str]) -> list[str]:
    """Replaying a pod watch: every follower that was bound while no live leader of its own Job (the same
    controller uid, and not terminating: a leader from before the eviction no longer decides) was bound in
    the follower's pool."""
    leaders: dict[str, tuple[str, str]] = {}  # leader pod -> (its Job's uid, its pool), while live and bound
    placed: set[str] = set()
    wrong: list[str] = []
    for kind, pod in events:
        name = pod["metadata"]["name"]
        uid = pod["metadata"]["labels"].get(CONTROLLER_UID_LABEL, "")
        leader = pod["metadata"].get("annotations", {}).get(JOB_COMPLETION_INDEX_ANNOTATION) == "0"
        if not is_live_bound(kind, pod) or (leader and pod["metadata"].get("deletionTimestamp")):
            leaders.pop(name, None)
            continue
        pool = pools[pod["spec"]["nodeName"]]
        if leader:
            leaders[name] = (uid, pool)
        elif name not in placed:
            placed.add(name)
            if (uid, pool) not in leaders.values():
                wrong.append(f"{name} bound in {pool}; its Job's leaders: {sorted(leaders.values())}")
    return wrong


@pytest.mark.timeout(420)
@pytest.mark.parametrize("strategy", list(STRATEGIES), ids=str)
def test_kueue_preempts_an_exclusive_jobset_for_a_higher_priority_one_and_both_stay_exclusive(
    kube_stack: Stack, namespace: str, queue: str, strategy: Strategy
) -> None:
    stack = kube_stack
    rewound = resizer_metric(stack, "suspended_jobs_rewound_total")
    repairs = resizer_metric(stack, "follower_repairs_total")
    with Watch(stack, "Pod", namespace) as pods:
        stack.client.create(prioritized_jobset("victim", namespace, queue, "low", str(strategy)))
        placed_alone(stack, namespace, "victim")

        stack.client.create(prioritized_jobset("preemptor", namespace, queue, "high", str(strategy)))
        eventually(
            lambda: condition(workload_of(stack, namespace, "victim"), "Evicted") == "True",
            "the victim's Workload evicted",
            60,
            ignoring=(KubeError,),
        )
        placed_alone(stack, namespace, "preemptor")  # the victim's pods gone: its pools released
        victim = workload_of(stack, namespace, "victim")
        assert condition(victim, "Admitted") != "True", victim
        assert stack.client.get("JobSet", "victim", namespace=namespace)["spec"]["suspend"] is True

        stack.client.delete("JobSet", "preemptor", namespace=namespace)
        placed_alone(stack, namespace, "victim")
    pools = node_domains(stack.client.list("Node"), GKE_NODEPOOL_LABEL)
    assert followers_bound_away_from_their_leader(pods.events, pools) == []
    assert pools_ever_shared(pods.events, pools) == {}
    victims_bound = {
        p["metadata"]["name"]
        for k, p in pods.events
        if is_live_bound(k, p) and p["metadata"]["labels"].get(JOBSET_NAME_LABEL) == "victim"
    }
    assert len(victims_bound) == 2 * JOBS * PODS  # placed twice: before the eviction and re-admitted
    if strategy is Strategy.ELASTIC:
        assert resizer_metric(stack, "follower_repairs_total") == repairs
        assert resizer_metric(stack, "suspended_jobs_rewound_total") == rewound + JOBS
        victims = [
            job
            for job in stack.client.list("Job", namespace=namespace)
            if job["metadata"]["labels"].get(JOBSET_NAME_LABEL) == "victim"
        ]
        assert len(victims) == JOBS
        for job in victims:
            assert job["metadata"]["labels"][RESIZE_LABEL] == RESIZE_DONE, job["metadata"]
            assert (job["spec"]["completions"], job["spec"]["parallelism"]) == (PODS, PODS)
    else:
        assert resizer_metric(stack, "suspended_jobs_rewound_total") == rewound
