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

import time
from collections.abc import Callable
from typing import Any

import pytest

from devstack.kube import KubeError
from devstack.stack import Stack
from placement.gang import parse_time
from tests.e2e.all_or_nothing_support import (
    JOBS,
    QUICK_TAKEOVER,
    all_or_nothing_jobset,
    create_gated,
    gated_leaders,
    released_leaders_of,
    run_to_completion,
)
from tests.e2e.jobset_e2e_support import Watch
from tests.kube.conftest import KubeStackFactory
from tests.kube.kube_support import SlowAdmission, with_run_time
from tests.support.metrics import resizer_metric
from tests.support.waiting import eventually

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
    with Watch(kube_stack, "Pod", namespace) as watch:
        for name in names:
            kube_stack.client.create(timed_jobset(3)(name, namespace))
        placement = run_to_completion(kube_stack, namespace, names, watch, timeout=120)
    assert placement.ungated_leaders_created == []
    assert {name: len(jobs) for name, jobs in placement.leaders_bound.items()} == dict.fromkeys(names, JOBS)
    assert placement.most_partial == 1
    assert placement.early_followers == []
    assert placement.deleted_leaders == []
    assert resizer_metric(kube_stack, "gang_admissions_total") - before["gang_admissions_total"] == len(names)
    assert (
        resizer_metric(kube_stack, "leader_releases_total") - before["leader_releases_total"]
        == len(names) * JOBS
    )
    assert resizer_metric(kube_stack, "gang_timeouts_total") == 0


def test_a_resizer_sigkilled_between_two_gate_removals_loses_and_doubles_nothing(
    kube_stack_factory: KubeStackFactory,
) -> None:
    stack = kube_stack_factory(resizer_replicas=0)
    namespace, names = "sigkill", ["a", "b"]
    stack.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    eventually(
        lambda: stack.client.get("ServiceAccount", "default", namespace=namespace),
        "the namespace's default ServiceAccount",
        30,
        ignoring=(KubeError,),
    )
    with Watch(stack, "Pod", namespace) as watch:
        # Pods run 15 s: the leader released before the kill still runs when the new resizer has taken the
        # Lease of the killed one over (QUICK_TAKEOVER: 3 s).
        create_gated(stack, namespace, names, make=timed_jobset(15))
        leaders_before = {
            pod["metadata"]["uid"] for name in names for pod in gated_leaders(stack, namespace, name)
        }
        with SlowAdmission(stack, namespace, delay=0.4):
            stack.add_resizer(QUICK_TAKEOVER)
            eventually(
                lambda: released_leaders_of(list(watch.events), "a"),
                "the resizer's first gate removal of JobSet a",
                30,
                interval=0.01,
            )
            killed_at = time.time()
            stack.resizers[0].kill()
        stack.restart_resizer(0, kill=True)
        placement = run_to_completion(stack, namespace, names, watch, timeout=120)
    events = list(watch.events)
    stamps = released_leaders_of(events, "a") | released_leaders_of(events, "b")
    assert set(stamps) == leaders_before  # the same pods released, none re-created
    assert all(len(times) == 1 for times in stamps.values()), stamps  # each gate removed once
    by_killed = sum(1 for times in stamps.values() if (parse_time(next(iter(times))) or 0) < killed_at)
    assert 0 < by_killed < JOBS, "the kill did not land mid-release"
    assert placement.deleted_leaders == []
    assert placement.most_partial == 1
    assert placement.early_followers == []
    assert resizer_metric(stack, "gang_timeouts_total") == 0
    assert resizer_metric(stack, "leader_releases_total") == 2 * JOBS - by_killed
    assert resizer_metric(stack, "gang_admissions_total") == 1  # b; a was finished, not admitted again
