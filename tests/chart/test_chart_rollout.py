"""Upgrades and pod deletions without dropped admissions (docs/deploy.md, "Upgrades"): the webhook's preStop
sleep, its termination grace period and its rolling update; the resizer has no preStop hook."""

from __future__ import annotations

import helm_python
import pytest

from resizer.app import SHUTDOWN_GRACE
from tests.chart.chart_rendering import Obj, of_component, render
from webhook.server import GRACEFUL_SHUTDOWN_SECONDS

KUBERNETES_DEFAULT_GRACE_SECONDS = 30


def deployment(values: Obj, component: str) -> Obj:
    found: Obj = of_component(render(values), "Deployment", component)
    return found


def container(deployment: Obj) -> Obj:
    (only,) = deployment["spec"]["template"]["spec"]["containers"]
    found: Obj = only
    return found


def webhook_values(**webhook: object) -> Obj:
    return {"webhook": webhook}


def test_a_stopping_webhook_pod_sleeps_before_sigterm_within_its_grace_period() -> None:
    webhook = deployment({}, "webhook")
    sleep = container(webhook)["lifecycle"]["preStop"]["sleep"]["seconds"]
    grace = webhook["spec"]["template"]["spec"]["terminationGracePeriodSeconds"]
    assert (sleep, grace) == (5, 30)
    assert grace > sleep + GRACEFUL_SHUTDOWN_SECONDS


def test_the_rolling_update_starts_a_new_pod_before_it_stops_an_old_one() -> None:
    strategy = deployment({}, "webhook")["spec"]["strategy"]
    assert strategy == {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": 0, "maxSurge": 1}}
    assert of_component(render({}), "PodDisruptionBudget", "webhook")["spec"]["maxUnavailable"] == 1


def test_the_sleep_grace_period_and_surge_come_from_values() -> None:
    values = webhook_values(
        preStopSleepSeconds=12, terminationGracePeriodSeconds=45, rollingUpdate={"maxSurge": 2}
    )
    webhook = deployment(values, "webhook")
    assert container(webhook)["lifecycle"] == {"preStop": {"sleep": {"seconds": 12}}}
    assert webhook["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == 45
    assert webhook["spec"]["strategy"]["rollingUpdate"] == {"maxUnavailable": 0, "maxSurge": 2}


def test_a_zero_sleep_renders_no_prestop_hook() -> None:
    webhook = deployment(webhook_values(preStopSleepSeconds=0), "webhook")
    assert "lifecycle" not in container(webhook)


@pytest.mark.parametrize("sleep", [0, 5, 20])
def test_a_grace_period_not_above_the_sleep_and_the_graceful_shutdown_is_refused(sleep: int) -> None:
    least = sleep + GRACEFUL_SHUTDOWN_SECONDS
    with pytest.raises(helm_python.HelmRenderError) as refused:
        render(webhook_values(preStopSleepSeconds=sleep, terminationGracePeriodSeconds=least))
    message = str(refused.value)
    assert f"webhook.terminationGracePeriodSeconds ({least}) must be more than" in message
    assert (
        f"webhook.preStopSleepSeconds ({sleep}) plus the webhook's {GRACEFUL_SHUTDOWN_SECONDS} s" in message
    )
    rendered = deployment(
        webhook_values(preStopSleepSeconds=sleep, terminationGracePeriodSeconds=least + 1), "webhook"
    )
    assert rendered["spec"]["template"]["spec"]["terminationGracePeriodSeconds"] == least + 1


def test_the_resizer_has_no_prestop_hook_and_exits_well_within_the_default_grace_period() -> None:
    """Nothing reaches the resizer through a Service: on SIGTERM it hands its Lease back at once, and a
    sleep would only keep the Lease from a standby longer."""
    resizer = deployment({}, "resizer")
    assert "lifecycle" not in container(resizer)
    grace = resizer["spec"]["template"]["spec"].get("terminationGracePeriodSeconds")
    assert grace is None
    assert SHUTDOWN_GRACE < KUBERNETES_DEFAULT_GRACE_SECONDS
