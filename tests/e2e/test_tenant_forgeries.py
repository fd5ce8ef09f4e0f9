"""A tenant who may only create Jobs (or pods) in its own namespace, against another tenant's exclusive Job.

Each test replays one forgery of SECURITY.md's threat model through the API server, with the chart's
webhook configurations in front of it:

- a Job whose pod template carries JobSet's `jobset.sigs.k8s.io/job-key` of another namespace's Job (the
  webhook used to copy it into the leader's affinity key): denied, with a message naming the label;
- a pod labelled with another Job's `exclusive-placement.io/job-key`, running in a node pool of the
  attacker's choice: the other Job's leader is not pulled there (its affinity reaches its own namespace
  only);
- a Job carrying the resize label and target annotations this project writes: created without them, so the
  resizer never grows it.
"""

from __future__ import annotations

import hashlib
from typing import Any

import httpx
import pytest

from devstack.exclusivity import node_domains
from devstack.kube import KubeError
from devstack.scenario import ensure_namespace
from devstack.stack import Stack
from placement.constants import (
    GKE_NODEPOOL_LABEL,
    HOSTNAME_LABEL,
    JOB_KEY_LABEL,
    JOBSET_JOB_KEY_LABEL,
    RESIZE_DONE,
    RESIZE_LABEL,
    RESIZE_PENDING,
    ROLE_LABEL,
    ROLE_LEADER,
    TARGET_COMPLETIONS_ANNOTATION,
    TARGET_PARALLELISM_ANNOTATION,
    TOPOLOGY_ANNOTATION,
)
from tests.e2e.jobset_e2e_support import domains_by_job, plain_job
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e

Obj = dict[str, Any]
ATTACKER = "attacker"
VICTIM_NAMESPACE = "team-b"
VICTIM = "victim"
BAIT_POOL = "pool-03"


def jobset_key(namespace: str, job: str) -> str:
    """JobSet's job-key, written out independently of the code under test: sha1 of `<namespace>/<job>`."""
    return hashlib.sha1(f"{namespace}/{job}".encode(), usedforsecurity=False).hexdigest()


def indexed_job(
    name: str,
    namespace: str,
    pods: int,
    *,
    exclusive: bool = True,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    template_labels: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
) -> Obj:
    job = plain_job(name, namespace, pods)
    meta = job["metadata"]
    if not exclusive:
        del meta["annotations"][TOPOLOGY_ANNOTATION]
    meta["annotations"].update(annotations or {})
    meta["labels"] = dict(labels or {})
    template = job["spec"]["template"]
    template["metadata"] = {"labels": dict(template_labels or {})}
    if node_selector:
        template["spec"]["nodeSelector"] = node_selector
    return job


def bait_pod(name: str, node: str, key: str) -> Obj:
    """A plain pod (no topology annotation: no webhook sees it) carrying `key` as its job-key, pinned to
    `node`, with half the node's CPU requested: the node scores lowest for anyone not pulled to it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": ATTACKER, "labels": {JOB_KEY_LABEL: key}},
        "spec": {
            "nodeSelector": {HOSTNAME_LABEL: node},
            "containers": [
                {"name": "c", "image": "registry.example/c:1", "resources": {"requests": {"cpu": "104"}}}
            ],
        },
    }


def nodes_of_pool(stack: Stack, pool: str) -> list[str]:
    return sorted(
        name
        for name, domain in node_domains(stack.client.list("Node"), GKE_NODEPOOL_LABEL).items()
        if domain == pool
    )


def wait_running(stack: Stack, namespace: str, pods: int) -> None:
    def running() -> int:
        return sum(
            1
            for pod in stack.client.list("Pod", namespace=namespace)
            if pod.get("status", {}).get("phase") == "Running"
        )

    eventually(
        lambda: running() == pods, f"{pods} pods running in {namespace}", 90, ignoring=(httpx.HTTPError,)
    )


def test_a_job_carrying_another_namespaces_jobset_key_is_denied(stack: Stack) -> None:
    for namespace in (ATTACKER, VICTIM_NAMESPACE):
        ensure_namespace(stack.client, namespace)
    forged = indexed_job(
        "bait",
        ATTACKER,
        1,
        template_labels={JOBSET_JOB_KEY_LABEL: jobset_key(VICTIM_NAMESPACE, VICTIM)},
        node_selector={GKE_NODEPOOL_LABEL: BAIT_POOL},
    )
    with pytest.raises(KubeError) as denied:
        stack.client.create(forged)
    assert denied.value.status == 403, denied.value
    assert JOBSET_JOB_KEY_LABEL in str(denied.value)
    assert jobset_key(ATTACKER, "bait") in str(denied.value), "the message names the key it expected"

    stack.client.create(indexed_job(VICTIM, VICTIM_NAMESPACE, 4))
    wait_running(stack, VICTIM_NAMESPACE, 4)
    domains = domains_by_job(stack, VICTIM_NAMESPACE)
    assert len(domains[VICTIM]) == 1, domains
    assert stack.client.list("Job", namespace=ATTACKER) == []


def test_a_pod_carrying_another_jobs_key_does_not_pull_its_leader(stack: Stack) -> None:
    """Without the chart's opt-in job-key policy anyone who creates pods may set the label; the victim's
    leader must still not be pulled into the attacker's pool (JobSet's is: docs/jobset-parity.md)."""
    for namespace in (ATTACKER, VICTIM_NAMESPACE):
        ensure_namespace(stack.client, namespace)
    victim_key = jobset_key(VICTIM_NAMESPACE, VICTIM)
    bait_nodes = nodes_of_pool(stack, BAIT_POOL)
    assert len(bait_nodes) == 2, bait_nodes
    for index, node in enumerate(bait_nodes):
        stack.client.create(bait_pod(f"bait-{index}", node, victim_key))
    wait_running(stack, ATTACKER, len(bait_nodes))

    stack.client.create(indexed_job(VICTIM, VICTIM_NAMESPACE, 4))
    wait_running(stack, VICTIM_NAMESPACE, 4)
    domains = domains_by_job(stack, VICTIM_NAMESPACE)
    assert len(domains[VICTIM]) == 1, domains
    assert domains[VICTIM] != {BAIT_POOL}, f"the victim was pulled next to the attacker's pods: {domains}"
    leader = next(
        pod
        for pod in stack.client.list("Pod", namespace=VICTIM_NAMESPACE)
        if pod["metadata"]["labels"].get(ROLE_LABEL) == ROLE_LEADER
    )
    (term,) = leader["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert "namespaceSelector" not in term, term
    assert "namespaces" not in term, term


FORGED_TARGET = {TARGET_COMPLETIONS_ANNOTATION: "40", TARGET_PARALLELISM_ANNOTATION: "40"}


@pytest.mark.parametrize(
    "exclusive", [False, True], ids=["job-the-webhook-never-saw", "exclusive-job-with-a-forged-target"]
)
def test_a_job_carrying_forged_resize_keys_keeps_its_own_size(stack: Stack, exclusive: bool) -> None:
    ensure_namespace(stack.client, ATTACKER)
    forged = indexed_job(
        "grow-me",
        ATTACKER,
        1,
        exclusive=exclusive,
        labels={RESIZE_LABEL: RESIZE_PENDING},
        annotations=FORGED_TARGET,
    )
    created = stack.client.create(forged)
    assert RESIZE_LABEL not in created["metadata"].get("labels", {}), created["metadata"]
    assert not set(FORGED_TARGET) & set(created["metadata"].get("annotations", {})), created["metadata"]

    # A legitimate elastic Job created afterwards is resized: the resizer has run past the forged one.
    stack.client.create(indexed_job("honest", ATTACKER, 2))
    eventually(
        lambda: (
            stack.client.get("Job", "honest", namespace=ATTACKER)["metadata"]["labels"].get(RESIZE_LABEL)
            == RESIZE_DONE
        ),
        "the honest Job resized",
        90,
        ignoring=(httpx.HTTPError,),
    )
    after = stack.client.get("Job", "grow-me", namespace=ATTACKER)
    assert (after["spec"]["completions"], after["spec"]["parallelism"]) == (1, 1), after["spec"]
    assert RESIZE_LABEL not in after["metadata"].get("labels", {})
