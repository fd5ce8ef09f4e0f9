"""The policy path of pod admission on the real control plane (docs/webhook.md, "Two paths for pods").

On devstack's defaults kube-apiserver admits the pods of elastic and affinity Jobs with the chart's
MutatingAdmissionPolicies and ValidatingAdmissionPolicy: no call to the pod webhook (its own metric, by
webhook name), each Job whole in a pool of its own, every pod created once. The job key is the uid of the
pod's controller Job, for the Job controller's pods only; a Job of another namespace forging it is kept out
of the victim's domain, and a pod created directly goes to the webhook.
An elastic follower the API server cannot pin yet is created gated, and the resizer releases it.
The webhook keeps what needs a lookup (`gate`).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

import pytest

from devstack.controlplane.kwok import run_time_annotations
from devstack.stack import Stack
from kubekit.client import KubeError
from placement.constants import (
    GKE_NODEPOOL_LABEL,
    JOB_KEY_LABEL,
    LEADER_DOMAIN_ANNOTATION,
    LEADER_SCHEDULED_GATE,
    PIN_FOLLOWERS,
    PIN_FOLLOWERS_LABEL,
    PRIORITY_LABEL,
    RESIZE_DONE,
    RESIZE_LABEL,
    ROLE_LABEL,
    STRATEGY_ANNOTATION,
    Strategy,
)
from placement.objects import is_leader, node_name, uid_of
from tests.kube.kube_support import (
    audit_log,
    create_namespace,
    empty_namespace,
    pod_creates,
    resizer_stopped,
    webhook_admissions,
)
from tests.kube.workloads import JOBS, PODS, jobset_deleted, placed_jobset, plain_job, pods_of, set_taint
from tests.support import builders
from tests.support.metrics import resizer_metric
from tests.support.waiting import eventually

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-pod-policies")]

POD_WEBHOOKS = ("pods.mutate.exclusive-placement.io", "pods.validate.exclusive-placement.io")
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
JOB_CONTROLLER = "system:serviceaccount:kube-system:job-controller"
HOLD = {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}


def pod_webhook_calls(before: Counter[tuple[str, bool]], after: Counter[tuple[str, bool]]) -> int:
    return sum(after[(name, r)] - before[(name, r)] for name in POD_WEBHOOKS for r in (False, True))


def exclusive_pod(name: str, namespace: str, job: dict[str, Any], index: int) -> dict[str, Any]:
    """Pod `name` in `namespace`, created directly: completion `index` of `job` (its ownerReference),
    exclusive on node pools, with the labels of the Job's pod template, as the Job controller copies them
    (the follower shard the Job webhook wrote, `PIN_SHARD_LABEL`, among them)."""
    owner = builders.make_pod(name, namespace).owned_by(job["metadata"]["name"], uid_of(job))
    template_labels = ((job.get("spec") or {}).get("template") or {}).get("metadata", {}).get("labels") or {}
    for key, value in template_labels.items():
        owner = owner.label(key, value)
    return owner.index(index).topology(GKE_NODEPOOL_LABEL).obj()


def pool_of(stack: Stack, pod: dict[str, object]) -> str:
    node = stack.client.get("Node", str(node_name(pod)))
    return str(node["metadata"]["labels"][GKE_NODEPOOL_LABEL])


def test_on_defaults_an_exclusive_jobset_is_placed_and_resized_without_a_pod_webhook_call(
    kube_stack: Stack, namespace: str
) -> None:
    assert kube_stack.options.pod_admission_path == "policy"
    since, before = audit_log(kube_stack).mark(), webhook_admissions(kube_stack)
    pods = placed_jobset(kube_stack, namespace, Strategy.ELASTIC, hold_leaders_until=None, timeout=120)
    after = webhook_admissions(kube_stack)
    creates = pod_creates(kube_stack, namespace, since=since)
    assert pod_webhook_calls(before, after) == 0, {k: v for k, v in after.items() if k[0] in POD_WEBHOOKS}
    # A follower created before the API server's Job informer saw its resize is gated, not denied
    # (docs/webhook.md, "The race"): every pod is created once.
    assert creates == {201: JOBS * PODS}, creates
    jobs = {job["metadata"]["name"]: job for job in kube_stack.client.list("Job", namespace=namespace)}
    assert all(job["metadata"]["labels"][RESIZE_LABEL] == RESIZE_DONE for job in jobs.values())
    assert all(job["spec"]["completions"] == PODS for job in jobs.values())
    for pod in pods:
        owner = pod["metadata"]["ownerReferences"][0]
        labels = pod["metadata"]["labels"]
        assert labels[JOB_KEY_LABEL] == owner["uid"]
        assert labels[ROLE_LABEL] == ("leader" if is_leader(pod) else "follower")
        assert labels[PRIORITY_LABEL] == "0"
        domain = jobs[owner["name"]]["metadata"]["annotations"][LEADER_DOMAIN_ANNOTATION]
        if is_leader(pod):
            terms = pod["spec"]["affinity"]
            assert len(terms["podAffinity"][REQUIRED]) == 1
            assert len(terms["podAntiAffinity"][REQUIRED]) == 1  # one term: kube-scheduler requeues on it
        else:
            assert pod["spec"]["nodeSelector"][GKE_NODEPOOL_LABEL] == domain
        assert pool_of(kube_stack, pod) == domain
    jobset_deleted(kube_stack, namespace, Strategy.ELASTIC)


def test_a_gate_job_is_still_admitted_by_the_pod_webhook(kube_stack: Stack, namespace: str) -> None:
    """`gate` rejects followers until the leader binds: a live lookup, which stays a webhook call."""
    before = webhook_admissions(kube_stack)
    job = plain_job("gated", namespace, 2)
    job["metadata"]["annotations"][STRATEGY_ANNOTATION] = Strategy.GATE
    kube_stack.client.create(job, namespace=namespace)
    eventually(
        lambda: (
            sum(1 for p in pods_of(kube_stack, namespace) if p.get("status", {}).get("phase") == "Running")
            == 2
        ),
        "both pods of the gate Job running",
        120,
        ignoring=(KubeError,),
    )
    assert pod_webhook_calls(before, webhook_admissions(kube_stack)) >= 2


def test_an_elastic_follower_the_policies_cannot_pin_yet_is_created_gated_not_denied(
    kube_stack: Stack, namespace: str
) -> None:
    """Never denied, never mispinned: an elastic follower for which the follower policy finds no resized Job
    (here its Job is not resized, the resizer being stopped; on a live cluster, the API server's Job informer
    lagging behind the resize) is created, as the Job controller creates it, behind the leader-scheduled
    gate and unpinned. Its release by the resizer is the scheduling-gate strategy's (the same patch, through
    the resizer-pods policy: test_kube_strategies), decided in tests/resizer (also from the domain the
    resize recorded); this pod cannot wait for it: its Job, at size 1, gives index 1 up at its next sync."""
    with resizer_stopped(kube_stack):
        job = kube_stack.client.create(plain_job("early", namespace, 2), namespace=namespace)
        assert job["metadata"]["labels"][RESIZE_LABEL] == "pending"
        follower = exclusive_pod("early-1-x", namespace, job, 1)
        created = kube_stack.client.create(follower, namespace=namespace, as_user=JOB_CONTROLLER)
    assert created["spec"]["schedulingGates"] == [{"name": LEADER_SCHEDULED_GATE}]
    assert GKE_NODEPOOL_LABEL not in (created["spec"].get("nodeSelector") or {})
    assert created["metadata"]["labels"][JOB_KEY_LABEL] == uid_of(job)  # admitted by the policies


def probe_follower(stack: Stack, namespace: str, job: dict[str, Any], attempt: int) -> dict[str, Any]:
    """What the policies make of one more follower of `job` (index 1) created as the Job controller creates
    it; deleted again at once (the Job controller would drop the duplicate index anyway)."""
    name = f"{job['metadata']['name']}-1-probe-{attempt}"
    created = stack.client.create(
        exclusive_pod(name, namespace, job, 1), namespace=namespace, as_user=JOB_CONTROLLER
    )
    stack.client.delete("Pod", name, namespace=namespace)
    return created


def test_a_finished_elastic_job_leaves_the_follower_policys_params(kube_stack: Stack, namespace: str) -> None:
    """docs/webhook.md, "Two paths for pods": while it runs the resized Job is a param of the follower policy
    (labelled pin-followers in the resize patch) and its followers are pinned to the domain it records; once
    it finished the resizer removes the label (one patch), and a follower the policies admit for it now
    finds no param: it is gated, where before it was pinned. So kube-apiserver no longer evaluates the
    follower policy for the finished Job on every pod created in the namespace."""
    job = plain_job("brief", namespace, 3)
    pod_meta = job["spec"]["template"].setdefault("metadata", {})
    pod_meta["annotations"] = run_time_annotations(20)
    retired_before = resizer_metric(kube_stack, "pin_followers_retired_total")
    created = kube_stack.client.create(job, namespace=namespace)
    assert PIN_FOLLOWERS_LABEL not in created["metadata"]["labels"]  # set by the resize, not at admission

    def running_and_pinning() -> dict[str, Any] | None:
        current = kube_stack.client.get("Job", "brief", namespace=namespace)
        pinning = current["metadata"]["labels"].get(PIN_FOLLOWERS_LABEL) == PIN_FOLLOWERS
        running = [p for p in pods_of(kube_stack, namespace) if p.get("status", {}).get("phase") == "Running"]
        return current if pinning and len(running) == 3 else None

    resized = eventually(running_and_pinning, "the Job resized, labelled pin-followers, running", 90)
    assert resized["metadata"]["labels"][RESIZE_LABEL] == RESIZE_DONE
    domain = resized["metadata"]["annotations"][LEADER_DOMAIN_ANNOTATION]
    followers = [p for p in pods_of(kube_stack, namespace) if not is_leader(p)]
    assert len(followers) == 2
    for follower in followers:
        assert follower["spec"]["nodeSelector"][GKE_NODEPOOL_LABEL] == domain
    attempts = iter(range(100))
    pinned = eventually(
        lambda: (
            (probe := probe_follower(kube_stack, namespace, resized, next(attempts)))["spec"].get(
                "nodeSelector"
            )
            and probe
        ),
        "a follower pinned by the follower policy (the Job one of its params)",
        30,
    )
    assert pinned["spec"]["nodeSelector"] == {GKE_NODEPOOL_LABEL: domain}
    assert LEADER_SCHEDULED_GATE not in [g["name"] for g in pinned["spec"].get("schedulingGates") or []]

    def retired() -> dict[str, Any] | None:
        current = kube_stack.client.get("Job", "brief", namespace=namespace)
        finished = any(c["type"] == "Complete" for c in current.get("status", {}).get("conditions") or [])
        return current if finished and PIN_FOLLOWERS_LABEL not in current["metadata"]["labels"] else None

    done = eventually(retired, "the finished Job without its pin-followers label", 120)
    assert done["metadata"]["labels"][RESIZE_LABEL] == RESIZE_DONE  # the record stays
    assert done["metadata"]["annotations"][LEADER_DOMAIN_ANNOTATION] == domain
    assert resizer_metric(kube_stack, "pin_followers_retired_total") == retired_before + 1
    after = eventually(
        lambda: (
            (probe := probe_follower(kube_stack, namespace, done, next(attempts)))["spec"].get(
                "schedulingGates"
            )
            and probe
        ),
        "a follower the follower policy no longer pins (no param)",
        30,
    )
    assert after["spec"]["schedulingGates"] == [{"name": LEADER_SCHEDULED_GATE}]
    assert GKE_NODEPOOL_LABEL not in (after["spec"].get("nodeSelector") or {})


def test_a_pod_created_directly_with_another_namespaces_job_as_owner_is_denied_by_the_pod_webhook(
    kube_stack: Stack, namespace: str
) -> None:
    """Only the Job controller's pods are the policies' (keyed by their Job's uid): a leader created
    directly, its ownerReference copied from a Job of another namespace, goes to the pod webhook, which
    denies a Job's pod that the Job controller does not create."""
    victims = f"{namespace[:50]}-victims"
    create_namespace(kube_stack, victims)
    try:
        victim = kube_stack.client.create(plain_job("victim", victims, 1), namespace=victims)
        forged = exclusive_pod("victim-0-forged", namespace, victim, 0)
        before = webhook_admissions(kube_stack)
        with pytest.raises(KubeError, match="is not the Job controller") as denied:
            kube_stack.client.create(forged, namespace=namespace)
        assert denied.value.status == 403
        assert pod_webhook_calls(before, webhook_admissions(kube_stack)) == 1
        assert not [p for p in pods_of(kube_stack, namespace) if p["metadata"]["name"] == "victim-0-forged"]
    finally:
        empty_namespace(kube_stack, victims)


def test_a_job_of_another_namespace_forging_a_jobs_key_is_kept_out_of_its_domain(
    kube_stack: Stack, namespace: str
) -> None:
    """A Job in another namespace whose pod template carries the victim's key (its uid, on this path) gets
    its own Job's uid instead, and its leader's anti-affinity keeps it out of the victim's domain: with
    every pool but the victim's cordoned, it stays unscheduled instead of joining the victim's domain."""
    victim = kube_stack.client.create(plain_job("victim", namespace, 1), namespace=namespace)
    eventually(
        lambda: any(node_name(p) for p in pods_of(kube_stack, namespace)),
        "the victim's pod bound",
        120,
        ignoring=(KubeError,),
    )
    victim_pod = next(p for p in pods_of(kube_stack, namespace) if node_name(p))
    assert victim_pod["metadata"]["labels"][JOB_KEY_LABEL] == uid_of(victim)
    victim_pool = pool_of(kube_stack, victim_pod)
    elsewhere = [
        n["metadata"]["name"]
        for n in kube_stack.client.list("Node")
        if n["metadata"]["labels"][GKE_NODEPOOL_LABEL] != victim_pool
    ]
    forger_namespace = f"{namespace[:50]}-forger"
    create_namespace(kube_stack, forger_namespace)
    set_taint(kube_stack, elsewhere, HOLD)
    try:
        forger = plain_job("forger", forger_namespace, 1)
        forger["spec"]["template"]["metadata"] = {"labels": {JOB_KEY_LABEL: uid_of(victim)}}
        created = kube_stack.client.create(forger, namespace=forger_namespace)

        def unschedulable() -> bool:
            pods = pods_of(kube_stack, forger_namespace)
            conditions = [c for p in pods for c in p.get("status", {}).get("conditions") or []]
            return any(
                c.get("type") == "PodScheduled" and c.get("reason") == "Unschedulable" for c in conditions
            )

        eventually(unschedulable, "the forger's pod refused by the scheduler", 60, ignoring=(KubeError,))
        (pod,) = pods_of(kube_stack, forger_namespace)
        assert pod["metadata"]["labels"][JOB_KEY_LABEL] == uid_of(created)
        assert node_name(pod) is None
    finally:
        set_taint(kube_stack, elsewhere, None)
        empty_namespace(kube_stack, forger_namespace)
