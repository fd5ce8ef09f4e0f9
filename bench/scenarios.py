"""Benchmark scenarios and the JobSet each one submits (pure data, no I/O)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from devstack.manifests import exclusive_jobset
from placement.constants import (
    ALL_OR_NOTHING_ANNOTATION,
    GKE_NODEPOOL_LABEL,
    KUEUE_QUEUE_NAME_LABEL,
    Strategy,
)

GPUS_PER_NODE = 8
TOPOLOGY_KEY = GKE_NODEPOOL_LABEL
PODS_PER_NODE = 110
"""The kubelet's default pod limit per node (kwok's nodes declare it)."""
BACKLOG_POD_CPU = "100m"
BACKLOG_GROUP_LABEL = "bench.exclusive-placement.io/backlog-group"
GANG_ANNOTATION = "bench.exclusive-placement.io/gang"
"""On a gang scenario's pods: the gang (its JobSet) whose rendezvous the benchmark plays."""
GANG_SIZE_ANNOTATION = "bench.exclusive-placement.io/gang-size"
"""How many pods the gang has: all of its JobSet's, whatever size `elastic` shrinks its Jobs to."""


@dataclass(frozen=True)
class Backlog:
    """Plain pods (no exclusive placement, no GPU) submitted before the measured JobSet, in `jobs` groups
    of `pods_per_job` (`backlog_pods`).

    Their pods fill the scheduler's queue, and the measured JobSet is submitted once all of them exist, so
    its leaders queue behind whatever the scheduler has not bound yet. Non-exclusive on purpose: the
    backlog is the same for every strategy (an exclusive backlog would itself be rejected, resized or
    gated differently per strategy, so its size would depend on the strategy being measured), and CPU-only
    so it takes no GPU from the pools — leaders wait for the scheduler, not for capacity."""

    jobs: int
    pods_per_job: int

    def __post_init__(self) -> None:
        if min(self.jobs, self.pods_per_job) < 1:
            raise ValueError("backlog jobs and pods_per_job must be >= 1")

    @property
    def pods(self) -> int:
        return self.jobs * self.pods_per_job


@dataclass(frozen=True)
class Scenario:
    """J Jobs x P pods (one GPU each) over D node pools of ceil(P / 8) eight-GPU nodes.

    Uncontended: D == J, every leader finds a free pool at once. Contended: D < J; pods run for
    `pod_run_seconds` (kwok completes them then), so later leaders wait until an earlier Job completes
    and frees its pool — the case where rejecting strategies pile up rejected follower creations. Long
    wait: contended, with pods that run for minutes, so the waiting Jobs wait longer than the Job
    controller's 60 s backoff cap and the cost of waiting reaches its steady state (one retry per waiting
    Job per minute under a rejecting strategy).

    Preemption: every pod requests a whole node's GPUs and a pool has one node per pod, so a Job fills
    its pool exactly; a low-priority JobSet of the scenario's shape fills every pool, then a high-priority
    one of the same shape arrives and has to preempt its way in (`bench.strategies`).

    Gang: `jobsets` JobSets of J Jobs each, submitted together, race for the D pools; each JobSet is one
    gang whose pods start their run only once all of them run (the benchmark plays the rendezvous,
    bench.rendezvous). A JobSet holding some pools while waiting for the rest computes nothing, and
    JobSets holding each other's missing pools never finish: the run ends at `gang_deadline_seconds`.

    Kueue: `jobsets` JobSets of J Jobs each are created at once, each labelled with the run namespace's
    LocalQueue (`KUEUE_LOCAL_QUEUE`); the ClusterQueue's GPU quota fits one JobSet (`kueue_gpu_quota`), so
    Kueue admits them one after the other, each once the previous one completed (pods run
    `pod_run_seconds`). One JobSet fits the pools: the queue is Kueue's alone.

    A new kind of scenario adds its own fields here with a validation in
    `__post_init__`, describes itself in `fields()` and `bench.report.scenario_label`, and, if it needs
    more than the JobSet in its namespace, a hook in `bench.strategies` like the backlog's."""

    name: str
    jobs: int
    pods_per_job: int
    pools: int
    pod_run_seconds: float | None = None
    """Seconds after which kwok completes a Running pod; None: pods run until deleted."""
    pod_start_seconds: float | None = None
    """Seconds from a pod's bind to its Running and Ready (kwok plays a container's start); None: at once."""
    backlog: Backlog | None = None
    """Non-exclusive pods submitted first, so the measured leaders arrive behind a scheduler backlog."""
    long_wait: bool = False
    """Reports the waiting it causes: `waiting_job_minutes`, wasted requests per waiting-Job minute and
    each Job's leader bind → last follower created (`bench.measures.per_job_fields`)."""
    preemption: bool = False
    """A low-priority JobSet fills every pool first; the measured high-priority JobSet preempts it."""
    gang: bool = False
    """`jobsets` gang JobSets race for the pools (the class docstring); the pod template carries the gang
    annotations: the gang is the JobSet, its size all of the JobSet's pods."""
    jobsets: int = 1
    gang_deadline_seconds: float | None = None
    """Seconds after the JobSets' creation at which a gang run ends, whether or not every JobSet
    completed (a deadlock never does)."""
    kueue: bool = False
    """`jobsets` JobSets queued through Kueue at once, its quota one JobSet's (the class docstring)."""

    def __post_init__(self) -> None:
        if min(self.jobs, self.pods_per_job, self.pools, self.jobsets) < 1:
            raise ValueError(f"scenario {self.name}: jobs, pods_per_job and pools must be >= 1")
        if self.pools < self.jobs and self.pod_run_seconds is None:
            raise ValueError(
                f"scenario {self.name}: fewer pools than Jobs needs pod_run_seconds to free pools"
            )
        if self.long_wait:
            self._check_long_wait()
        if self.preemption:
            self._check_preemption()
        if self.gang:
            self._check_gang()
        elif self.kueue:
            self._check_kueue()
        elif self.jobsets != 1 or self.gang_deadline_seconds is not None:
            raise ValueError(
                f"scenario {self.name}: several JobSets need a gang or Kueue scenario, a deadline a gang one"
            )
        if self.backlog is not None:
            free_slots = self.nodes * (PODS_PER_NODE - GPUS_PER_NODE)
            if self.backlog.pods > free_slots:
                raise ValueError(
                    f"scenario {self.name}: {self.backlog.pods} backlog pods exceed the {free_slots} pod "
                    "slots the nodes have besides the measured Jobs"
                )

    def _check_long_wait(self) -> None:
        if not self.contended:
            raise ValueError(f"scenario {self.name}: a long wait needs more Jobs than pools")
        if (self.pod_run_seconds or 0) < MIN_LONG_WAIT_SECONDS:
            raise ValueError(
                f"scenario {self.name}: a long wait needs pods that run at least {MIN_LONG_WAIT_SECONDS:g} s "
                "(longer than the Job controller's 60 s backoff cap)"
            )

    def _check_preemption(self) -> None:
        if self.pools != self.jobs:
            raise ValueError(f"scenario {self.name}: preemption needs one pool per Job (every pool filled)")
        if self.pod_run_seconds is not None:
            raise ValueError(
                f"scenario {self.name}: preempted pods must run until preempted (no pod_run_seconds)"
            )
        if self.backlog is not None or self.long_wait:
            raise ValueError(
                f"scenario {self.name}: preemption combines with neither a backlog nor a long wait"
            )

    def _check_gang(self) -> None:
        if self.pod_run_seconds is None or self.gang_deadline_seconds is None:
            raise ValueError(f"scenario {self.name}: a gang scenario needs pod_run_seconds and a deadline")
        if self.pools < self.jobs:
            raise ValueError(f"scenario {self.name}: one gang JobSet alone must fit the pools")
        if self.backlog is not None or self.long_wait or self.preemption:
            raise ValueError(
                f"scenario {self.name}: a gang combines with neither a backlog, a long wait nor preemption"
            )

    def _check_kueue(self) -> None:
        if self.pod_run_seconds is None:
            raise ValueError(f"scenario {self.name}: Kueue admits the next JobSet only once pods finish")
        if self.pools < self.jobs:
            raise ValueError(f"scenario {self.name}: one queued JobSet must fit the pools")
        if self.gang_deadline_seconds is not None:
            raise ValueError(f"scenario {self.name}: a Kueue scenario has no deadline")
        if self.backlog is not None or self.long_wait or self.preemption:
            raise ValueError(
                f"scenario {self.name}: Kueue combines with neither a backlog, a long wait nor preemption"
            )

    @property
    def kueue_gpu_quota(self) -> int:
        """The ClusterQueue's `nvidia.com/gpu` quota in a Kueue scenario: one JobSet's GPUs."""
        return self.jobset_pods * self.gpus_per_pod

    @property
    def contended(self) -> bool:
        return self.pools < self.jobs * self.jobsets

    @property
    def jobset_pods(self) -> int:
        """The pods of one JobSet: a gang's size."""
        return self.jobs * self.pods_per_job

    @property
    def gpus_per_pod(self) -> int:
        """A whole node's GPUs under preemption (a Job fills its pool exactly), else one."""
        return GPUS_PER_NODE if self.preemption else 1

    @property
    def nodes_per_pool(self) -> int:
        return math.ceil(self.pods_per_job * self.gpus_per_pod / GPUS_PER_NODE)

    @property
    def nodes(self) -> int:
        return self.pools * self.nodes_per_pool

    @property
    def total_pods(self) -> int:
        return self.jobsets * self.jobset_pods

    def fields(self) -> dict[str, Any]:
        """The scenario's own fields in strategies.json."""
        return {
            "name": self.name,
            "jobs": self.jobs,
            "pods_per_job": self.pods_per_job,
            "pools": self.pools,
            "nodes": self.nodes,
            "contended": self.contended,
            "long_wait": self.long_wait,
            "pod_run_seconds": self.pod_run_seconds,
            "pod_start_seconds": self.pod_start_seconds,
            "backlog_pods": self.backlog.pods if self.backlog else None,
            "preemption": self.preemption,
            "gpus_per_pod": self.gpus_per_pod,
            "gang": self.gang,
            "jobsets": self.jobsets,
            "gang_deadline_seconds": self.gang_deadline_seconds,
            "kueue": self.kueue,
            "kueue_gpu_quota": self.kueue_gpu_quota if self.kueue else None,
        }


MIN_LONG_WAIT_SECONDS = 120.0
"""A long wait's pods run at least this long: twice the Job controller's 60 s backoff cap."""

GANG_4X3 = Scenario(
    "gang-4x3",
    jobs=3,
    pods_per_job=4,
    pools=4,
    pod_run_seconds=20.0,
    gang=True,
    jobsets=4,
    gang_deadline_seconds=200.0,
)
GANG_3X3 = Scenario(
    "gang-3x3",
    jobs=3,
    pods_per_job=4,
    pools=4,
    pod_run_seconds=30.0,
    gang=True,
    jobsets=3,
    gang_deadline_seconds=200.0,
)
"""The issue's first shape, by name only: with three JobSets the race after the first completion is the only
one, and it deadlocked in about half of the baseline's runs (docs/results.md); gang-4x3 races more often."""

FULL_SCENARIOS: tuple[Scenario, ...] = (
    Scenario("4x8", jobs=4, pods_per_job=8, pools=4),
    Scenario("contended-16x8-on-4", jobs=16, pods_per_job=8, pools=4, pod_run_seconds=30.0),
    # 1,024 pods at once: the scheduler runs as fast as the machine lets it (the previous wave's results
    # name it throttled-32x32).
    Scenario("32x32", jobs=32, pods_per_job=32, pools=32),
    # Leaders arriving behind 800 plain pods the scheduler has not all bound yet (upstream's case).
    Scenario("backlog-16x16", jobs=16, pods_per_job=16, pools=16, backlog=Backlog(jobs=8, pods_per_job=100)),
    # 8 pools of 4 full nodes held by a low-priority JobSet; a high-priority one of the same shape preempts.
    Scenario("preemption-8x4", jobs=8, pods_per_job=4, pools=8, preemption=True),
    # 4 gang JobSets of 3 Jobs racing for 4 pools: one at a time fits; whenever a JobSet completes, the
    # waiting leaders of the others race for its pools, and two partial JobSets hold each other off.
    GANG_4X3,
)
"""`make bench`: every contender of every scenario, about 30 minutes per repetition here."""
LONG_WAIT_SCENARIOS: tuple[Scenario, ...] = (
    # Two waves of 4 real minutes: the second wave's two Jobs wait ~4 minutes for a pool.
    Scenario("long-wait-4x4-on-2", jobs=4, pods_per_job=4, pools=2, pod_run_seconds=240.0, long_wait=True),
)
"""`--long-wait` (`make bench-kube`): about 5 minutes per contender and repetition (the run ends when the
second wave runs)."""
QUICK_SCENARIOS: tuple[Scenario, ...] = FULL_SCENARIOS[:1]
"""`--quick`: one small scenario, every contender on one stack."""


KUEUE_SCENARIOS: tuple[Scenario, ...] = (
    # 3 JobSets of 4 Jobs x 4 pods queued at once; Kueue's quota (16 GPUs) admits one at a time.
    Scenario("kueue-3x4x4", jobs=4, pods_per_job=4, pools=4, pod_run_seconds=30.0, jobsets=3, kueue=True),
)
"""`--kueue`: the comparison next to Kueue, about 2 minutes per contender and repetition."""
KUEUE_QUICK_SCENARIOS: tuple[Scenario, ...] = (
    Scenario("kueue-2x2x4", jobs=2, pods_per_job=4, pools=2, pod_run_seconds=10.0, jobsets=2, kueue=True),
)
"""`--kueue --quick`: 2 JobSets of 2 Jobs x 4 pods, pods running 10 s: about 30 s per contender and
repetition."""

LARGE_SCENARIOS: tuple[Scenario, ...] = (
    Scenario("64x64", jobs=64, pods_per_job=64, pools=64),
    Scenario("32x32-slow-start", jobs=32, pods_per_job=32, pools=32, pod_start_seconds=2.0),
)
"""Beyond `make bench`'s budget on 2 cores, or asking one question: run by name (`--scenario 64x64`).
`32x32-slow-start` is 32x32 with pods that start 2 s after their bind, as containers that take time to
start: it showed that the Job controller's status writes refused under `elastic` do not come from the
leaders' readiness (docs/results.md, "What the remaining 1.03x to all running is")."""


def scenarios_named(names: Sequence[str]) -> tuple[Scenario, ...]:
    """The scenarios called `names` (full, long-wait, quick, large and Kueue ones, and gang-3x3), in that
    order; ValueError naming any unknown name."""
    known: dict[str, Scenario] = {}
    named = FULL_SCENARIOS + LONG_WAIT_SCENARIOS + QUICK_SCENARIOS + LARGE_SCENARIOS + (GANG_3X3,)
    for scenario in named + KUEUE_SCENARIOS + KUEUE_QUICK_SCENARIOS:
        known.setdefault(scenario.name, scenario)
    unknown = [name for name in names if name not in known]
    if unknown or not names:
        raise ValueError(f"unknown scenarios {unknown}; known: {', '.join(known)}")
    return tuple(known[name] for name in names)


def jobset_manifest(
    scenario: Scenario,
    strategy: Strategy | None,
    *,
    name: str,
    namespace: str,
    priority_class_name: str | None = None,
    max_restarts: int | None = None,
    pod_annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """The scenario's JobSet: `scenario.gpus_per_pod` GPUs per pod, JobSet's exclusive-topology annotation,
    and this project's strategy chosen per Job by annotation (none for JobSet alone); under preemption its
    PriorityClass and, for the low-priority one, the restarts its failure policy allows; `pod_annotations`
    on its pod template (e.g. a pod run time for kwok)."""
    manifest = exclusive_jobset(
        name,
        jobs=scenario.jobs,
        pods_per_job=scenario.pods_per_job,
        strategy=strategy,
        namespace=namespace,
        topology_key=TOPOLOGY_KEY,
        gpus_per_pod=scenario.gpus_per_pod,
        priority_class_name=priority_class_name,
        max_restarts=max_restarts,
    )
    if pod_annotations:
        _pod_template_annotations(manifest).update(pod_annotations)
    return manifest


def _pod_template_annotations(manifest: dict[str, Any]) -> dict[str, str]:
    template = manifest["spec"]["replicatedJobs"][0]["template"]["spec"]["template"]
    annotations: dict[str, str] = template.setdefault("metadata", {}).setdefault("annotations", {})
    return annotations


def gang_jobset_names(scenario: Scenario) -> list[str]:
    return [f"gang-{index}" for index in range(scenario.jobsets)]


def gang_jobset_manifest(
    scenario: Scenario, strategy: Strategy | None, *, name: str, namespace: str, all_or_nothing: bool
) -> dict[str, Any]:
    """One JobSet of a gang scenario: the scenario's JobSet whose pod template makes every pod a member of
    the gang `name` of all the JobSet's pods (the size on the pod: `elastic` shrinks the Jobs), and,
    with `all_or_nothing`, `exclusive-placement.io/all-or-nothing: "true"` on the JobSet."""
    gang = {GANG_ANNOTATION: name, GANG_SIZE_ANNOTATION: str(scenario.jobset_pods)}
    manifest = jobset_manifest(scenario, strategy, name=name, namespace=namespace, pod_annotations=gang)
    if all_or_nothing:
        manifest["metadata"]["annotations"][ALL_OR_NOTHING_ANNOTATION] = "true"
    return manifest


KUEUE_LOCAL_QUEUE = "bench-queue"
"""The LocalQueue each Kueue run creates in its namespace (of the stack's ClusterQueue)."""


def queued_jobset_names(scenario: Scenario) -> list[str]:
    return [f"queued-{index}" for index in range(scenario.jobsets)]


def queued_jobset_manifest(
    scenario: Scenario,
    strategy: Strategy | None,
    *,
    name: str,
    namespace: str,
    pod_annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """One JobSet of a Kueue scenario: the scenario's JobSet labelled with the LocalQueue
    `KUEUE_LOCAL_QUEUE` (Kueue's webhook creates it suspended), `pod_annotations` on its pod template."""
    manifest = jobset_manifest(
        scenario, strategy, name=name, namespace=namespace, pod_annotations=pod_annotations
    )
    manifest["metadata"].setdefault("labels", {})[KUEUE_QUEUE_NAME_LABEL] = KUEUE_LOCAL_QUEUE
    return manifest


def backlog_pods(backlog: Backlog, *, namespace: str) -> list[dict[str, Any]]:
    """The backlog's bare pods, `backlog.jobs` groups of `backlog.pods_per_job`: CPU only, no strategy
    annotation, no owner. Bare pods because the bench creates them at its own pace: created through Jobs,
    they would arrive at the Job controller's 20 qps, slower than the scheduler binds them, and no queue
    would form (a busy cluster's queue comes from many clients at once)."""
    return [
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {
                "name": f"backlog-{group}-{index}",
                "namespace": namespace,
                "labels": {BACKLOG_GROUP_LABEL: str(group)},
            },
            "spec": {
                "restartPolicy": "Never",
                "containers": [
                    {
                        "name": "batch",
                        "image": "registry.example/batch:1",
                        "resources": {"requests": {"cpu": BACKLOG_POD_CPU}},
                    }
                ],
            },
        }
        for group in range(backlog.jobs)
        for index in range(backlog.pods_per_job)
    ]
