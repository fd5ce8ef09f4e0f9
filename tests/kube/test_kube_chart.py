"""The chart's webhook configurations and RBAC on the real control plane: they route every admission.

devstack's Stack registers the chart's own MutatingWebhookConfiguration / ValidatingWebhookConfiguration,
only their clientConfig pointed at the local webhook, and installs the chart's ServiceAccounts and RBAC as
rendered (kube-apiserver enforces them: tests/kube/test_kube_rbac.py). kube-apiserver evaluates their CEL
matchConditions and namespace selectors; its own admission metric counts the calls each webhook got.
"""

from __future__ import annotations

from typing import Any

import pytest

from certs.files import ca_bundle_b64
from devstack.manifests import exclusive_jobset
from devstack.scenario import wait_until_placed
from devstack.stack import Stack
from devstack.webhooks import chart_values
from placement.constants import (
    GKE_NODEPOOL_LABEL,
    JOB_NAME_LABEL,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    RESIZE_DONE,
    RESIZE_LABEL,
    RESIZE_PENDING,
    ROLE_LABEL,
    TARGET_COMPLETIONS_ANNOTATION,
)
from tests.chart.chart_rendering import NAMESPACE, Obj, of_component, render, webhooks
from tests.kube.kube_support import webhook_admissions
from tests.support.builders import make_job
from tests.support.waiting import eventually

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-chart")]

PROJECT_WEBHOOKS = ".exclusive-placement.io"


def indexed_job(name: str, completions: int) -> Obj:
    job = make_job(name, None).indexed(completions)
    return job.template_annotation(JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION, GKE_NODEPOOL_LABEL).obj()


def pods_of(stack: Stack, namespace: str, job: str, count: int) -> list[Obj]:
    """The Job's pods once `count` exist (fails after 60 s)."""

    def created() -> list[Obj] | None:
        pods = stack.client.list("Pod", namespace=namespace, label_selector=f"{JOB_NAME_LABEL}={job}")
        return pods if len(pods) >= count else None

    pods = eventually(created, f"{count} pods of {namespace}/{job}", 90, interval=0.2)
    assert len(pods) == count
    return pods


def admission_calls(stack: Stack) -> int:
    """The calls kube-apiserver made to this project's webhooks so far."""
    return sum(
        count for (name, _), count in webhook_admissions(stack).items() if name.endswith(PROJECT_WEBHOOKS)
    )


def without_client(webhook: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in webhook.items() if key != "clientConfig"}


def test_the_registered_configurations_are_the_charts(kube_stack: Stack) -> None:
    stack = kube_stack
    chart = render(
        chart_values(
            ca_bundle_b64(stack.ca_file),
            stack.options.default_strategy,
            pod_admission=stack.options.pod_admission_path,
        )
    )
    expected = {w["name"]: w for _, w in webhooks(chart)}
    registered = [
        w
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for configuration in stack.client.list(kind)
        for w in configuration["webhooks"]
        if w["name"].endswith(PROJECT_WEBHOOKS)  # JobSet's own are registered too
    ]
    assert sorted(w["name"] for w in registered) == sorted(expected)
    for webhook in registered:
        chart_webhook = expected[webhook["name"]]
        assert {k: webhook.get(k) for k in without_client(chart_webhook)} == without_client(chart_webhook)
        assert (
            webhook["clientConfig"]["url"]
            == stack.webhook_url + chart_webhook["clientConfig"]["service"]["path"]
        )


RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding")


def test_the_charts_rbac_objects_are_installed_as_rendered(kube_stack: Stack) -> None:
    stack = kube_stack
    chart = render(
        chart_values(
            ca_bundle_b64(stack.ca_file),
            stack.options.default_strategy,
            pod_admission=stack.options.pod_admission_path,
        )
    )
    rbac = [o for o in chart if o["kind"] in RBAC_KINDS]
    assert {o["kind"] for o in rbac} >= {"ServiceAccount", "ClusterRole", "ClusterRoleBinding"}
    for obj in rbac:
        namespace = obj["metadata"].get("namespace")
        stored = stack.client.get(obj["kind"], obj["metadata"]["name"], namespace=namespace)
        for field in ("rules", "roleRef", "subjects"):
            assert stored.get(field) == obj.get(field), (obj["kind"], obj["metadata"]["name"], field)


def test_the_charts_deployments_pass_kube_apiservers_validation(kube_stack: Stack) -> None:
    """A server-side dry run of the rendered Deployments: kube-apiserver accepts the webhook's preStop sleep
    action within its termination grace period and the rolling update that never takes a pod down first."""
    chart = render({})
    path = f"/apis/apps/v1/namespaces/{NAMESPACE}/deployments"
    accepted = {
        component: kube_stack.client.transport.request(
            "POST", path, body=of_component(chart, "Deployment", component), query={"dryRun": "All"}
        )
        for component in ("webhook", "resizer")
    }
    webhook = accepted["webhook"]["spec"]
    assert webhook["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 1}
    pod = webhook["template"]["spec"]
    assert pod["containers"][0]["lifecycle"] == {"preStop": {"sleep": {"seconds": 5}}}
    assert pod["terminationGracePeriodSeconds"] == 30
    assert "lifecycle" not in accepted["resizer"]["spec"]["template"]["spec"]["containers"][0]
    assert kube_stack.client.transport.request("GET", path)["items"] == []  # a dry run stores nothing


def test_pods_without_the_annotation_never_reach_the_webhooks(kube_stack: Stack, namespace: str) -> None:
    stack = kube_stack
    before = admission_calls(stack)
    plain = indexed_job("plain", 2)
    del plain["spec"]["template"]["metadata"]
    created = stack.client.create(plain, namespace=namespace)
    assert created["spec"]["completions"] == 2
    pods = pods_of(stack, namespace, "plain", 2)
    assert all(ROLE_LABEL not in p["metadata"].get("labels", {}) for p in pods)
    assert admission_calls(stack) == before, "the chart's matchConditions keep them away from the webhook"


def test_an_exclusive_jobset_is_shrunk_resized_and_placed(kube_stack: Stack, namespace: str) -> None:
    stack = kube_stack
    before = admission_calls(stack)
    stack.client.create(exclusive_jobset("train", jobs=4, pods_per_job=4, namespace=namespace))
    observation = wait_until_placed(stack, namespace, jobs=4, timeout=120)
    assert observation.problems == []
    jobs = stack.client.list("Job", namespace=namespace)
    assert len(jobs) == 4
    for job in jobs:
        assert job["metadata"]["annotations"][TARGET_COMPLETIONS_ANNOTATION] == "4"
        assert job["metadata"]["labels"][RESIZE_LABEL] == RESIZE_DONE
        assert job["spec"]["completions"] == 4
    pods = stack.client.list("Pod", namespace=namespace)
    assert len(pods) == 16
    assert all(ROLE_LABEL in p["metadata"]["labels"] for p in pods), "every pod was admitted as exclusive"
    # Every Job creation goes through the Job webhook; pods too, unless the chart's pod policies admit them.
    pod_calls = 16 if stack.options.pod_admission_path == "webhook" else 0
    assert admission_calls(stack) - before >= 4 + pod_calls


def test_the_charts_job_webhook_shrinks_jobs_outside_the_release_namespace(
    kube_stack: Stack, namespace: str
) -> None:
    stack = kube_stack
    created = stack.client.create(indexed_job("shrunk", 3), namespace=namespace)
    assert created["spec"]["completions"] == 1
    assert created["metadata"]["annotations"][TARGET_COMPLETIONS_ANNOTATION] == "3"
    assert created["metadata"]["labels"][RESIZE_LABEL] == RESIZE_PENDING
    pods = pods_of(stack, namespace, "shrunk", 3)
    assert {p["metadata"]["labels"][ROLE_LABEL] for p in pods} == {"leader", "follower"}


def test_the_release_namespace_never_reaches_the_webhooks(kube_stack: Stack) -> None:
    stack = kube_stack
    before = admission_calls(stack)
    created = stack.client.create(indexed_job("exempt", 3), namespace=NAMESPACE)
    try:
        assert created["spec"]["completions"] == 3
        assert TARGET_COMPLETIONS_ANNOTATION not in created["metadata"].get("annotations", {})
        pods = pods_of(stack, NAMESPACE, "exempt", 3)
        assert all(ROLE_LABEL not in p["metadata"].get("labels", {}) for p in pods)
        assert admission_calls(stack) == before
    finally:
        stack.client.delete("Job", "exempt", namespace=NAMESPACE)
