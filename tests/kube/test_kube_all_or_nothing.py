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

A reservation that cannot bind times out by suspending its Jobs: tests/kube/test_kube_queue_attacks.py.
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from typing import Any

import pytest

from devstack.manifests import exclusive_jobset
from devstack.stack import Stack
from kubekit.client import KubeError
from placement.constants import (
    ALL_OR_NOTHING_ANNOTATION,
    ALL_OR_NOTHING_GATE,
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOBSET_NAME_LABEL,
    RELEASED_AT_ANNOTATION,
)
from placement.gang import parse_time
from tests.kube.conftest import KubeStackFactory
from tests.kube.kube_support import SlowAdmission, create_namespace, with_run_time
from tests.kube.workloads import Watch, pods_of
from tests.support.metrics import resizer_metric
from tests.support.waiting import eventually

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-all-or-nothing")]

Obj = dict[str, Any]
JOBS = 3
QUICK_TAKEOVER = (
    *("--lease-duration-seconds", "3"),
    *("--renew-deadline-seconds", "2"),
    *("--retry-period-seconds", "0.4"),
)
"""Election timings for a resizer that is SIGKILLed and started again: the Lease of its dead self expires 3 s
after its first look, not 15 s, while its renewals still outlast API requests slowed to 0.45 s."""
RUN_SECONDS = 3.0
"""How long each pod runs (kwok's pod-complete Stage) unless a test says otherwise."""


def all_or_nothing_jobset(name: str, namespace: str, run_seconds: float = RUN_SECONDS) -> Obj:
    """3 elastic Jobs of 2 four-GPU pods, each pod completing `run_seconds` after it runs."""
    jobset = exclusive_jobset(name, jobs=JOBS, pods_per_job=2, gpus_per_pod=4, namespace=namespace)
    jobset["metadata"]["annotations"][ALL_OR_NOTHING_ANNOTATION] = "true"
    return with_run_time(jobset, run_seconds)


class Placement:
    """Replays the pod watch in order: which Jobs' leaders and followers of each JobSet ever bound, and the
    most JobSets ever seen partly placed (some but not all of their Jobs' leaders bound) at one moment."""

    def __init__(self) -> None:
        self.leaders_bound: dict[str, set[str]] = defaultdict(set)
        self.most_partial = 0
        self.early_followers: list[str] = []
        self.ungated_leaders_created: list[str] = []
        self.deleted_leaders: list[str] = []

    def replay(self, events: list[tuple[str, Obj]]) -> None:
        for kind, pod in events:
            meta = pod["metadata"]
            jobset = meta["labels"][JOBSET_NAME_LABEL]
            job = meta["ownerReferences"][0]["name"]
            leader = meta["annotations"][JOB_COMPLETION_INDEX_ANNOTATION] == "0"
            if (
                leader
                and kind == "ADDED"
                and {"name": ALL_OR_NOTHING_GATE} not in (pod["spec"].get("schedulingGates") or [])
            ):
                self.ungated_leaders_created.append(meta["name"])
            if leader and kind == "DELETED" and pod["status"].get("phase") != "Succeeded":
                self.deleted_leaders.append(meta["name"])
            if pod["spec"].get("nodeName"):
                if leader:
                    self.leaders_bound[jobset].add(job)
                elif len(self.leaders_bound[jobset]) < JOBS:
                    self.early_followers.append(meta["name"])
            partial = sum(1 for jobs in self.leaders_bound.values() if 0 < len(jobs) < JOBS)
            self.most_partial = max(self.most_partial, partial)


def completed(stack: Stack, namespace: str, names: list[str]) -> bool:
    for name in names:
        conditions = stack.client.get("JobSet", name, namespace=namespace).get("status", {}).get("conditions")
        if not any(c["type"] == "Completed" and c["status"] == "True" for c in conditions or []):
            return False
    return True


def run_to_completion(
    stack: Stack, namespace: str, names: list[str], watch: Watch, timeout: float = 120
) -> Placement:
    eventually(
        lambda: completed(stack, namespace, names),
        "every JobSet completed",
        timeout,
        ignoring=(KubeError,),
    )
    stack.check_alive()
    placement = Placement()
    placement.replay(list(watch.events))
    return placement


def gated_leaders(stack: Stack, namespace: str, jobset: str) -> list[Obj]:
    return [
        pod
        for pod in pods_of(stack, namespace)
        if pod["metadata"]["labels"][JOBSET_NAME_LABEL] == jobset
        and pod["metadata"]["annotations"][JOB_COMPLETION_INDEX_ANNOTATION] == "0"
        and {"name": ALL_OR_NOTHING_GATE} in (pod["spec"].get("schedulingGates") or [])
    ]


def all_gated(stack: Stack, namespace: str, jobset: str) -> Callable[[], bool]:
    return lambda: len(gated_leaders(stack, namespace, jobset)) == JOBS


def create_gated(stack: Stack, namespace: str, names: list[str], run_seconds: float) -> None:
    """Create the all-or-nothing JobSets one by one, each once its leaders exist, gated (no resizer runs)."""
    for name in names:
        stack.client.create(all_or_nothing_jobset(name, namespace, run_seconds))
        eventually(
            all_gated(stack, namespace, name),
            f"the {JOBS} leaders of {name} created, gated",
            30,
            ignoring=(KubeError,),
        )


def released_leaders_of(events: list[tuple[str, Obj]], jobset: str) -> dict[str, set[str]]:
    """Leader uid -> every released-at stamp the watch showed on it (one per gate removal)."""
    stamps: dict[str, set[str]] = defaultdict(set)
    for _kind, pod in events:
        meta = pod["metadata"]
        stamp = meta["annotations"].get(RELEASED_AT_ANNOTATION)
        if meta["labels"][JOBSET_NAME_LABEL] == jobset and stamp is not None:
            stamps[meta["uid"]].add(stamp)
    return dict(stamps)


def assert_released_whole(placement: Placement) -> None:
    """No leader deleted, at most one JobSet partly placed at any moment, no follower bound before every
    leader of its JobSet had."""
    assert placement.deleted_leaders == []
    assert placement.most_partial == 1
    assert placement.early_followers == []


def test_all_or_nothing_jobsets_never_hold_part_of_the_domains_they_need(
    kube_stack: Stack, namespace: str
) -> None:
    """The JobSets created at once, run to completion: every leader created gated, every Job of each JobSet
    released, one JobSet at a time."""
    names = ["a", "b", "c"]
    before = {
        name: resizer_metric(kube_stack, name) for name in ("gang_admissions_total", "leader_releases_total")
    }
    with Watch(kube_stack, "Pod", namespace) as watch:
        for name in names:
            kube_stack.client.create(all_or_nothing_jobset(name, namespace))
        placement = run_to_completion(kube_stack, namespace, names, watch)
    assert placement.ungated_leaders_created == []
    assert {name: len(jobs) for name, jobs in placement.leaders_bound.items()} == dict.fromkeys(names, JOBS)
    assert_released_whole(placement)
    assert resizer_metric(kube_stack, "gang_admissions_total") - before["gang_admissions_total"] == len(names)
    assert (
        resizer_metric(kube_stack, "leader_releases_total") - before["leader_releases_total"]
        == len(names) * JOBS
    )
    assert resizer_metric(kube_stack, "gang_timeouts_total") == 0


@pytest.mark.timeout(480)
def test_a_resizer_sigkilled_between_two_gate_removals_loses_and_doubles_nothing(
    kube_stack_factory: KubeStackFactory,
) -> None:
    """JobSets a and b created gated on a stack with no resizer; one started with QUICK_TAKEOVER while every
    pod update in the namespace takes 0.4 s (its three sequential gate removals of a take over a second) and
    SIGKILLed as soon as the first shows on the watch, then started again. The restarted resizer finishes
    that release once the Lease of the killed one expires, then admits b only once a is done with its
    pools. Pods run 40 s: the leader released before the kill still runs when the new resizer has taken
    over, even on a loaded machine where starting it takes over 15 s (with 15 s, a's first Job was done by
    then and a queued again for its other two: admitted twice)."""
    stack = kube_stack_factory(resizer_replicas=0)
    namespace, names = "sigkill", ["a", "b"]
    create_namespace(stack, namespace)
    with Watch(stack, "Pod", namespace) as watch:
        create_gated(stack, namespace, names, run_seconds=40)
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
        placement = run_to_completion(stack, namespace, names, watch, timeout=300)
    events = list(watch.events)
    stamps = released_leaders_of(events, "a") | released_leaders_of(events, "b")
    assert set(stamps) == leaders_before  # the same pods released, none re-created
    assert all(len(times) == 1 for times in stamps.values()), stamps  # each gate removed once
    # Stamped before the kill: the first removal, and possibly a second one in flight when it came.
    by_killed = sum(1 for times in stamps.values() if (parse_time(next(iter(times))) or 0) < killed_at)
    assert 0 < by_killed < JOBS, "the kill did not land mid-release"
    assert_released_whole(placement)
    assert resizer_metric(stack, "gang_timeouts_total") == 0
    assert resizer_metric(stack, "leader_releases_total") == 2 * JOBS - by_killed
    assert resizer_metric(stack, "gang_admissions_total") == 1  # b; a was finished, not admitted again
