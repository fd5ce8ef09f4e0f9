"""The resizer's own refusals of forged resize keys, on kubesim (SECURITY.md, "Only what the webhook admitted
is resized"). kubesim runs no ValidatingAdmissionPolicy, so keys added by an update reach the resizer as
they would in a cluster without the chart's resize-keys policy; the kube tier replays the same forgeries
(tests/kube/test_kube_resize_forgeries.py)."""

from __future__ import annotations

import pytest

from devstack.commands import RELEASE_NAMESPACE
from devstack.kube import KubeError
from devstack.scenario import ensure_namespace
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

pytestmark = pytest.mark.e2e

NS = "tenant"
HOLD = {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}


def test_a_job_the_webhook_never_admitted_keeps_its_size_whatever_keys_it_is_given(stack: Stack) -> None:
    ensure_namespace(stack.client, NS)
    stack.client.create(unadmitted_job("grow-me", NS))
    eventually(lambda: leader_running(stack, "grow-me", NS), "its leader running", 60, ignoring=(KubeError,))
    stack.client.patch("Job", "grow-me", resize_keys(FORGED_TARGET), namespace=NS)
    honest_job_resized(stack, NS)
    assert sizes(stack, "grow-me", NS) == (1, 1, RESIZE_PENDING)
    assert resizer_metric(stack, "skips_total", reason="not-admitted") >= 1  # it was looked at


def test_a_target_beyond_what_the_webhook_recorded_is_refused_with_one_event(stack: Stack) -> None:
    ensure_namespace(stack.client, NS)
    nodes = [node["metadata"]["name"] for node in stack.client.list("Node")]
    set_taint(stack, nodes, HOLD)  # its leader binds only once the forged target is in place
    stack.client.create(plain_job("absurd", NS, 2))
    assert sizes(stack, "absurd", NS) == (1, 1, RESIZE_PENDING)
    stack.client.patch("Job", "absurd", resize_keys(ABSURD_TARGET), namespace=NS)
    set_taint(stack, nodes, None)
    eventually(lambda: leader_running(stack, "absurd", NS), "its leader running", 60, ignoring=(KubeError,))
    (event,) = eventually(lambda: refusal_events(stack, "absurd", NS), "the ResizeRefused Event", 30)
    assert event["type"] == "Warning"
    assert "100000 is more than the 2 the Job webhook recorded" in event["message"]
    honest_job_resized(stack, NS)
    assert sizes(stack, "absurd", NS) == (1, 1, RESIZE_PENDING)
    assert len(refusal_events(stack, "absurd", NS)) == 1
    log = stack.resizers[0].log_path.read_text()
    assert log.count("not resizing: invalid-target") == 1
    assert "Traceback" not in log


def test_a_job_in_a_namespace_the_webhooks_are_exempt_from_is_left_alone(stack: Stack) -> None:
    stack.client.create(exempt_job("exempt", RELEASE_NAMESPACE))
    eventually(
        lambda: leader_running(stack, "exempt", RELEASE_NAMESPACE),
        "its leader running",
        60,
        ignoring=(KubeError,),
    )
    ensure_namespace(stack.client, NS)
    honest_job_resized(stack, NS)
    assert sizes(stack, "exempt", RELEASE_NAMESPACE) == (1, 1, RESIZE_PENDING)
    assert "exempt=exclusive-placement,kube-system" in stack.resizers[0].log_path.read_text()
