"""The resizer's own refusals of forged resize keys, on kubesim (SECURITY.md, "Only what the webhook admitted
is resized"). kubesim runs no ValidatingAdmissionPolicy, so keys added by an update reach the resizer as
they would in a cluster without the chart's resize-keys policy; the kube tier replays the same forgeries
(tests/kube/test_kube_resize_forgeries.py)."""

from __future__ import annotations

import pytest

from devstack.scenario import ensure_namespace
from devstack.stack import Stack
from tests.e2e.resize_forgery_support import (
    a_job_in_an_exempt_namespace_is_left_alone,
    an_absurd_target_is_refused,
    an_unadmitted_job_keeps_its_size,
    updates_unchecked,
)

pytestmark = pytest.mark.e2e

NS = "tenant"


def test_a_job_the_webhook_never_admitted_keeps_its_size_whatever_keys_it_is_given(stack: Stack) -> None:
    ensure_namespace(stack.client, NS)
    an_unadmitted_job_keeps_its_size(stack, NS, updates_unchecked)


def test_a_target_beyond_what_the_webhook_recorded_is_refused_once(stack: Stack) -> None:
    ensure_namespace(stack.client, NS)
    an_absurd_target_is_refused(stack, NS, updates_unchecked)
    log = stack.resizers[0].log_path.read_text()
    assert log.count("not resizing: invalid-target") == 1
    assert "Traceback" not in log


def test_a_job_in_a_namespace_the_webhooks_are_exempt_from_is_left_alone(stack: Stack) -> None:
    ensure_namespace(stack.client, NS)
    a_job_in_an_exempt_namespace_is_left_alone(stack, NS)
    assert "exempt=exclusive-placement,kube-system" in stack.resizers[0].log_path.read_text()
