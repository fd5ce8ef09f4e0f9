"""A tenant against the all-or-nothing queue, on the real control plane (issue #30's attacks 1-3).

The tenant is a ServiceAccount of its namespace whose Role allows create, get, list, watch, delete and patch
on jobs, pods and jobsets there, nothing else. The victim is an all-or-nothing JobSet of 2 elastic Jobs
(`backoffLimit: 0`, as in examples/) in another namespace, on 4 pools of 2 nodes. The resizer runs with a
15 s all-or-nothing timeout (and step-over bound), so the safety net fires within the test.

1. Bound pause pods labelled `exclusive-placement.io/role: leader`, pinned into 3 pools by nodeSelector and
   never seen by the webhook, hold nothing: the JobSet, which fits in the 4 pools, is released.
2. Plain Jobs whose pod templates carry the gang keys (`gang-queued-at` in 2000, `jobset-name` of no
   JobSet) are admitted without them: no forged gang heads the queue, the victim is released.
3. Pause pods labelled with a job key in 3 pools repel leaders through their anti-affinity: the queue counts
   those pools taken and never releases the victim into pools it cannot get, so nothing times out. Pods that
   fill 3 pools' GPUs are invisible to the queue: the victim is released, times out, and its Jobs are
   suspended, not its leaders deleted: the JobSet does not fail, and it runs once the pools are free.

Each test fails on the code before issue #30's fix (checked by running this module against it): the
victim stays gated (1, 2), is released into the taken pools and times out (3), and fails (the time-out).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devstack.manifests import exclusive_jobset
from devstack.stack import Stack
from kubekit.generic import GenericClient
from placement.constants import (
    ALL_OR_NOTHING_ANNOTATION,
    ALL_OR_NOTHING_GATE,
    ALL_OR_NOTHING_LABEL,
    GANG_QUEUED_AT_ANNOTATION,
    GANG_SIZE_ANNOTATION,
    GKE_NODEPOOL_LABEL,
    GPU_RESOURCE,
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOB_KEY_LABEL,
    JOBSET_NAME_LABEL,
    PRIORITY_LABEL,
    ROLE_LABEL,
    ROLE_LEADER,
    TOPOLOGY_ANNOTATION,
)
from placement.reserved import GANG_KEYS
from tests.kube.conftest import kube_options
from tests.kube.kube_support import (
    TENANT,
    TENANT_WORKLOADS,
    create_namespace,
    empty_namespace,
    tenant_client,
    with_run_time,
)
from tests.support.metrics import resizer_metric
from tests.support.waiting import eventually

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-queue-attacks")]

Obj = dict[str, Any]
TIMEOUT_SECONDS = 15
VICTIM = "team-b"
GPUS_PER_NODE = 8


@pytest.fixture(scope="module")
def kube_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The module's cluster, its resizer with a short all-or-nothing timeout (the `namespace` fixture's)."""
    workdir: Path = tmp_path_factory.mktemp("kube-queue-attacks")
    with Stack(kube_options(workdir, resizer_replicas=0)) as stack:
        stack.add_resizer(("--all-or-nothing-timeout-seconds", str(TIMEOUT_SECONDS)))
        yield stack


@pytest.fixture
def victim(kube_stack: Stack, namespace: str) -> Iterator[str]:
    """The victim's namespace, next to the tenant's (`namespace`): a new one per test (a deleted namespace
    lingers while it terminates)."""
    name = f"{VICTIM}-{namespace[-8:]}"
    create_namespace(kube_stack, name)
    yield name
    empty_namespace(kube_stack, name)


def tenant(stack: Stack, namespace: str) -> GenericClient:
    """A client as ServiceAccount `tenant` of `namespace`, with a Role on jobs, pods and jobsets there."""
    verbs = ["create", "get", "list", "watch", "delete", "patch"]
    stack.client.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": {"name": TENANT},
            "rules": [
                {"apiGroups": [group], "resources": [resource], "verbs": verbs}
                for group, resource in TENANT_WORKLOADS
            ],
        },
        namespace=namespace,
    )
    return tenant_client(stack, namespace, {"kind": "Role", "name": TENANT})


def pools(stack: Stack) -> list[str]:
    return sorted({node["metadata"]["labels"][GKE_NODEPOOL_LABEL] for node in stack.client.list("Node")})


def pause_pod(name: str, pool: str, labels: dict[str, str], gpus: int = 0) -> Obj:
    resources = {"requests": {GPU_RESOURCE: str(gpus)}, "limits": {GPU_RESOURCE: str(gpus)}} if gpus else {}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "nodeSelector": {GKE_NODEPOOL_LABEL: pool},
            "containers": [{"name": "pause", "image": "registry.example/pause:3", "resources": resources}],
        },
    }


def squat(stack: Stack, team: GenericClient, namespace: str, pods: list[Obj]) -> None:
    for pod in pods:
        team.create(pod, namespace=namespace)
    eventually(
        lambda: all(p["spec"].get("nodeName") for p in stack.client.list("Pod", namespace=namespace)),
        "the tenant's pods bound",
        60,
    )


def victim_jobset(namespace: str, run_seconds: float = 3600) -> Obj:
    jobset = exclusive_jobset("train", jobs=2, pods_per_job=2, gpus_per_pod=4, namespace=namespace)
    jobset["metadata"]["annotations"][ALL_OR_NOTHING_ANNOTATION] = "true"
    return with_run_time(jobset, run_seconds)


def leaders(stack: Stack, namespace: str) -> list[Obj]:
    return [
        pod
        for pod in stack.client.list("Pod", namespace=namespace, label_selector=f"{JOBSET_NAME_LABEL}=train")
        if pod["metadata"].get("annotations", {}).get(JOB_COMPLETION_INDEX_ANNOTATION) == "0"
        and not pod["metadata"].get("deletionTimestamp")
    ]


def gated(pod: Obj) -> bool:
    return {"name": ALL_OR_NOTHING_GATE} in (pod["spec"].get("schedulingGates") or [])


def all_bound(stack: Stack, namespace: str) -> bool:
    found = leaders(stack, namespace)
    return len(found) == 2 and all(not gated(pod) and pod["spec"].get("nodeName") for pod in found)


def failed(stack: Stack, namespace: str) -> list[str]:
    status = stack.client.get("JobSet", "train", namespace=namespace).get("status") or {}
    return [
        f"{c['type']}: {c.get('reason')} {c.get('message')}"
        for c in status.get("conditions") or []
        if c["type"] == "Failed" and c["status"] == "True"
    ]


def test_pods_labelled_leader_by_a_tenant_hold_no_domain(
    kube_stack: Stack, namespace: str, victim: str
) -> None:
    team = tenant(kube_stack, namespace)
    fake_leaders = [
        pause_pod(f"fake-leader-{i}", pool, {ROLE_LABEL: ROLE_LEADER})
        for i, pool in enumerate(pools(kube_stack)[:3])
    ]
    squat(kube_stack, team, namespace, fake_leaders)
    kube_stack.client.create(victim_jobset(victim), namespace=victim)
    assert eventually(lambda: all_bound(kube_stack, victim), "team-b's JobSet released and bound", 90)


def test_forged_gang_keys_are_removed_and_queue_no_one(
    kube_stack: Stack, namespace: str, victim: str
) -> None:
    team = tenant(kube_stack, namespace)
    # one pool taken by a pod the old queue counted: the forged head needs 4 of the 3 it saw free
    squat(
        kube_stack,
        team,
        namespace,
        [pause_pod("fake-leader", pools(kube_stack)[3], {ROLE_LABEL: ROLE_LEADER})],
    )
    forged = {
        ALL_OR_NOTHING_ANNOTATION: "true",
        GANG_SIZE_ANNOTATION: "4",
        GANG_QUEUED_AT_ANNOTATION: "2000-01-01T00:00:00Z",
        TOPOLOGY_ANNOTATION: GKE_NODEPOOL_LABEL,
    }
    for i in range(4):
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {
                "name": f"forged-{i}",
                "annotations": dict(forged),
                "labels": {ALL_OR_NOTHING_LABEL: "true"},
            },
            "spec": {
                "completionMode": "Indexed",
                "completions": 1,
                "parallelism": 1,
                "template": {
                    "metadata": {"annotations": dict(forged), "labels": {JOBSET_NAME_LABEL: "aaa-forged"}},
                    "spec": {
                        "restartPolicy": "Never",
                        "nodeSelector": {"example.com/nowhere": "true"},  # never binds, holds nothing
                        "containers": [{"name": "c", "image": "registry.example/worker:1"}],
                    },
                },
            },
        }
        admitted = team.create(job, namespace=namespace)
        template = admitted["spec"]["template"]["metadata"]
        for where in (admitted["metadata"], template):
            kept = set(where.get("annotations") or {}) | set(where.get("labels") or {})
            assert not kept & set(GANG_KEYS), where
    kube_stack.client.create(victim_jobset(victim), namespace=victim)
    assert eventually(lambda: all_bound(kube_stack, victim), "team-b's JobSet released and bound", 90)
    events = kube_stack.client.list("Event", namespace=namespace)
    assert [e for e in events if e["involvedObject"].get("name") == "aaa-forged"] == []


def events_about(stack: Stack, namespace: str, name: str, reason: str) -> list[Obj]:
    return [
        event
        for event in stack.client.list("Event", namespace=namespace)
        if event["involvedObject"].get("name") == name and event.get("reason") == reason
    ]


def test_pods_repelling_leaders_take_their_pools_in_the_queues_eyes(
    kube_stack: Stack, namespace: str, victim: str
) -> None:
    team = tenant(kube_stack, namespace)
    repelling = {JOB_KEY_LABEL: "x", PRIORITY_LABEL: "0"}
    squat(
        kube_stack,
        team,
        namespace,
        [pause_pod(f"repel-{i}", pool, repelling) for i, pool in enumerate(pools(kube_stack)[:3])],
    )
    timeouts = resizer_metric(kube_stack, "gang_timeouts_total")
    kube_stack.client.create(victim_jobset(victim), namespace=victim)
    assert eventually(lambda: len(leaders(kube_stack, victim)) == 2, "team-b's leaders created", 60)

    def decided() -> bool:
        waited = events_about(kube_stack, victim, "train", "AllOrNothingSteppedOver")
        return bool(waited) or not all(gated(pod) for pod in leaders(kube_stack, victim))

    # Either it waits past the bound (stepped over, with no one behind it) or it was released.
    assert eventually(decided, "team-b's JobSet waiting past the bound, or released", 90)
    assert [gated(pod) for pod in leaders(kube_stack, victim)] == [True, True], "released into taken pools"
    assert resizer_metric(kube_stack, "gang_timeouts_total") == timeouts
    for i in range(3):
        team.delete("Pod", f"repel-{i}", namespace=namespace)
    assert eventually(
        lambda: all_bound(kube_stack, victim), "team-b's JobSet placed once the pools are free", 90
    )


def test_a_time_out_does_not_fail_a_jobset_with_backoff_limit_zero(
    kube_stack: Stack, namespace: str, victim: str
) -> None:
    """Pods taking every GPU of 3 pools carry no job key: the queue cannot see them, releases the JobSet,
    one leader cannot bind, and the safety net fires."""
    team = tenant(kube_stack, namespace)
    taken = pools(kube_stack)[:3]
    fillers = [
        pause_pod(f"fill-{pool}-{n}", pool, {}, gpus=GPUS_PER_NODE) for pool in taken for n in range(2)
    ]
    squat(kube_stack, team, namespace, fillers)
    timeouts = resizer_metric(kube_stack, "gang_timeouts_total")
    kube_stack.client.create(victim_jobset(victim), namespace=victim)
    assert eventually(
        lambda: resizer_metric(kube_stack, "gang_timeouts_total") > timeouts,
        "the all-or-nothing time-out",
        120,
    )
    first = {pod["metadata"]["uid"] for pod in leaders(kube_stack, victim)}

    def requeued_or_failed() -> bool:
        again = [pod for pod in leaders(kube_stack, victim) if pod["metadata"]["uid"] not in first]
        return len(again) == 2 or bool(failed(kube_stack, victim))

    # The Jobs were suspended (the Job controller deleted their pods uncounted) and resumed by JobSet: new
    # leaders queue again; had the leaders been deleted, the Jobs would have failed, and the JobSet with them.
    assert eventually(requeued_or_failed, "team-b's JobSet queued again (or failed)", 90)
    assert failed(kube_stack, victim) == []
    assert [job["status"].get("failed", 0) for job in kube_stack.client.list("Job", namespace=victim)] == [
        0,
        0,
    ]
    assert events_about(kube_stack, victim, "train-w-0", "Suspended") or events_about(
        kube_stack, victim, "train-w-1", "Suspended"
    )
    for pod in fillers:
        team.delete("Pod", pod["metadata"]["name"], namespace=namespace)
    assert eventually(
        lambda: all_bound(kube_stack, victim), "team-b's JobSet placed once the pools are free", 120
    )
    assert failed(kube_stack, victim) == []
    assert [job["status"].get("failed", 0) for job in kube_stack.client.list("Job", namespace=victim)] == [
        0,
        0,
    ]
