"""A tenant's forgeries against kube-apiserver, with the chart's webhooks and ValidatingAdmissionPolicies.

The tenant is a ServiceAccount of the test's namespace bound to the built-in `edit` ClusterRole: it may
create and update Jobs there, as a team's CI would. kubesim runs no ValidatingAdmissionPolicy, so the
resize-keys policy's UPDATE half is only exercised here (its CEL is also evaluated in tests/chart).
Every other kube test that resizes a Job shows the other half: the resizer's own patches pass the policy.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from devstack.kube import Credentials, KubeClient, KubeError
from devstack.stack import Stack
from placement.constants import (
    JOBSET_JOB_KEY_LABEL,
    RESIZE_DONE,
    RESIZE_LABEL,
    RESIZE_PENDING,
    TARGET_COMPLETIONS_ANNOTATION,
    TARGET_PARALLELISM_ANNOTATION,
)
from tests.e2e.jobset_e2e_support import plain_job
from tests.kube.kube_support import kube_cluster
from tests.support.waiting import eventually

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-forgeries")]

Obj = dict[str, Any]
POLICY_MESSAGE = "can only be changed by the exclusive-placement resizer"


def tenant(stack: Stack, namespace: str) -> KubeClient:
    """A client as ServiceAccount `tenant` of `namespace`, allowed what `edit` allows there."""
    stack.client.create(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": "tenant"}}, namespace=namespace
    )
    stack.client.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": "tenant-edit"},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
            "subjects": [{"kind": "ServiceAccount", "name": "tenant", "namespace": namespace}],
        },
        namespace=namespace,
    )
    token = stack.client.request_token(namespace, "tenant", seconds=3600)
    ca_file = kube_cluster(stack).control_plane.ca_file
    return KubeClient(stack.client.server, credentials=Credentials(ca_file=ca_file, token=token))


def exclusive_job(name: str, namespace: str, pods: int, template_labels: dict[str, str] | None = None) -> Obj:
    job = plain_job(name, namespace, pods)
    job["spec"]["template"]["metadata"] = {"labels": dict(template_labels or {})}
    return job


def test_a_tenant_cannot_change_the_target_the_webhook_recorded(kube_stack: Stack, namespace: str) -> None:
    team = tenant(kube_stack, namespace)
    created = team.create(exclusive_job("train", namespace, 4), namespace=namespace)
    assert created["metadata"]["labels"][RESIZE_LABEL] == RESIZE_PENDING
    assert created["metadata"]["annotations"][TARGET_COMPLETIONS_ANNOTATION] == "4"
    forged = {
        "metadata": {
            "annotations": {TARGET_COMPLETIONS_ANNOTATION: "100000", TARGET_PARALLELISM_ANNOTATION: "100000"}
        }
    }

    def refused(dry_run: bool) -> str:
        try:
            team.patch("Job", "train", forged, namespace=namespace, dry_run=dry_run)
        except KubeError as err:
            return str(err) if err.status == 403 and POLICY_MESSAGE in str(err) else ""
        return ""

    # A new policy takes effect once kube-apiserver has loaded it: probe without storing anything.
    eventually(lambda: refused(dry_run=True), "the resize-keys policy in force", 60)
    assert refused(dry_run=False)
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
    victim_key = hashlib.sha1(b"team-b/victim", usedforsecurity=False).hexdigest()
    bait = exclusive_job("bait", namespace, 1, {JOBSET_JOB_KEY_LABEL: victim_key})
    with pytest.raises(KubeError) as denied:
        tenant(kube_stack, namespace).create(bait, namespace=namespace)
    assert denied.value.status == 403, denied.value
    assert JOBSET_JOB_KEY_LABEL in str(denied.value)
