"""The resizer's repairs on the real control plane:

- a leader re-created in another domain: the followers still pinned (unbound) to the old one are marked
  DisruptionTarget (ExclusivePlacementViolation) and deleted; the real Job controller re-creates them,
  the webhook pins them to the new domain, and the Job runs whole there without failing;
- a running leader deleted: the real Job controller re-creates index 0; its pod affinity to its own Job's
  followers brings it back into the same domain, so nothing is repaired.
"""

from __future__ import annotations

from typing import Any

import pytest

from devstack.exclusivity import node_domains
from devstack.kube import KubeError
from devstack.stack import Stack
from placement.constants import GKE_NODEPOOL_LABEL, JOB_COMPLETION_INDEX_ANNOTATION
from tests.e2e.jobset_e2e_support import Watch, domains_by_job, plain_job, pods_of, running_pods, set_taint
from tests.kube.kube_support import resizer_stopped
from tests.support.metrics import resizer_metric
from tests.support.waiting import eventually

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-repair")]

Obj = dict[str, Any]
FULL = {"key": "example.com/full", "value": "true", "effect": "NoSchedule"}


def leader(stack: Stack, namespace: str) -> Obj | None:
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


def test_followers_pinned_where_a_re_created_leader_is_not_are_repaired(
    kube_stack: Stack, namespace: str
) -> None:
    pools = node_domains(kube_stack.client.list("Node"), GKE_NODEPOOL_LABEL)
    repairs_before = resizer_metric(kube_stack, "follower_repairs_total")
    with resizer_stopped(kube_stack):
        kube_stack.client.create(plain_job("moves", namespace, 3))
        first = eventually(
            lambda: leader(kube_stack, namespace), "the first leader bound", 90, ignoring=(KubeError,)
        )
        old_pool = pools[first["spec"]["nodeName"]]
        # The old pool takes no new pod: the followers the resize creates stay Pending, pinned to it.
        old_nodes = [name for name, pool in pools.items() if pool == old_pool]
        set_taint(kube_stack, old_nodes, FULL)
    try:
        pinned = eventually(
            lambda: (
                [
                    p
                    for p in pods_of(kube_stack, namespace)
                    if (p["spec"].get("nodeSelector") or {}).get(GKE_NODEPOOL_LABEL)
                ]
                if len(pods_of(kube_stack, namespace)) == 3
                else None
            ),
            "the followers created, pinned to the old pool",
            90,
            ignoring=(KubeError,),
        )
        assert {p["spec"]["nodeSelector"][GKE_NODEPOOL_LABEL] for p in pinned} == {old_pool}
        with Watch(kube_stack, "Pod", namespace) as pods:
            kube_stack.client.delete("Pod", first["metadata"]["name"], namespace=namespace)
            eventually(
                lambda: running_pods(kube_stack, namespace) == 3,
                "the Job running whole again",
                90,
                ignoring=(KubeError,),
            )
    finally:
        set_taint(kube_stack, old_nodes, None)
    (new_pool,) = domains_by_job(kube_stack, namespace)["moves"]  # whole, in one pool
    assert new_pool != old_pool
    assert resizer_metric(kube_stack, "follower_repairs_total") - repairs_before == 2
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
    assert marked == repaired  # each repaired follower was marked before it was deleted
    assert not job_failed(kube_stack, namespace, "moves")


def test_a_deleted_running_leader_comes_back_into_its_jobs_domain(kube_stack: Stack, namespace: str) -> None:
    repairs_before = resizer_metric(kube_stack, "follower_repairs_total")
    kube_stack.client.create(plain_job("stays", namespace, 4))
    eventually(lambda: running_pods(kube_stack, namespace) == 4, "4 pods running", 90, ignoring=(KubeError,))
    (pool,) = domains_by_job(kube_stack, namespace)["stays"]
    first = leader(kube_stack, namespace)
    assert first is not None
    kube_stack.client.delete("Pod", first["metadata"]["name"], namespace=namespace)

    def replaced() -> Obj | None:
        current = leader(kube_stack, namespace)
        if current is None or current["metadata"]["uid"] == first["metadata"]["uid"]:
            return None
        return current if running_pods(kube_stack, namespace) == 4 else None

    eventually(replaced, "a new leader running next to its followers", 90, ignoring=(KubeError,))
    assert domains_by_job(kube_stack, namespace)["stays"] == {pool}
    assert resizer_metric(kube_stack, "follower_repairs_total") == repairs_before
    assert not job_failed(kube_stack, namespace, "stays")
