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

from devstack.commands import RELEASE_NAMESPACE
from devstack.kube import KubeError
from devstack.stack import Stack
from placement.constants import RESIZE_PENDING
from tests.e2e.jobset_e2e_support import plain_job, set_taint
from tests.e2e.resize_forgery_support import (
    ABSURD_TARGET,
    FORGED_TARGET,
    exempt_job,
    honest_job_resized,
    leader_running,
    refusal_events,
    resize_keys,
    sizes,
    unadmitted_job,
)
from tests.support.metrics import resizer_metric
from tests.support.waiting import eventually

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-resize-forgeries")]

HOLD = {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}
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
    kube_stack.client.create(unadmitted_job("grow-me", namespace))
    eventually(
        lambda: leader_running(kube_stack, "grow-me", namespace),
        "its leader running",
        60,
        ignoring=(KubeError,),
    )
    with without_the_resize_keys_policy(kube_stack, namespace, "grow-me"):
        kube_stack.client.patch("Job", "grow-me", resize_keys(FORGED_TARGET), namespace=namespace)
        honest_job_resized(kube_stack, namespace)
    assert sizes(kube_stack, "grow-me", namespace) == (1, 1, RESIZE_PENDING)
    assert resizer_metric(kube_stack, "skips_total", reason="not-admitted") >= 1


def test_a_target_beyond_what_the_webhook_recorded_is_refused(kube_stack: Stack, namespace: str) -> None:
    nodes = [node["metadata"]["name"] for node in kube_stack.client.list("Node")]
    set_taint(kube_stack, nodes, HOLD)  # its leader binds only once the forged target is in place
    try:
        kube_stack.client.create(plain_job("absurd", namespace, 2))
        assert sizes(kube_stack, "absurd", namespace) == (1, 1, RESIZE_PENDING)
        with without_the_resize_keys_policy(kube_stack, namespace, "absurd"):
            kube_stack.client.patch("Job", "absurd", resize_keys(ABSURD_TARGET), namespace=namespace)
    finally:
        set_taint(kube_stack, nodes, None)
    eventually(
        lambda: leader_running(kube_stack, "absurd", namespace),
        "its leader running",
        60,
        ignoring=(KubeError,),
    )
    (event,) = eventually(
        lambda: refusal_events(kube_stack, "absurd", namespace), "the ResizeRefused Event", 30
    )
    assert (event["type"], event["action"]) == ("Warning", "Resize")
    assert "100000 is more than the 2 the Job webhook recorded" in event["message"]
    honest_job_resized(kube_stack, namespace)
    assert sizes(kube_stack, "absurd", namespace) == (1, 1, RESIZE_PENDING)
    assert len(refusal_events(kube_stack, "absurd", namespace)) == 1


def test_a_job_in_a_namespace_the_webhooks_are_exempt_from_is_left_alone(
    kube_stack: Stack, namespace: str
) -> None:
    kube_stack.client.create(exempt_job("exempt", RELEASE_NAMESPACE))
    try:
        eventually(
            lambda: leader_running(kube_stack, "exempt", RELEASE_NAMESPACE),
            "its leader running",
            60,
            ignoring=(KubeError,),
        )
        honest_job_resized(kube_stack, namespace)
        assert sizes(kube_stack, "exempt", RELEASE_NAMESPACE) == (1, 1, RESIZE_PENDING)
    finally:
        kube_stack.client.delete("Job", "exempt", namespace=RELEASE_NAMESPACE)
