"""All-or-nothing JobSets on the real control plane, JobSet's real controller creating their Jobs:

- three JobSets of 3 elastic Jobs on 4 pools: the webhook gates every leader, the resizer lets one JobSet's
  leaders go only when 3 pools are free, so at no moment do two JobSets each hold part of what they need;
  no follower binds before every leader of its JobSet has; all complete (kwok completes each pod after its
  run time);
- the resizer SIGKILLed between two of its gate removals: a validating webhook on pod updates answers each
  after 0.4 s (a slow admission chain, real kube-apiserver), so the three sequential gate removals take
  over a second; the process is killed as soon as the first shows on the watch. The restarted resizer
  finishes that release (each leader ungated exactly once, none deleted or re-created), then admits the
  second JobSet only once the first is done with its pools.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from devstack.stack import Stack
from tests.e2e.all_or_nothing_support import (
    JOBS,
    a_resizer_sigkilled_between_two_gate_removals_loses_and_doubles_nothing,
    all_or_nothing_jobset,
    all_or_nothing_jobsets_never_hold_part_of_the_domains_they_need,
)
from tests.kube.conftest import KubeStackFactory
from tests.kube.kube_support import SlowAdmission, create_namespace, with_run_time
from tests.support.metrics import resizer_metric

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-all-or-nothing")]

Obj = dict[str, Any]


def timed_jobset(seconds: float) -> Callable[[str, str], Obj]:
    """All-or-nothing JobSets whose pods complete `seconds` after they run."""

    def make(name: str, namespace: str) -> Obj:
        return with_run_time(all_or_nothing_jobset(name, namespace), seconds)

    return make


def test_all_or_nothing_jobsets_never_hold_part_of_the_domains_they_need(
    kube_stack: Stack, namespace: str
) -> None:
    names = ["a", "b", "c"]
    before = {
        name: resizer_metric(kube_stack, name) for name in ("gang_admissions_total", "leader_releases_total")
    }
    all_or_nothing_jobsets_never_hold_part_of_the_domains_they_need(
        kube_stack, namespace, names, make=timed_jobset(3), timeout=120
    )
    assert resizer_metric(kube_stack, "gang_admissions_total") - before["gang_admissions_total"] == len(names)
    assert (
        resizer_metric(kube_stack, "leader_releases_total") - before["leader_releases_total"]
        == len(names) * JOBS
    )
    assert resizer_metric(kube_stack, "gang_timeouts_total") == 0


def slow_admission(stack: Stack, namespace: str) -> SlowAdmission:
    """A validating webhook that answers each pod update in `namespace` after 0.4 s."""
    return SlowAdmission(stack, namespace, delay=0.4)


def test_a_resizer_sigkilled_between_two_gate_removals_loses_and_doubles_nothing(
    kube_stack_factory: KubeStackFactory,
) -> None:
    stack = kube_stack_factory(resizer_replicas=0)
    namespace = "sigkill"
    create_namespace(stack, namespace)
    # Pods run 15 s: the leader released before the kill still runs when the new resizer has taken the Lease
    # of the killed one over (QUICK_TAKEOVER: 3 s).
    a_resizer_sigkilled_between_two_gate_removals_loses_and_doubles_nothing(
        stack, namespace, slowing=slow_admission, make=timed_jobset(15), timeout=120
    )
