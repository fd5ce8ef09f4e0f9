"""Lifecycle faults end to end on the real control plane (kube-apiserver, kube-controller-manager's Job
controller, kube-scheduler, kwok, JobSet; the real webhook and resizer): a leader deleted or failed before
it binds, a Job deleted mid-resize (and recreated under the same name), a JobSet restart that recreates its
Jobs, and namespaces the webhook configuration exempts (kube-apiserver never calls the webhook for them)."""

from __future__ import annotations

import functools
from collections.abc import Iterator
from typing import Any

import pytest

from bench.soak import soak_job
from devstack.commands import RELEASE_NAMESPACE
from devstack.exclusivity import node_domains
from devstack.manifests import exclusive_jobset
from devstack.shape import ClusterShape
from devstack.stack import Stack
from placement.constants import (
    GKE_NODEPOOL_LABEL,
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOB_KEY_LABEL,
    JOBSET_RESTART_ATTEMPT_LABEL,
    RESIZE_DONE,
    RESIZE_LABEL,
    TOPOLOGY_ANNOTATION,
    Strategy,
)
from tests.kube.conftest import kube_options
from tests.kube.kube_support import create_namespace, empty_namespace, webhook_admissions
from tests.support.waiting import eventually

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("reliability-lifecycle")]

NS = "soak"  # soak_job's namespace
POOLS = 4
Obj = dict[str, Any]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    shape = ClusterShape(nodes=POOLS, pools=POOLS, gpus_per_node=8)
    with Stack(kube_options(tmp_path_factory.mktemp("lifecycle"), cluster=shape)) as running:
        yield running


@pytest.fixture
def stack(cluster: Stack) -> Iterator[Stack]:
    """The module's cluster with an empty `soak` namespace (every pool free), emptied again afterwards."""
    create_namespace(cluster, NS)
    yield cluster
    empty_namespace(cluster, NS)
    eventually(lambda: not _namespace_exists(cluster), f"namespace {NS} deleted", 120)


def _namespace_exists(stack: Stack) -> bool:
    return any(ns["metadata"]["name"] == NS for ns in stack.client.list("Namespace"))


def pods_of(stack: Stack, job: str, namespace: str = NS) -> list[Obj]:
    return stack.client.list("Pod", namespace=namespace, label_selector=f"batch.kubernetes.io/job-name={job}")


def leaders_of(stack: Stack, job: str) -> list[Obj]:
    return [
        p
        for p in pods_of(stack, job)
        if (p["metadata"].get("annotations") or {}).get(JOB_COMPLETION_INDEX_ANNOTATION) == "0"
    ]


def running_whole(stack: Stack, job: str, pods: int, namespace: str = NS) -> set[str] | None:
    """The domains of `job`'s running pods once all `pods` run (None before)."""
    domains = node_domains(stack.client.list("Node"), GKE_NODEPOOL_LABEL)
    running = [p for p in pods_of(stack, job, namespace) if p["status"].get("phase") == "Running"]
    if len(running) < pods:
        return None
    return {domains[p["spec"]["nodeName"]] for p in running}


def patch_status(stack: Stack, pod: Obj, status: Obj) -> None:
    """As a kubelet reports it (the admin's status patch; kwok leaves a terminal pod alone)."""
    meta = pod["metadata"]
    stack.client.patch(
        "Pod", meta["name"], {"status": status}, namespace=meta["namespace"], subresource="status"
    )


def fill_every_pool(stack: Stack) -> list[str]:
    blockers = [f"blocker-{i}" for i in range(POOLS)]
    for name in blockers:
        stack.client.create(soak_job(name, Strategy.ELASTIC, 2))
    for name in blockers:
        eventually(functools.partial(running_whole, stack, name, 2), f"{name} running", 60)
    return blockers


def test_leader_deleted_then_failed_before_binding(stack: Stack) -> None:
    blockers = fill_every_pool(stack)
    stack.client.create(soak_job("late", Strategy.ELASTIC, 3))
    first = eventually(lambda: leaders_of(stack, "late") or None, "the first leader", 60)[0]
    assert not first["spec"].get("nodeName")  # every pool is taken: it cannot bind

    stack.client.delete("Pod", first["metadata"]["name"], namespace=NS)
    second = eventually(
        lambda: (
            [p for p in leaders_of(stack, "late") if p["metadata"]["uid"] != first["metadata"]["uid"]] or None
        ),
        "a replacement leader",
        60,
    )[0]
    assert not second["spec"].get("nodeName")
    patch_status(stack, second, {"phase": "Failed", "reason": "Evicted"})
    uids = {first["metadata"]["uid"], second["metadata"]["uid"]}
    third = eventually(
        lambda: [p for p in leaders_of(stack, "late") if p["metadata"]["uid"] not in uids] or None,
        "a second replacement leader",
        60,
    )[0]
    job = stack.client.get("Job", "late", namespace=NS)
    assert job["spec"]["completions"] == 1  # still shrunk: nothing resized for an unbound leader
    assert (job["metadata"].get("labels") or {}).get(RESIZE_LABEL) != RESIZE_DONE

    stack.client.delete("Job", blockers[0], namespace=NS)  # a pool frees up
    domains = eventually(lambda: running_whole(stack, "late", 3), "late running whole", 90)
    assert len(domains) == 1
    job = stack.client.get("Job", "late", namespace=NS)
    assert job["metadata"]["generation"] == 2  # resized exactly once
    assert job["metadata"]["labels"][RESIZE_LABEL] == RESIZE_DONE
    leader_now = [p for p in leaders_of(stack, "late") if p["status"].get("phase") == "Running"]
    assert [p["metadata"]["uid"] for p in leader_now] == [third["metadata"]["uid"]]
    stack.check_alive()


def test_job_deleted_mid_resize_then_recreated(stack: Stack) -> None:
    rounds = 3
    for attempt in range(rounds):
        stack.client.create(soak_job("churn", Strategy.ELASTIC, 3))
        eventually(
            lambda: [p for p in leaders_of(stack, "churn") if p["spec"].get("nodeName")] or None,
            "the leader bound",
            60,
        )
        # The resizer is reacting to this bind right now: delete the Job under it. In the foreground: the
        # Job stays, terminating, until its pods are gone, so the Job controller sees the followers it was
        # creating while the Job is still there. Deleted in the background, it may not: kube-controller-
        # manager v1.36.3 keys its creation expectations by namespace/name, and a pod whose controller Job
        # is gone from its cache observes nothing (addPod), so a Job recreated under the same name at once
        # could wait out the expectations' 5-minute TTL for its first pod (docs/reliability.md).
        stack.client.delete("Job", "churn", namespace=NS, propagation="Foreground")
        eventually(
            lambda: (
                not stack.client.list("Job", namespace=NS, label_selector=None)
                and not pods_of(stack, "churn")
            ),
            f"round {attempt}: the Job and its pods gone",
            60,
        )
    stack.client.create(soak_job("churn", Strategy.ELASTIC, 3))
    domains = eventually(lambda: running_whole(stack, "churn", 3), "the recreated Job running whole", 60)
    assert len(domains) == 1
    job = stack.client.get("Job", "churn", namespace=NS)
    assert job["metadata"]["generation"] == 2
    stack.check_alive()  # the resizer survived every 404 / 409
    resizer_log = stack.resizers[0].log_path.read_text()
    assert "Traceback" not in resizer_log


def test_jobset_restart_recreates_jobs_that_are_placed_again(stack: Stack) -> None:
    jobset = exclusive_jobset("restarts", jobs=2, pods_per_job=2, strategy=Strategy.ELASTIC, namespace=NS)
    jobset["spec"]["failurePolicy"] = {"maxRestarts": 1}
    stack.client.create(jobset)
    names = ["restarts-w-0", "restarts-w-1"]
    for name in names:
        eventually(functools.partial(running_whole, stack, name, 2), f"{name} running", 60)
    old_uids = {stack.client.get("Job", n, namespace=NS)["metadata"]["uid"] for n in names}

    # A worker of the first Job fails (backoffLimit 0): the Job fails, the JobSet restarts all its Jobs.
    victim = next(p for p in pods_of(stack, names[0]) if p["status"].get("phase") == "Running")
    patch_status(stack, victim, {"phase": "Failed", "reason": "Error"})

    def restarted() -> list[Obj] | None:
        jobs = [j for j in stack.client.list("Job", namespace=NS) if j["metadata"]["name"] in names]
        fresh = [j for j in jobs if j["metadata"]["uid"] not in old_uids]
        return fresh if len(fresh) == len(names) else None

    fresh = eventually(restarted, "the Jobs recreated", 90)
    assert {j["metadata"]["labels"][JOBSET_RESTART_ATTEMPT_LABEL] for j in fresh} == {"1"}
    placed = [
        eventually(functools.partial(running_whole, stack, name, 2), f"{name} placed again", 90)
        for name in names
    ]
    assert all(len(d) == 1 for d in placed)
    assert placed[0] != placed[1]  # still exclusive
    for job in (stack.client.get("Job", n, namespace=NS) for n in names):
        assert job["metadata"]["uid"] not in old_uids
        assert job["metadata"]["generation"] == 2
        assert job["metadata"]["labels"][RESIZE_LABEL] == RESIZE_DONE
    stack.check_alive()


def project_admissions(stack: Stack) -> int:
    """Admissions kube-apiserver sent this project's webhooks so far (its own metric)."""
    project = {
        hook["name"]
        for configuration in stack.chart_objects
        if configuration.get("kind") in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for hook in configuration.get("webhooks") or []
    }
    return sum(count for (name, _), count in webhook_admissions(stack).items() if name in project)


@pytest.mark.parametrize("namespace", [RELEASE_NAMESPACE, "kube-system"])
def test_exempt_namespaces_never_reach_the_webhook(stack: Stack, namespace: str) -> None:
    before = project_admissions(stack)
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "annotated",
            "namespace": namespace,
            "annotations": {TOPOLOGY_ANNOTATION: GKE_NODEPOOL_LABEL, JOB_COMPLETION_INDEX_ANNOTATION: "0"},
        },
        "spec": {"containers": [{"name": "c", "image": "registry.example/c:1"}]},
    }
    created = stack.client.create(pod)
    assert JOB_KEY_LABEL not in (created["metadata"].get("labels") or {})
    assert "affinity" not in created["spec"]
    assert project_admissions(stack) == before
    stack.client.delete("Pod", "annotated", namespace=namespace)
