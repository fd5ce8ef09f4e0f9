"""All-or-nothing JobSets as the end-to-end tests (kubesim and kube tiers) create and judge them, and the
scenarios both tiers replay: each tier says only how it starts the stack, how long its pods run, how it
slows the resizer's gate removals and how long it waits."""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Callable
from contextlib import AbstractContextManager
from typing import Any

import httpx

from devstack.kube import KubeError
from devstack.manifests import exclusive_jobset
from devstack.stack import Stack
from placement.constants import (
    ALL_OR_NOTHING_ANNOTATION,
    ALL_OR_NOTHING_GATE,
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOBSET_NAME_LABEL,
    RELEASED_AT_ANNOTATION,
)
from placement.gang import parse_time
from tests.e2e.jobset_e2e_support import Watch, pods_of
from tests.support.metrics import resizer_metric
from tests.support.waiting import eventually

Obj = dict[str, Any]
JOBS = 3
QUICK_TAKEOVER = (
    *("--lease-duration-seconds", "3"),
    *("--renew-deadline-seconds", "2"),
    *("--retry-period-seconds", "0.4"),
)
"""Election timings for a resizer that is SIGKILLed and started again: the Lease of its dead self expires 3 s
after its first look, not 15 s, while its renewals still outlast API requests slowed to 0.45 s."""
Make = Callable[[str, str], Obj]
"""(name, namespace) -> an all-or-nothing JobSet."""
Slowing = Callable[[Stack, str], AbstractContextManager[object]]
"""(stack, namespace) -> a block in which each gate removal of the resizer in the namespace takes ~0.4 s."""


def all_or_nothing_jobset(name: str, namespace: str) -> Obj:
    jobset = exclusive_jobset(name, jobs=JOBS, pods_per_job=2, gpus_per_pod=4, namespace=namespace)
    jobset["metadata"]["annotations"][ALL_OR_NOTHING_ANNOTATION] = "true"
    return jobset


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
    stack: Stack, namespace: str, names: list[str], watch: Watch, timeout: float = 60
) -> Placement:
    eventually(
        lambda: completed(stack, namespace, names),
        "every JobSet completed",
        timeout,
        ignoring=(httpx.HTTPError, KubeError),
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


def create_gated(
    stack: Stack,
    namespace: str,
    names: list[str],
    make: Make = all_or_nothing_jobset,
) -> None:
    """Create the all-or-nothing JobSets (`make(name, namespace)`) one by one, each once its leaders exist,
    gated (no resizer runs)."""
    for name in names:
        stack.client.create(make(name, namespace))
        eventually(
            all_gated(stack, namespace, name),
            f"the {JOBS} leaders of {name} created, gated",
            30,
            ignoring=(httpx.HTTPError, KubeError),
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


def all_or_nothing_jobsets_never_hold_part_of_the_domains_they_need(
    stack: Stack, namespace: str, names: list[str], *, make: Make = all_or_nothing_jobset, timeout: float = 60
) -> None:
    """The JobSets created at once, run to completion: every leader created gated, every Job of each JobSet
    released, one JobSet at a time. The caller reads the resizer's counters."""
    with Watch(stack, "Pod", namespace) as watch:
        for name in names:
            stack.client.create(make(name, namespace))
        placement = run_to_completion(stack, namespace, names, watch, timeout=timeout)
    assert placement.ungated_leaders_created == []
    assert {name: len(jobs) for name, jobs in placement.leaders_bound.items()} == dict.fromkeys(names, JOBS)
    assert_released_whole(placement)


def a_resizer_sigkilled_between_two_gate_removals_loses_and_doubles_nothing(
    stack: Stack, namespace: str, *, slowing: Slowing, make: Make = all_or_nothing_jobset, timeout: float = 60
) -> None:
    """JobSets a and b created gated on a stack with no resizer; one started with QUICK_TAKEOVER while
    `slowing` holds (its three sequential gate removals of a take over a second) and SIGKILLed as soon as the
    first shows on the watch, then started again. The restarted resizer finishes that release (each leader
    ungated exactly once, none deleted or re-created) once the Lease of the killed one expires, then admits b
    only once a is done with its pools. `make`'s pods must still run when the new resizer has taken over."""
    names = ["a", "b"]
    with Watch(stack, "Pod", namespace) as watch:
        create_gated(stack, namespace, names, make=make)
        leaders_before = {
            pod["metadata"]["uid"] for name in names for pod in gated_leaders(stack, namespace, name)
        }
        with slowing(stack, namespace):
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
        placement = run_to_completion(stack, namespace, names, watch, timeout=timeout)
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
