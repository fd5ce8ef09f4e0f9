"""The resizer's own refusals of forged resize keys on the real control plane, under the chart's RBAC.

kube-apiserver runs the chart's resize-keys ValidatingAdmissionPolicy, which denies any update of those keys
but the resizer's (tests/kube/test_kube_tenant_forgeries.py). Here it is taken away, as in a cluster
without it (before 1.30, or `webhook.resizeKeysPolicy.enabled=false`), so that only the resizer stands
between a forged key and a grown Job: the same forgeries as on kubesim (tests/e2e/test_resize_forgeries.py).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator

import pytest

from devstack.kube import KubeError
from devstack.stack import Stack
from tests.e2e.resize_forgery_support import (
    FORGED_TARGET,
    a_job_in_an_exempt_namespace_is_left_alone,
    an_absurd_target_is_refused,
    an_unadmitted_job_keeps_its_size,
    resize_keys,
)
from tests.support.waiting import eventually

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-resize-forgeries")]

POLICY = "exclusive-placement-resize-keys"


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


def test_a_job_the_webhook_never_admitted_keeps_its_size(kube_stack: Stack, namespace: str) -> None:
    an_unadmitted_job_keeps_its_size(kube_stack, namespace, without_the_resize_keys_policy)


def test_a_target_beyond_what_the_webhook_recorded_is_refused(kube_stack: Stack, namespace: str) -> None:
    event = an_absurd_target_is_refused(kube_stack, namespace, without_the_resize_keys_policy)
    assert event["action"] == "Resize"


def test_a_job_in_a_namespace_the_webhooks_are_exempt_from_is_left_alone(
    kube_stack: Stack, namespace: str
) -> None:
    a_job_in_an_exempt_namespace_is_left_alone(kube_stack, namespace)
