"""A tenant's forgeries against kube-apiserver, with the chart's webhooks and ValidatingAdmissionPolicies
(SECURITY.md's threat model), and the forged resize keys the resizer itself must refuse.

The tenant is a ServiceAccount of the test's namespace bound to the built-in `edit` ClusterRole: it may
create and update Jobs there, as a team's CI would.

- it cannot change the target the Job webhook recorded (the chart's resize-keys policy denies the update;
  the resizer's own patch passes it), nor create a Job whose pod template carries JobSet's
  `jobset.sigs.k8s.io/job-key` of another namespace's Job (the webhook denies it, naming the label);
- a pod labelled with another Job's `exclusive-placement.io/job-key`, running in a node pool of the
  attacker's choice, does not pull the other Job's leader there (its affinity reaches its own namespace
  only);
- a Job created carrying the resize label and target annotations this project writes is created without
  them, so the resizer never grows it.

The resizer's own refusals ("Only what the webhook admitted is resized") are shown with the chart's
resize-keys policy taken away, as in a cluster without it (before 1.30, or
`webhook.resizeKeysPolicy.enabled=false`), so that only the resizer stands between a forged key and a grown
Job: keys on a Job the webhook never admitted, a target above what it recorded, and keys on a Job in a
namespace the webhooks are exempt from. Each forged Job's pods are labelled as leaders by its own
template, so the one with completion index 0 is a bound leader the resizer sees.
"""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Iterator
from typing import Any

import pytest

from devstack.commands import RELEASE_NAMESPACE
from devstack.exclusivity import node_domains
from devstack.stack import Stack
from devstack.webhooks import POD_ADMISSION_PATHS
from kubekit.client import KubeError
from kubekit.generic import GenericClient
from placement.constants import (
    GKE_NODEPOOL_LABEL,
    HOSTNAME_LABEL,
    JOB_KEY_LABEL,
    JOBSET_JOB_KEY_LABEL,
    PIN_FOLLOWERS,
    PIN_FOLLOWERS_LABEL,
    RESIZE_DONE,
    RESIZE_LABEL,
    RESIZE_PENDING,
    ROLE_LABEL,
    ROLE_LEADER,
    TARGET_COMPLETIONS_ANNOTATION,
    TARGET_PARALLELISM_ANNOTATION,
    TOPOLOGY_ANNOTATION,
)
from placement.objects import uid_of
from resizer.recorder import REPORTING_CONTROLLER
from tests.kube.conftest import stack_on_each_path
from tests.kube.kube_support import (
    create_namespace,
    empty_namespace,
    tenant_client,
    wait_running,
)
from tests.kube.workloads import domains_by_job, plain_job, set_taint
from tests.support import builders
from tests.support.metrics import resizer_metric
from tests.support.waiting import eventually

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-forgeries")]


@pytest.fixture(scope="module", params=POD_ADMISSION_PATHS)
def kube_stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """Each test on both paths of pod admission (the chart's pod policies, and the pod webhook)."""
    yield from stack_on_each_path(request, tmp_path_factory)


Obj = dict[str, Any]
POLICY = "exclusive-placement-resize-keys"
POLICY_MESSAGE = "can only be changed by the exclusive-placement resizer"
BAIT_POOL = "pool-03"


def jobset_key(namespace: str, job: str) -> str:
    """JobSet's job-key, written out independently of the code under test: sha1 of `<namespace>/<job>`."""
    return hashlib.sha1(f"{namespace}/{job}".encode(), usedforsecurity=False).hexdigest()


def tenant(stack: Stack, namespace: str) -> GenericClient:
    """A client as ServiceAccount `tenant` of `namespace`, allowed what `edit` allows there."""
    return tenant_client(
        stack, namespace, {"kind": "ClusterRole", "name": "edit"}, creates=[("", "pods"), ("batch", "jobs")]
    )


def exclusive_job(
    name: str,
    namespace: str,
    pods: int,
    *,
    exclusive: bool = True,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    template_labels: dict[str, str] | None = None,
) -> Obj:
    job = plain_job(name, namespace, pods)
    meta = job["metadata"]
    if not exclusive:
        del meta["annotations"][TOPOLOGY_ANNOTATION]
    meta["annotations"].update(annotations or {})
    meta["labels"] = dict(labels or {})
    job["spec"]["template"]["metadata"] = {"labels": dict(template_labels or {})}
    return job


def bait_pod(name: str, node: str, key: str) -> Obj:
    """A plain pod (no topology annotation: no webhook sees it) carrying `key` as its job-key, pinned to
    `node`, with half the node's CPU requested: the node scores lowest for anyone not pulled to it."""
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {JOB_KEY_LABEL: key}},
        "spec": {
            "nodeSelector": {HOSTNAME_LABEL: node},
            "containers": [
                {"name": "c", "image": "registry.example/c:1", "resources": {"requests": {"cpu": "104"}}}
            ],
        },
    }


def nodes_of_pool(stack: Stack, pool: str) -> list[str]:
    domains = node_domains(stack.client.list("Node"), GKE_NODEPOOL_LABEL)
    return sorted(name for name, domain in domains.items() if domain == pool)


@contextlib.contextmanager
def victim_namespace(stack: Stack, attacker: str) -> Iterator[str]:
    """Another tenant's namespace next to the attacker's, emptied and deleted after the block."""
    name = f"{attacker[:50]}-victim"
    create_namespace(stack, name)
    try:
        yield name
    finally:
        empty_namespace(stack, name)


@contextlib.contextmanager
def without_the_resize_keys_policy(stack: Stack, namespace: str, job: str) -> Iterator[None]:
    """The chart's resize-keys policy binding deleted for the block (kube-apiserver has unloaded it once a
    dry-run update of `job`'s keys passes), created again after it."""
    binding = stack.client.get("ValidatingAdmissionPolicyBinding", POLICY)
    stack.client.delete("ValidatingAdmissionPolicyBinding", POLICY)
    try:

        def update_allowed() -> bool:
            try:
                stack.client.patch("Job", job, resize_keys(FORGED_TARGET), namespace=namespace, dry_run=True)
            except KubeError as err:
                if err.status == 403:
                    return False
                raise
            return True

        eventually(update_allowed, "the resize-keys policy unloaded", 60)
        yield
    finally:
        stack.client.create(
            {key: value for key, value in binding.items() if key != "status"}
            | {"metadata": {"name": POLICY, "labels": binding["metadata"].get("labels", {})}}
        )


FORGED_TARGET = "40"
ABSURD_TARGET = "100000"
HOLD = {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}


def resize_keys(target: str) -> Obj:
    """A merge patch setting `resize: pending` and `target` as the Job webhook records them."""
    return {
        "metadata": {
            "labels": {RESIZE_LABEL: RESIZE_PENDING},
            "annotations": {TARGET_COMPLETIONS_ANNOTATION: target, TARGET_PARALLELISM_ANNOTATION: target},
        }
    }


def leaders_by_template(job: Obj) -> Obj:
    """`job` whose pods all carry the leader role label (its index 0 is then a leader to the resizer)."""
    job["spec"]["template"]["metadata"] = {"labels": {ROLE_LABEL: ROLE_LEADER}}
    return job


def unadmitted_job(name: str, namespace: str) -> Obj:
    """An Indexed Job of one pod without a topology annotation: the webhook never admits it as exclusive."""
    job = plain_job(name, namespace, 1)
    del job["metadata"]["annotations"][TOPOLOGY_ANNOTATION]
    return leaders_by_template(job)


def exempt_job(name: str, namespace: str) -> Obj:
    """An exclusive-looking Job of one pod carrying the resize keys from its creation, in a namespace the
    webhooks are exempt from (so nobody removes them)."""
    job = leaders_by_template(plain_job(name, namespace, 1))
    job["spec"]["template"]["metadata"]["annotations"] = {
        TOPOLOGY_ANNOTATION: job["metadata"]["annotations"][TOPOLOGY_ANNOTATION]
    }
    keys = resize_keys(FORGED_TARGET)["metadata"]
    job["metadata"]["labels"] = dict(keys["labels"])
    job["metadata"]["annotations"].update(keys["annotations"])
    return job


def sizes(stack: Stack, name: str, namespace: str) -> tuple[int, int, str | None]:
    job = stack.client.get("Job", name, namespace=namespace)
    return job["spec"]["completions"], job["spec"]["parallelism"], job["metadata"]["labels"].get(RESIZE_LABEL)


def leader_running(stack: Stack, job: str, namespace: str) -> bool:
    return any(
        pod["metadata"].get("labels", {}).get("batch.kubernetes.io/job-name") == job
        and pod.get("status", {}).get("phase") == "Running"
        for pod in stack.client.list("Pod", namespace=namespace)
    )


def honest_job_resized(stack: Stack, namespace: str) -> None:
    """An exclusive Job created now, resized: the resizer has worked past whatever came before it."""
    stack.client.create(plain_job("honest", namespace, 2))
    eventually(
        lambda: sizes(stack, "honest", namespace) == (2, 2, RESIZE_DONE),
        "the honest Job resized",
        90,
        ignoring=(KubeError,),
    )


def refusal_events(stack: Stack, job: str, namespace: str) -> list[Obj]:
    """The resizer's ResizeRefused Events about `job`, read as core/v1 Events (kubectl describe's view)."""
    return [
        event
        for event in stack.client.list("Event", namespace=namespace)
        if event.get("reportingComponent") == REPORTING_CONTROLLER
        and event.get("reason") == "ResizeRefused"
        and event["involvedObject"]["name"] == job
    ]


def running_leader(stack: Stack, job: str, namespace: str) -> None:
    eventually(
        lambda: leader_running(stack, job, namespace), f"{job}'s leader running", 60, ignoring=(KubeError,)
    )


def test_a_tenant_cannot_change_the_target_the_webhook_recorded(kube_stack: Stack, namespace: str) -> None:
    team = tenant(kube_stack, namespace)
    # Suspended until the forgeries are refused: a leader that bound first would let the resizer set
    # pin-followers itself, and the tenant's patch setting it again would change nothing to refuse.
    job = exclusive_job("train", namespace, 4)
    job["spec"]["suspend"] = True
    created = team.create(job, namespace=namespace)
    assert created["metadata"]["labels"][RESIZE_LABEL] == RESIZE_PENDING
    assert created["metadata"]["annotations"][TARGET_COMPLETIONS_ANNOTATION] == "4"
    forged = {
        "metadata": {
            "annotations": {TARGET_COMPLETIONS_ANNOTATION: "100000", TARGET_PARALLELISM_ANNOTATION: "100000"}
        }
    }

    # Adding pin-followers would make the Job a param of the follower policy (docs/webhook.md).
    pinning = {"metadata": {"labels": {PIN_FOLLOWERS_LABEL: PIN_FOLLOWERS}}}

    def refused(dry_run: bool, change: Obj = forged) -> str:
        try:
            team.patch("Job", "train", change, namespace=namespace, dry_run=dry_run)
        except KubeError as err:
            return str(err) if err.status == 403 and POLICY_MESSAGE in str(err) else ""
        return ""

    # A new policy takes effect once kube-apiserver has loaded it: probe without storing anything.
    eventually(lambda: refused(dry_run=True), "the resize-keys policy in force", 60)
    assert refused(dry_run=False)
    assert refused(dry_run=False, change=pinning)
    team.patch("Job", "train", {"spec": {"suspend": False}}, namespace=namespace)
    done = eventually(
        lambda: (
            kube_stack.client.get("Job", "train", namespace=namespace)["metadata"]["labels"].get(RESIZE_LABEL)
            == RESIZE_DONE
        ),
        "the resizer's own patch passing the policy",
        120,
    )
    assert done
    assert kube_stack.client.get("Job", "train", namespace=namespace)["spec"]["completions"] == 4


def test_a_tenant_cannot_create_a_job_with_another_namespaces_jobset_key(
    kube_stack: Stack, namespace: str
) -> None:
    bait = exclusive_job(
        "bait", namespace, 1, template_labels={JOBSET_JOB_KEY_LABEL: jobset_key("b", "victim")}
    )
    with pytest.raises(KubeError) as denied:
        tenant(kube_stack, namespace).create(bait, namespace=namespace)
    assert denied.value.status == 403, denied.value
    assert JOBSET_JOB_KEY_LABEL in str(denied.value)
    assert jobset_key(namespace, "bait") in str(denied.value), "the message names the key it expected"
    assert kube_stack.client.list("Job", namespace=namespace) == []


def test_a_pod_a_tenant_creates_for_its_own_suspended_job_is_denied(
    kube_stack: Stack, namespace: str
) -> None:
    """Issue 30, row 6: a leader created directly with a controller reference to the tenant's own suspended
    Job, pinned into a pool, was labelled by the webhook; the Job controller orphaned it (it is not one of
    the Job's pods: no controller-uid label) and its job-key label held the pool for good. Only the Job
    controller creates a Job's exclusive pods now."""
    team = tenant(kube_stack, namespace)
    job = exclusive_job("own", namespace, 2)
    job["spec"]["suspend"] = True
    own = team.create(job, namespace=namespace)
    squatter = builders.make_pod("own-0-squat", namespace).owned_by("own", uid_of(own)).index(0)
    pod = squatter.topology(GKE_NODEPOOL_LABEL, TOPOLOGY_ANNOTATION).obj()
    pod["spec"]["nodeSelector"] = {GKE_NODEPOOL_LABEL: BAIT_POOL}
    with pytest.raises(KubeError, match="is not the Job controller") as denied:
        team.create(pod, namespace=namespace)
    assert denied.value.status == 403, denied.value
    assert f"system:serviceaccount:{namespace}:tenant" in str(denied.value)
    assert kube_stack.client.list("Pod", namespace=namespace) == []


def test_a_pod_carrying_another_jobs_key_does_not_pull_its_leader(kube_stack: Stack, namespace: str) -> None:
    """Without the chart's opt-in job-key policy anyone who creates pods may set the label; the victim's
    leader must still not be pulled into the attacker's pool (JobSet's is: docs/jobset-parity.md)."""
    with victim_namespace(kube_stack, namespace) as victims:
        victim_key = jobset_key(victims, "victim")
        bait_nodes = nodes_of_pool(kube_stack, BAIT_POOL)
        assert len(bait_nodes) == 2, bait_nodes
        for index, node in enumerate(bait_nodes):
            kube_stack.client.create(bait_pod(f"bait-{index}", node, victim_key), namespace=namespace)
        wait_running(kube_stack, namespace, len(bait_nodes), "bait pods")

        kube_stack.client.create(plain_job("victim", victims, 4))
        wait_running(kube_stack, victims, 4, "victim pods")
        domains = domains_by_job(kube_stack, victims)
        assert len(domains["victim"]) == 1, domains
        assert domains["victim"] != {BAIT_POOL}, (
            f"the victim was pulled next to the attacker's pods: {domains}"
        )
        leader = next(
            pod
            for pod in kube_stack.client.list("Pod", namespace=victims)
            if pod["metadata"]["labels"].get(ROLE_LABEL) == ROLE_LEADER
        )
    (term,) = leader["spec"]["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert "namespaceSelector" not in term, term
    assert "namespaces" not in term, term


@pytest.mark.parametrize(
    "exclusive", [False, True], ids=["job-the-webhook-never-saw", "exclusive-job-with-a-forged-target"]
)
def test_a_job_created_with_forged_resize_keys_keeps_its_own_size(
    kube_stack: Stack, namespace: str, exclusive: bool
) -> None:
    forged = exclusive_job(
        "grow-me",
        namespace,
        1,
        exclusive=exclusive,
        labels={RESIZE_LABEL: RESIZE_PENDING, PIN_FOLLOWERS_LABEL: PIN_FOLLOWERS},
        annotations={TARGET_COMPLETIONS_ANNOTATION: "40", TARGET_PARALLELISM_ANNOTATION: "40"},
    )
    created = kube_stack.client.create(forged)
    meta = created["metadata"]
    assert not {RESIZE_LABEL, PIN_FOLLOWERS_LABEL} & set(meta.get("labels", {})), meta
    assert not {TARGET_COMPLETIONS_ANNOTATION, TARGET_PARALLELISM_ANNOTATION} & set(
        meta.get("annotations", {})
    ), meta

    honest_job_resized(kube_stack, namespace)  # the resizer has run past the forged one
    after = kube_stack.client.get("Job", "grow-me", namespace=namespace)
    assert (after["spec"]["completions"], after["spec"]["parallelism"]) == (1, 1), after["spec"]
    assert RESIZE_LABEL not in after["metadata"].get("labels", {})


def test_a_job_the_webhook_never_admitted_keeps_its_size(kube_stack: Stack, namespace: str) -> None:
    """`resize: pending` and a target of 40 on a Job the webhook never admitted, its leader bound."""
    stack = kube_stack
    stack.client.create(unadmitted_job("grow-me", namespace))
    running_leader(stack, "grow-me", namespace)
    with without_the_resize_keys_policy(stack, namespace, "grow-me"):
        stack.client.patch("Job", "grow-me", resize_keys(FORGED_TARGET), namespace=namespace)
        honest_job_resized(stack, namespace)
    assert sizes(stack, "grow-me", namespace) == (1, 1, RESIZE_PENDING)
    assert resizer_metric(stack, "skips_total", reason="not-admitted") >= 1  # it was looked at


def test_a_target_beyond_what_the_webhook_recorded_is_refused(kube_stack: Stack, namespace: str) -> None:
    """An admitted Job of 2 given a target of 100000 before its leader binds: it keeps its size, with one
    ResizeRefused Event."""
    stack = kube_stack
    nodes = [node["metadata"]["name"] for node in stack.client.list("Node")]
    set_taint(stack, nodes, HOLD)  # its leader binds only once the forged target is in place
    try:
        stack.client.create(plain_job("absurd", namespace, 2))
        assert sizes(stack, "absurd", namespace) == (1, 1, RESIZE_PENDING)
        with without_the_resize_keys_policy(stack, namespace, "absurd"):
            stack.client.patch("Job", "absurd", resize_keys(ABSURD_TARGET), namespace=namespace)
    finally:
        set_taint(stack, nodes, None)
    running_leader(stack, "absurd", namespace)
    (event,) = eventually(lambda: refusal_events(stack, "absurd", namespace), "the ResizeRefused Event", 30)
    assert event["type"] == "Warning"
    assert "100000 is more than the 2 the Job webhook recorded" in event["message"]
    honest_job_resized(stack, namespace)
    assert sizes(stack, "absurd", namespace) == (1, 1, RESIZE_PENDING)
    assert len(refusal_events(stack, "absurd", namespace)) == 1
    assert event["action"] == "Resize"


def test_a_job_in_a_namespace_the_webhooks_are_exempt_from_is_left_alone(
    kube_stack: Stack, namespace: str
) -> None:
    """Keys from its creation on a Job in the release namespace (the webhooks are exempt from it), its
    leader bound."""
    stack = kube_stack
    stack.client.create(exempt_job("exempt", RELEASE_NAMESPACE))
    try:
        running_leader(stack, "exempt", RELEASE_NAMESPACE)
        honest_job_resized(stack, namespace)
        assert sizes(stack, "exempt", RELEASE_NAMESPACE) == (1, 1, RESIZE_PENDING)
    finally:
        stack.client.delete("Job", "exempt", namespace=RELEASE_NAMESPACE)
