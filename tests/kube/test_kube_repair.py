"""The resizer's repairs on the real control plane:

- a leader re-created in another domain: the followers still pinned (unbound) to the old one are marked
  DisruptionTarget (ExclusivePlacementViolation) and deleted; the real Job controller re-creates them,
  the webhook pins them to the new domain, and the Job runs whole there without failing;
- a running leader deleted: the real Job controller re-creates index 0; its pod affinity to its own Job's
  followers brings it back into the same domain, so nothing is repaired.
"""

from __future__ import annotations

from typing import Any

import pytest

from devstack.kube import KubeError
from devstack.stack import Stack
from tests.e2e.elastic_safety_support import (
    bound_leader,
    followers_pinned_where_a_re_created_leader_is_not_are_repaired,
    job_failed,
)
from tests.e2e.jobset_e2e_support import domains_by_job, plain_job, running_pods
from tests.kube.kube_support import resizer_stopped
from tests.support.metrics import resizer_metric
from tests.support.waiting import eventually

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-repair")]

Obj = dict[str, Any]


def test_followers_pinned_where_a_re_created_leader_is_not_are_repaired(
    kube_stack: Stack, namespace: str
) -> None:
    repairs_before = resizer_metric(kube_stack, "follower_repairs_total")
    followers_pinned_where_a_re_created_leader_is_not_are_repaired(
        kube_stack, namespace, without_resizer=resizer_stopped, ignoring=(KubeError,)
    )
    assert resizer_metric(kube_stack, "follower_repairs_total") - repairs_before == 2


def test_a_deleted_running_leader_comes_back_into_its_jobs_domain(kube_stack: Stack, namespace: str) -> None:
    repairs_before = resizer_metric(kube_stack, "follower_repairs_total")
    kube_stack.client.create(plain_job("stays", namespace, 4))
    eventually(lambda: running_pods(kube_stack, namespace) == 4, "4 pods running", 90, ignoring=(KubeError,))
    (pool,) = domains_by_job(kube_stack, namespace)["stays"]
    first = bound_leader(kube_stack, namespace)
    assert first is not None
    kube_stack.client.delete("Pod", first["metadata"]["name"], namespace=namespace)

    def replaced() -> Obj | None:
        current = bound_leader(kube_stack, namespace)
        if current is None or current["metadata"]["uid"] == first["metadata"]["uid"]:
            return None
        return current if running_pods(kube_stack, namespace) == 4 else None

    eventually(replaced, "a new leader running next to its followers", 90, ignoring=(KubeError,))
    assert domains_by_job(kube_stack, namespace)["stays"] == {pool}
    assert resizer_metric(kube_stack, "follower_repairs_total") == repairs_before
    assert not job_failed(kube_stack, namespace, "stays")
