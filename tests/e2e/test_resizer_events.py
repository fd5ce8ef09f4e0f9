"""The resizer's Events on kubesim, read as an operator reads them: `kubectl describe job` shows `Resized`
from `exclusive-placement.io/resizer`, and they cost one request per resized Job."""

from __future__ import annotations

import pytest

from devstack.manifests import exclusive_jobset
from devstack.scenario import wait_until_placed
from devstack.stack import Stack
from resizer.events import REPORTING_CONTROLLER
from tests.kubesim.kubectl_fixture import KUBECTL
from tests.support.describe import described_events

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.kubectl,
    pytest.mark.skipif(KUBECTL is None, reason="kubectl 1.33 is not installed on this machine"),
]

JOBS = 3
RESIZER = "external:exclusive-placement-resizer"


def test_kubectl_describe_job_shows_the_resize_and_each_job_costs_one_event_request(stack: Stack) -> None:
    assert KUBECTL is not None
    stack.client.reset_stats()
    stack.client.create(exclusive_jobset("train", jobs=JOBS, pods_per_job=4))
    placed = wait_until_placed(stack, "default", JOBS, timeout=90)
    pools = {status.job: status.domains for status in placed.statuses}
    for index in range(JOBS):
        job = f"train-w-{index}"
        (resized,) = [
            event
            for event in described_events(KUBECTL, stack.kubeconfig, "job", job, "default")
            if event.reason == "Resized"
        ]
        assert (resized.type, resized.source) == ("Normal", REPORTING_CONTROLLER)
        assert resized.message.startswith("resized from 1/1 to 4/4 (completions/parallelism): leader ")
        (pool,) = pools[f"default/{job}"]
        assert f"bound in cloud.google.com/gke-nodepool={pool} (node " in resized.message
    requests = stack.client.stats()["requests"]["by_client_verb_resource"][RESIZER]
    assert {verb: n for verb, n in requests.items() if verb.endswith(" events")} == {"create events": JOBS}
