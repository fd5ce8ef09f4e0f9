"""Kueue's Topology Aware Scheduling next to exclusive placement, on the real control plane: devstack's
`kueue_tas` gives the ClusterQueue a TAS flavor of a Topology of the pools (block = node pool, then
hostname).

TAS chooses the nodes of a replicated Job's pods itself and packs them: asked for a pool
(`kueue.x-k8s.io/podset-required-topology`), it assigned all 8 pods of a JobSet's 2 exclusive Jobs to one
node, and the second Job's pods stayed Pending against the first's anti-affinity. So under every strategy
a JobSet Kueue queues that asks TAS for a topology of an exclusive replicated Job is denied at its
admission, the message naming the conflict; nothing of it is created. So is a plain exclusive Job Kueue
queues with such an annotation (TAS would choose its nodes by free GPUs, blind to other Jobs' leaders).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devstack.controlplane import kueue
from devstack.manifests import exclusive_jobset
from devstack.stack import Stack
from kubekit.client import KubeError
from placement.constants import GKE_NODEPOOL_LABEL, HOSTNAME_LABEL, STRATEGIES, Strategy
from tests.kube.conftest import kube_options
from tests.kube.workloads import plain_job

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-kueue-tas")]

TAS_REQUIRED = "kueue.x-k8s.io/podset-required-topology"


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
