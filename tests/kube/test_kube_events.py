"""The resizer's Events on the real control plane: written through events.k8s.io/v1 under the chart's RBAC,
shown by `kubectl describe job` with their reporting controller, and what they cost, counted in
kube-apiserver's audit log: one create per Job (`Resized`, `FollowersReleased`), and at most one series
PATCH more when followers are released in more than one pass."""

from __future__ import annotations

from collections import Counter

import pytest

from devstack.controlplane.audit import Request
from devstack.manifests import exclusive_jobset
from devstack.stack import Stack
from kubekit.client import KubeError
from resizer.recorder import REPORTING_CONTROLLER, Reason
from tests.kube.kube_support import audit_log, wait_running
from tests.kube.workloads import set_taint
from tests.support.describe import described_events
from tests.support.kubectl import KUBECTL
from tests.support.waiting import eventually

pytestmark = [
    pytest.mark.kube,
    pytest.mark.xdist_group("kube-events"),
    pytest.mark.skipif(KUBECTL is None, reason="kubectl 1.33 is not installed on this machine"),
]

JOBS, PODS = 3, 4
HOLD = {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}
RESIZER_AGENT = "exclusive-placement-resizer"


def event_requests(requests: list[Request], namespace: str) -> Counter[tuple[str, int]]:
    """(verb, response code) -> the resizer's events.k8s.io requests about `namespace`'s objects."""
    return Counter(
        (request.verb, request.code)
        for request in requests
        if request.user_agent.startswith(RESIZER_AGENT)
        and (request.api_group, request.resource) == ("events.k8s.io", "events")
        and request.namespace == namespace
    )


def described(stack: Stack, namespace: str, job: str, reason: str) -> str:
    """The message of the one `reason` Event `kubectl describe job` shows, from the resizer."""
    assert KUBECTL is not None
    (event,) = [
        event
        for event in described_events(KUBECTL, stack.kubeconfig, "job", job, namespace)
        if event.reason == reason
    ]
    assert (event.type, event.source) == ("Normal", REPORTING_CONTROLLER)
    return event.message


def run(stack: Stack, namespace: str, strategy: str, *, gated_followers: bool = False) -> list[Request]:
    """A JobSet of JOBS x PODS until every pod runs (with every follower created gated first, if asked);
    the audit log's requests of the run."""
    nodes = [node["metadata"]["name"] for node in stack.client.list("Node")]
    since = audit_log(stack).mark()
    if gated_followers:
        set_taint(stack, nodes, HOLD)
    stack.client.create(
        exclusive_jobset("train", jobs=JOBS, pods_per_job=PODS, strategy=strategy, namespace=namespace)
    )
    if gated_followers:
        eventually(
            lambda: len(stack.client.list("Pod", namespace=namespace)) == JOBS * PODS,
            "every follower created (gated: their leaders are held by a taint)",
            90,
            ignoring=(KubeError,),
        )
        set_taint(stack, nodes, None)
    wait_running(stack, namespace, JOBS * PODS)
    return list(audit_log(stack).requests(since=since))


def test_describe_shows_resized_and_each_job_costs_one_event_create_and_one_per_release(
    kube_stack: Stack, namespace: str
) -> None:
    requests = run(kube_stack, namespace, "elastic")
    for index in range(JOBS):
        message = described(kube_stack, namespace, f"train-w-{index}", "Resized")
        assert message.startswith(f"resized from 1/1 to {PODS}/{PODS} (completions/parallelism): leader ")
        assert " bound in cloud.google.com/gke-nodepool=pool-" in message
    # A Job whose followers were created before kube-apiserver's Job informer saw its resize has them gated
    # and released by the resizer, with one FollowersReleased Event more (docs/webhook.md, "The race").
    released = {
        event["involvedObject"]["name"]
        for event in kube_stack.client.list("Event", namespace=namespace)
        if event.get("reason") == Reason.FOLLOWERS_RELEASED
    }
    assert event_requests(requests, namespace) == Counter({("create", 201): JOBS + len(released)})


def test_released_followers_cost_one_event_create_per_job(kube_stack: Stack, namespace: str) -> None:
    requests = run(kube_stack, namespace, "scheduling-gate", gated_followers=True)
    for index in range(JOBS):
        assert "gated followers into their leader's domain pool-" in described(
            kube_stack, namespace, f"train-w-{index}", "FollowersReleased"
        )
    counted = event_requests(requests, namespace)
    assert counted[("create", 201)] == JOBS
    assert counted[("patch", 200)] <= JOBS  # a series started when a Job's followers came in two passes
    assert counted.total() == counted[("create", 201)] + counted[("patch", 200)]
