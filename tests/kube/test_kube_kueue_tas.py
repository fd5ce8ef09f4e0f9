"""Kueue's Topology Aware Scheduling next to exclusive placement, on the real control plane: devstack's
`kueue_tas` gives the ClusterQueue a TAS flavor of a Topology of the pools (block = node pool, then
hostname).

TAS chooses the nodes of a replicated Job's pods itself and packs them: asked for a pool
(`kueue.x-k8s.io/podset-required-topology`), it assigned all 8 pods of a JobSet's 2 exclusive Jobs to one
node, and the second Job's pods stayed Pending against the first's anti-affinity. So under every strategy
a JobSet Kueue queues that asks TAS for a topology of an exclusive replicated Job is denied at its
admission, the message naming the conflict; nothing of it is created. So is a plain exclusive Job Kueue
queues with such an annotation (TAS would choose its nodes by free GPUs, blind to other Jobs' leaders).

The stack's ClusterQueue has only a TAS flavor, so Kueue applies TAS to every workload of it, asked or
not: a queued exclusive JobSet without any TAS annotation is denied too, naming the ClusterQueue. Through a
ClusterQueue that also has a flavor without a Topology, the same JobSet is admitted by Kueue on that flavor
and runs, each Job whole in its own pool. A JobSet or plain Job that names no queue, where Kueue's LocalQueue
defaulting queues it in such a ClusterQueue, is denied as well.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest

from devstack.controlplane import kueue
from devstack.controlplane.kueue import API_VERSION, GPU, TAS_FLAVOR_NODE_LABELS
from devstack.manifests import exclusive_jobset
from devstack.stack import Stack
from kubekit.client import KubeError
from placement.constants import GKE_NODEPOOL_LABEL, HOSTNAME_LABEL, STRATEGIES, Strategy
from placement.kueue import DEFAULT_LOCAL_QUEUE
from placement.status import WaitReason
from tests.kube.conftest import kube_options
from tests.kube.kueue_support import condition, create_local_queue, pods_of_jobset, running, workload_of
from tests.kube.workloads import assert_each_job_whole_in_its_own_pool, plain_job
from tests.support.plugin_commands import status_json
from tests.support.waiting import eventually

Obj = dict[str, Any]

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-kueue-tas")]

TAS_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
TAS_UNCONSTRAINED = "kueue.x-k8s.io/podset-unconstrained-topology"


@pytest.fixture(scope="module")
def kube_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    options = kube_options(tmp_path_factory.mktemp("kube-kueue-tas"), kueue=True, kueue_tas=True)
    with Stack(options) as stack:
        yield stack


def test_the_cluster_queue_has_a_tas_flavor_of_a_topology_of_the_pools(kube_stack: Stack) -> None:
    client = kube_stack.client
    (topology,) = client.list("Topology")
    assert [level["nodeLabel"] for level in topology["spec"]["levels"]] == [
        GKE_NODEPOOL_LABEL,
        HOSTNAME_LABEL,
    ]
    flavor = client.get("ResourceFlavor", kueue.RESOURCE_FLAVOR)
    assert flavor["spec"]["topologyName"] == topology["metadata"]["name"]
    (group,) = client.get("ClusterQueue", kueue.CLUSTER_QUEUE)["spec"]["resourceGroups"]
    assert [entry["name"] for entry in group["flavors"]] == [kueue.RESOURCE_FLAVOR]


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_a_queued_exclusive_jobset_asking_tas_for_a_pool_is_denied_naming_the_conflict(
    kube_stack: Stack, namespace: str, strategy: Strategy
) -> None:
    jobset = exclusive_jobset("tas", jobs=2, pods_per_job=4, namespace=namespace, strategy=str(strategy))
    jobset["metadata"]["labels"] = {kueue.QUEUE_NAME_LABEL: kueue.LOCAL_QUEUE}
    pod_template = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    pod_template.setdefault("metadata", {}).setdefault("annotations", {})[TAS_REQUIRED] = GKE_NODEPOOL_LABEL
    with pytest.raises(KubeError) as denied:
        kube_stack.client.create(jobset)
    assert denied.value.status in (400, 403), denied.value
    assert f"{TAS_REQUIRED}={GKE_NODEPOOL_LABEL}" in str(denied.value)
    assert "Kueue's Topology Aware Scheduling" in str(denied.value)
    assert kube_stack.client.list("JobSet", namespace=namespace) == []
    assert kube_stack.client.list("Workload", namespace=namespace) == []


def test_a_queued_exclusive_jobset_asking_tas_for_no_level_is_denied_too(
    kube_stack: Stack, namespace: str
) -> None:
    """`podset-unconstrained-topology` names no level, but Kueue still places the pods with TAS."""
    jobset = exclusive_jobset("tas-any", jobs=2, pods_per_job=4, namespace=namespace, strategy="elastic")
    jobset["metadata"]["labels"] = {kueue.QUEUE_NAME_LABEL: kueue.LOCAL_QUEUE}
    pod_template = jobset["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    pod_template.setdefault("metadata", {}).setdefault("annotations", {})[TAS_UNCONSTRAINED] = "true"
    with pytest.raises(KubeError) as denied:
        kube_stack.client.create(jobset)
    assert denied.value.status in (400, 403), denied.value
    assert f"{TAS_UNCONSTRAINED}=true asks Kueue's Topology Aware Scheduling" in str(denied.value)
    assert kube_stack.client.list("JobSet", namespace=namespace) == []


def test_a_queued_plain_exclusive_job_asking_tas_for_a_pool_is_denied_naming_the_conflict(
    kube_stack: Stack, namespace: str
) -> None:
    job = plain_job("tas", namespace, 4)
    job["metadata"]["labels"] = {kueue.QUEUE_NAME_LABEL: kueue.LOCAL_QUEUE}
    job["spec"]["template"]["metadata"] = {"annotations": {TAS_REQUIRED: GKE_NODEPOOL_LABEL}}
    with pytest.raises(KubeError) as denied:
        kube_stack.client.create(job)
    assert denied.value.status in (400, 403), denied.value
    assert f"spec.template.metadata.annotations: {TAS_REQUIRED}={GKE_NODEPOOL_LABEL}" in str(denied.value)
    assert kube_stack.client.list("Job", namespace=namespace) == []


def test_a_queued_exclusive_jobset_without_tas_annotations_is_denied_where_kueue_uses_tas_unasked(
    kube_stack: Stack, namespace: str
) -> None:
    queue = create_local_queue(kube_stack, namespace)
    jobset = exclusive_jobset("tas-implied", jobs=2, pods_per_job=4, namespace=namespace, strategy="elastic")
    jobset["metadata"]["labels"] = {kueue.QUEUE_NAME_LABEL: queue}
    with pytest.raises(KubeError) as denied:
        kube_stack.client.create(jobset)
    assert denied.value.status in (400, 403), denied.value
    message = str(denied.value)
    assert f"LocalQueue {namespace}/{queue} feeds ClusterQueue {kueue.CLUSTER_QUEUE}" in message
    assert f"({kueue.RESOURCE_FLAVOR} (Topology {kueue.TOPOLOGY}))" in message
    assert kube_stack.client.list("JobSet", namespace=namespace) == []


@pytest.mark.parametrize("kind", ["JobSet", "Job"])
def test_an_exclusive_workload_naming_no_queue_is_denied_where_kueue_defaults_it_to_a_tas_only_queue(
    kube_stack: Stack, namespace: str, kind: str
) -> None:
    """Kueue's LocalQueue defaulting: in a namespace with a LocalQueue named `default`, Kueue's webhooks label
    a JobSet or plain Job that names no queue for it. The JobSet's label is set before this project's JobSet
    validation reads it; the plain Job's after this project's Job webhook ran, which reads the `default`
    LocalQueue itself."""
    create_local_queue(kube_stack, namespace, name=DEFAULT_LOCAL_QUEUE)
    if kind == "JobSet":
        workload = exclusive_jobset("defaulted", jobs=2, pods_per_job=4, namespace=namespace)
    else:
        workload = plain_job("defaulted", namespace, 4)
    with pytest.raises(KubeError) as denied:
        kube_stack.client.create(workload)
    assert denied.value.status in (400, 403), denied.value
    message = str(denied.value)
    assert f"LocalQueue {namespace}/{DEFAULT_LOCAL_QUEUE} feeds ClusterQueue {kueue.CLUSTER_QUEUE}" in message
    assert kube_stack.client.list(kind, namespace=namespace) == []


PLAIN_FLAVOR = "gpus-without-topology"


def flavor_without_topology(name: str = PLAIN_FLAVOR) -> Obj:
    """A ResourceFlavor of the stack's GPU nodes that names no Topology."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceFlavor",
        "metadata": {"name": name},
        "spec": {"nodeLabels": dict(TAS_FLAVOR_NODE_LABELS)},
    }


def cluster_queue(name: str, flavors: dict[str, int]) -> Obj:
    """A ClusterQueue of one resource group (CPU, memory, GPUs) over `flavors` (name -> GPUs), in order."""

    def quota(gpus: int) -> list[Obj]:
        return [
            {"name": "cpu", "nominalQuota": "100000"},
            {"name": "memory", "nominalQuota": "100000Gi"},
            {"name": GPU, "nominalQuota": str(gpus)},
        ]

    group = {
        "coveredResources": ["cpu", "memory", GPU],
        "flavors": [{"name": flavor, "resources": quota(gpus)} for flavor, gpus in flavors.items()],
    }
    return {
        "apiVersion": API_VERSION,
        "kind": "ClusterQueue",
        "metadata": {"name": name},
        "spec": {"namespaceSelector": {}, "resourceGroups": [group]},
    }


@contextlib.contextmanager
def cluster_scoped(stack: Stack, *objects: Obj) -> Iterator[None]:
    """Create `objects`; delete them afterwards, in the reverse order."""
    for obj in objects:
        stack.client.create(obj)
    try:
        yield
    finally:
        for obj in reversed(objects):
            stack.client.delete(obj["kind"], obj["metadata"]["name"])


@pytest.fixture
def queue_with_a_flavor_without_topology(kube_stack: Stack, namespace: str) -> Iterator[str]:
    """A ClusterQueue whose first flavor names no Topology, then the stack's TAS flavor, and a LocalQueue
    of it in `namespace`."""
    queue = cluster_queue("exclusive-gpus", {PLAIN_FLAVOR: 16, kueue.RESOURCE_FLAVOR: 16})
    with cluster_scoped(kube_stack, flavor_without_topology(), queue):
        yield create_local_queue(kube_stack, namespace, "exclusive-queue", "exclusive-gpus")


def test_through_a_cluster_queue_with_a_flavor_without_topology_the_jobset_runs_each_job_in_its_own_pool(
    kube_stack: Stack, namespace: str, queue_with_a_flavor_without_topology: str
) -> None:
    jobset = exclusive_jobset("tas-remedy", jobs=2, pods_per_job=4, namespace=namespace, strategy="elastic")
    jobset["metadata"]["labels"] = {kueue.QUEUE_NAME_LABEL: queue_with_a_flavor_without_topology}
    kube_stack.client.create(jobset)
    eventually(
        lambda: condition(workload_of(kube_stack, namespace, "tas-remedy"), "Admitted") == "True",
        "the JobSet's Workload Admitted",
        90,
        ignoring=(KubeError,),
    )
    workload = workload_of(kube_stack, namespace, "tas-remedy")
    assert workload is not None
    (assignment,) = workload["status"]["admission"]["podSetAssignments"]
    assert set(assignment["flavors"].values()) == {"gpus-without-topology"}, assignment
    assert "topologyAssignment" not in assignment
    eventually(
        lambda: running(pods_of_jobset(kube_stack, namespace, "tas-remedy")) == 8,
        "the JobSet's 8 pods running",
        90,
        ignoring=(KubeError,),
    )
    assert_each_job_whole_in_its_own_pool(kube_stack, namespace, 2)


def test_a_jobset_tas_placed_after_its_cluster_queue_changed_is_reported_placed_by_kueue_tas(
    kube_stack: Stack, namespace: str
) -> None:
    """A JobSet admitted by the webhook through a ClusterQueue without TAS, which then gets only a TAS
    flavor before Kueue admits it: Kueue places it with TAS, a Job waits next to the other, and the plugin
    says why."""
    name = "turns-tas"
    with cluster_scoped(
        kube_stack, flavor_without_topology("no-gpus-yet"), cluster_queue(name, {"no-gpus-yet": 0})
    ):
        queue = create_local_queue(kube_stack, namespace, name, name)
        jobset = exclusive_jobset(name, jobs=2, pods_per_job=4, namespace=namespace, strategy="elastic")
        jobset["metadata"]["labels"] = {kueue.QUEUE_NAME_LABEL: queue}
        kube_stack.client.create(jobset)
        eventually(
            lambda: condition(workload_of(kube_stack, namespace, name), "QuotaReserved") == "False",
            "the Workload waiting for quota",
            60,
            ignoring=(KubeError,),
        )
        kube_stack.client.create_or_replace(cluster_queue(name, {kueue.RESOURCE_FLAVOR: 16}))

        def one_job_running_the_other_placed_by_tas() -> list[Obj]:
            waiting = [
                entry
                for entry in status_json(kube_stack.kubeconfig)["waiting"]
                if entry["namespace"] == namespace and entry["reason"] == WaitReason.PLACED_BY_KUEUE_TAS
            ]
            four_running = running(pods_of_jobset(kube_stack, namespace, name)) == 4
            return waiting if len(waiting) == 1 and four_running else []

        (waiting,) = eventually(
            one_job_running_the_other_placed_by_tas, "one Job running, the other placed-by-kueue-tas", 90
        )
        assert f"assigns them to domains at {HOSTNAME_LABEL}" in waiting["message"]
