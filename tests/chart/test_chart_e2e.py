"""End to end on kubesim with real processes: the chart's webhook configurations route every admission.

devstack's Stack registers the chart's own MutatingWebhookConfiguration / ValidatingWebhookConfiguration,
only their clientConfig pointed at the local webhook. kubesim evaluates their CEL matchConditions too. The
chart's ServiceAccounts and RBAC objects are installed into kubesim as rendered (kubesim stores them but does
not enforce RBAC, so test_chart_rbac_coverage checks that the grants cover every API call instead).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from certs.files import ca_bundle_b64
from devstack.commands import KubesimFlags
from devstack.manifests import exclusive_jobset
from devstack.scenario import ensure_namespace, wait_until_placed
from devstack.stack import Stack, StackOptions
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
from tests.chart.chart_rendering import NAMESPACE, Obj, render, webhooks
from tests.support.builders import make_job
from tests.support.waiting import eventually

pytestmark = pytest.mark.e2e

CLUSTER = KubesimFlags(nodes=10, pools=5, gpus_per_node=8, time_scale=0.05)
"""Five node pools: four for the JobSet, one left for the plain Job."""
WORKLOADS = "team-a"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    workdir: Path = tmp_path_factory.mktemp("chart-e2e")
    with Stack(StackOptions(cluster=CLUSTER, workdir=workdir, startup_timeout=90)) as running:
        yield running


def indexed_job(name: str, completions: int) -> Obj:
    job = make_job(name, None).indexed(completions)
    return job.template_annotation(JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION, GKE_NODEPOOL_LABEL).obj()


def pods_of(stack: Stack, namespace: str, job: str, count: int) -> list[Obj]:
    """The Job's pods once `count` exist (fails after 60 s)."""

    def created() -> list[Obj] | None:
        pods = stack.client.list("Pod", namespace=namespace, label_selector=f"{JOB_NAME_LABEL}={job}")
        return pods if len(pods) >= count else None

    pods = eventually(created, f"{count} pods of {namespace}/{job}", 60, interval=0.2)
    assert len(pods) == count
    return pods


def admission_calls(stack: Stack) -> int:
    calls: int = stack.client.stats()["admission"]["calls"]
    return calls


def without_client(webhook: dict[str, Any]) -> dict[str, Any]:
    return {key: value for key, value in webhook.items() if key != "clientConfig"}


def test_the_registered_configurations_are_the_charts(stack: Stack) -> None:
    chart = render(chart_values(ca_bundle_b64(stack.ca_file), stack.options.default_strategy))
    expected = {w["name"]: w for _, w in webhooks(chart)}
    registered = [
        w
        for kind in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration")
        for configuration in stack.client.list(kind)
        for w in configuration["webhooks"]
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


def test_the_charts_rbac_objects_install_as_rendered(stack: Stack) -> None:
    ensure_namespace(stack.client, NAMESPACE)
    chart = render(chart_values(ca_bundle_b64(stack.ca_file), stack.options.default_strategy))
    rbac = [o for o in chart if o["kind"] in RBAC_KINDS]
    assert {o["kind"] for o in rbac} >= {"ServiceAccount", "ClusterRole", "ClusterRoleBinding"}
    for obj in rbac:
        namespace = obj["metadata"].get("namespace")
        stack.client.create_or_replace(obj, namespace=namespace)
        stored = stack.client.get(obj["kind"], obj["metadata"]["name"], namespace=namespace)
        for field in ("rules", "roleRef", "subjects"):
            assert stored.get(field) == obj.get(field), (obj["kind"], obj["metadata"]["name"], field)


def test_pods_without_the_annotation_never_reach_the_webhooks(stack: Stack) -> None:
    ensure_namespace(stack.client, "team-c")
    before = admission_calls(stack)
    plain = indexed_job("plain", 2)
    del plain["spec"]["template"]["metadata"]
    created = stack.client.create(plain, namespace="team-c")
    assert created["spec"]["completions"] == 2
    pods = pods_of(stack, "team-c", "plain", 2)
    assert all(ROLE_LABEL not in p["metadata"].get("labels", {}) for p in pods)
    assert admission_calls(stack) == before, "the chart's matchConditions keep them away from the webhook"


def test_an_exclusive_jobset_is_shrunk_resized_and_placed(stack: Stack) -> None:
    ensure_namespace(stack.client, WORKLOADS)
    before = admission_calls(stack)
    stack.client.create(exclusive_jobset("train", jobs=4, pods_per_job=4, namespace=WORKLOADS))
    observation = wait_until_placed(stack, WORKLOADS, jobs=4, timeout=120)
    assert observation.problems == []
    jobs = stack.client.list("Job", namespace=WORKLOADS)
    assert len(jobs) == 4
    for job in jobs:
        assert job["metadata"]["annotations"][TARGET_COMPLETIONS_ANNOTATION] == "4"
        assert job["metadata"]["labels"][RESIZE_LABEL] == RESIZE_DONE
        assert job["spec"]["completions"] == 4
    assert admission_calls(stack) - before >= 4 + 16, "every Job and pod creation went through the webhooks"


def test_the_charts_job_webhook_shrinks_jobs_outside_the_release_namespace(stack: Stack) -> None:
    ensure_namespace(stack.client, "team-b")
    created = stack.client.create(indexed_job("shrunk", 3), namespace="team-b")
    assert created["spec"]["completions"] == 1
    assert created["metadata"]["annotations"][TARGET_COMPLETIONS_ANNOTATION] == "3"
    assert created["metadata"]["labels"][RESIZE_LABEL] == RESIZE_PENDING
    pods = pods_of(stack, "team-b", "shrunk", 3)
    assert {p["metadata"]["labels"][ROLE_LABEL] for p in pods} == {"leader", "follower"}


def test_the_release_namespace_never_reaches_the_webhooks(stack: Stack) -> None:
    ensure_namespace(stack.client, NAMESPACE)
    before = admission_calls(stack)
    created = stack.client.create(indexed_job("exempt", 3), namespace=NAMESPACE)
    assert created["spec"]["completions"] == 3
    assert TARGET_COMPLETIONS_ANNOTATION not in created["metadata"].get("annotations", {})
    pods = pods_of(stack, NAMESPACE, "exempt", 3)
    assert all(ROLE_LABEL not in p["metadata"].get("labels", {}) for p in pods)
    assert admission_calls(stack) == before
