"""Acting as the resizer's ServiceAccount on the real control plane (issue 30, attack 4).

The resizer's RBAC lets it patch any pod, its status and any Job, and delete any pod, cluster-wide. With
that alone, its token could run an attacker's image in another team's pod (with that pod's token and
Secrets) and point the EndpointSlices of that team's Services elsewhere (`status.podIP`). The chart's
resizer-pods and resizer-jobs ValidatingAdmissionPolicies leave it only the changes its code makes: here
its own client (`kubekit.client.Kube`), with the token devstack minted for the chart's ServiceAccount,
tries both attacks and more, and makes its own writes, under kube-apiserver's real authorizer and policies.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from devstack.manifests import exclusive_jobset
from devstack.stack import Stack
from kubekit.client import Kube, KubeError, Timeouts, build_api_client
from kubekit.client import KubeError as ResizerError
from placement.constants import (
    DISRUPTION_TARGET_CONDITION,
    GKE_NODEPOOL_LABEL,
    LEADER_SCHEDULED_GATE,
    PLACEMENT_VIOLATION_REASON,
    RESIZE_DONE,
    RESIZE_LABEL,
    TOPOLOGY_ANNOTATION,
    Strategy,
)
from placement.objects import Obj
from placement.resize import violation_condition
from tests.kube.kube_support import audit_log, kube_cluster, wait_running
from tests.kube.workloads import set_taint
from tests.support.builders import make_job, make_pod
from tests.support.waiting import eventually

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-resizer-rights")]

POLICY_MESSAGE = "the exclusive-placement resizer may"
NOW = "2026-01-01T00:00:00Z"


@pytest.fixture(scope="module")
def resizer(kube_stack: Stack) -> Iterator[Kube]:
    """The resizer's own API client as its ServiceAccount (the kubeconfig devstack runs the resizer with)."""
    kubeconfig = kube_cluster(kube_stack).component_kubeconfig("resizer")
    kube = Kube(build_api_client(kubeconfig, None, user_agent="resizer-rights-test"), Timeouts())
    yield kube
    kube.close()


def running_pod(stack: Stack, namespace: str, name: str) -> Obj:
    """A plain pod of another team, bound and running with an IP (a Service's endpoint)."""
    stack.client.create(make_pod(name, namespace).obj())
    return eventually(
        lambda: (pod := stack.client.get("Pod", name, namespace=namespace))["status"].get("podIP") and pod,
        f"{name} running with an IP",
        60,
        ignoring=(KubeError,),
    )


def refusal(write: ResizerError) -> str:
    """The API server's message for a write the resizer was refused (403)."""
    assert write.status == 403, write
    return str(write)


def test_the_resizer_cannot_change_another_pods_image(
    kube_stack: Stack, namespace: str, resizer: Kube
) -> None:
    victim = running_pod(kube_stack, namespace, "web")
    image = victim["spec"]["containers"][0]["image"]
    with pytest.raises(ResizerError) as denied:
        resizer.patch_pod(
            namespace, "web", [{"op": "replace", "path": "/spec/containers/0/image", "value": "evil:latest"}]
        )
    assert POLICY_MESSAGE in refusal(denied.value)
    assert kube_stack.client.get("Pod", "web", namespace=namespace)["spec"]["containers"][0]["image"] == image


def test_the_resizer_cannot_change_another_pods_ip(kube_stack: Stack, namespace: str, resizer: Kube) -> None:
    victim = running_pod(kube_stack, namespace, "web")
    address = victim["status"]["podIP"]
    with pytest.raises(ResizerError) as denied:
        resizer.patch_pod_status(  # `$patch: replace`: the one address instead of the kubelet's
            namespace,
            "web",
            {"status": {"podIP": "10.99.99.99", "podIPs": [{"$patch": "replace"}, {"ip": "10.99.99.99"}]}},
        )
    assert POLICY_MESSAGE in refusal(denied.value)
    assert kube_stack.client.get("Pod", "web", namespace=namespace)["status"]["podIP"] == address


def test_the_resizer_cannot_delete_a_pod_it_did_not_place(
    kube_stack: Stack, namespace: str, resizer: Kube
) -> None:
    victim = running_pod(kube_stack, namespace, "web")
    with pytest.raises(ResizerError) as denied:
        resizer.delete_pod(namespace, "web", victim["metadata"]["uid"])
    assert POLICY_MESSAGE in refusal(denied.value)
    assert (
        kube_stack.client.get("Pod", "web", namespace=namespace)["metadata"]["uid"]
        == victim["metadata"]["uid"]
    )


def exclusive_pod(stack: Stack, namespace: str) -> Obj:
    """A running pod of an exclusive Job (the webhook placed it)."""
    job = make_job("train", namespace).indexed(2).template_annotation(TOPOLOGY_ANNOTATION, GKE_NODEPOOL_LABEL)
    stack.client.create(job.obj())
    wait_running(stack, namespace, 2)
    return stack.client.list("Pod", namespace=namespace)[0]


def test_the_resizer_marks_and_deletes_an_exclusive_pod(
    kube_stack: Stack, namespace: str, resizer: Kube
) -> None:
    pod = exclusive_pod(kube_stack, namespace)
    name, uid = pod["metadata"]["name"], pod["metadata"]["uid"]
    condition = violation_condition(f"{namespace}/train", "pool-x", "train-0", "pool-y", NOW)
    marked = resizer.patch_pod_status(namespace, name, {"status": {"conditions": [condition]}})
    assert [
        c["reason"] for c in marked["status"]["conditions"] if c["type"] == DISRUPTION_TARGET_CONDITION
    ] == [PLACEMENT_VIOLATION_REASON]
    with pytest.raises(ResizerError) as denied:  # the same pod's other conditions stay the kubelet's
        resizer.patch_pod_status(
            namespace, name, {"status": {"conditions": [{"type": "Ready", "status": "False"}]}}
        )
    assert POLICY_MESSAGE in refusal(denied.value)
    resizer.delete_pod(namespace, name, uid)
    eventually(
        lambda: (
            name not in {p["metadata"]["name"] for p in kube_stack.client.list("Pod", namespace=namespace)}
            or kube_stack.client.get("Pod", name, namespace=namespace)["metadata"]["uid"] != uid
        ),
        "the exclusive pod deleted",
        60,
        ignoring=(KubeError,),
    )


HOLD = {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}


def test_the_resizers_own_releases_and_resizes_go_through(kube_stack: Stack, namespace: str) -> None:
    """Gated followers released into their leader's domain (scheduling-gate: the nodes held tainted until
    every follower exists, gated) and shrunk Jobs resized (elastic), with the policies on: not one of the
    resizer's writes refused."""
    since = audit_log(kube_stack).mark()
    user = kube_cluster(kube_stack).identities["resizer"].username
    nodes = [node["metadata"]["name"] for node in kube_stack.client.list("Node")]
    set_taint(kube_stack, nodes, HOLD)
    try:
        kube_stack.client.create(
            exclusive_jobset(
                "gated", jobs=2, pods_per_job=3, strategy=Strategy.SCHEDULING_GATE, namespace=namespace
            )
        )
        eventually(
            lambda: (
                sum(
                    1
                    for p in kube_stack.client.list("Pod", namespace=namespace)
                    if p["spec"].get("schedulingGates")
                )
                == 4
            ),
            "every follower created gated",
            90,
            ignoring=(KubeError,),
        )
    finally:
        set_taint(kube_stack, nodes, None)
    kube_stack.client.create(
        exclusive_jobset("elastic", jobs=2, pods_per_job=3, strategy=Strategy.ELASTIC, namespace=namespace)
    )
    wait_running(kube_stack, namespace, 12)
    writes = [
        (r.verb, r.resource, r.code)
        for r in audit_log(kube_stack).requests(since=since)
        if r.user == user and r.verb in ("patch", "update", "delete")
    ]
    assert [w for w in writes if w[2] == 403] == []  # (a stale precondition's 409 or 422 is retried)
    assert ("patch", "pods", 200) in writes  # a follower released
    assert ("patch", "jobs", 200) in writes  # a Job resized
    jobs = kube_stack.client.list("Job", namespace=namespace)
    assert {
        j["metadata"]["labels"].get(RESIZE_LABEL) for j in jobs if j["metadata"]["name"].startswith("elastic")
    } == {RESIZE_DONE}


def test_the_policies_admit_the_resizers_release_of_a_large_pod(
    kube_stack: Stack, namespace: str, resizer: Kube
) -> None:
    """The policies compare the whole pod with its old copy: a pod of 4,000 env vars (about 250 KB) stays
    within their CEL cost budget, so its gate release passes."""
    env = [{"name": f"SETTING_{i}", "value": f"value-{i:06d}-" + "x" * 24} for i in range(1000)]
    big = make_pod("big-1", namespace).gated(LEADER_SCHEDULED_GATE).obj()
    big["spec"]["containers"] = [
        {"name": f"c{n}", "image": "registry.example/worker:1", "env": env} for n in range(4)
    ]
    kube_stack.client.create(big)
    release: list[Obj] = [
        {"op": "test", "path": "/spec/schedulingGates/0", "value": {"name": LEADER_SCHEDULED_GATE}},
        {"op": "add", "path": "/spec/nodeSelector", "value": {GKE_NODEPOOL_LABEL: "pool-0"}},
        {"op": "remove", "path": "/spec/schedulingGates/0"},
    ]
    released = resizer.patch_pod(namespace, "big-1", release)
    assert released["spec"]["nodeSelector"] == {GKE_NODEPOOL_LABEL: "pool-0"}
    assert "schedulingGates" not in released["spec"]
