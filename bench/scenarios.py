"""Benchmark scenarios and the JobSet each one submits (pure data, no I/O)."""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from devstack.manifests import exclusive_jobset
from kubesim.controllers.gang import GANG_ANNOTATION, GANG_SIZE_ANNOTATION
from placement.constants import ALL_OR_NOTHING_ANNOTATION, GKE_NODEPOOL_LABEL, Strategy

GPUS_PER_NODE = 8
TOPOLOGY_KEY = GKE_NODEPOOL_LABEL
PODS_PER_NODE = 110
"""kubesim's (and the kubelet's default) pod limit per node."""
BACKLOG_POD_CPU = "100m"
BACKLOG_GROUP_LABEL = "bench.exclusive-placement.io/backlog-group"


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
    `pod_run_seconds` (simulated) and then succeed, so later leaders wait until an earlier Job completes
    and frees its pool — the case where rejecting strategies pile up rejected follower creations. Long
    wait: contended with many more Jobs than pools and pods that run for tens of simulated minutes, so
    most Jobs wait far longer than the Job controller's 60 s backoff cap and the cost of waiting reaches
    its steady state (one retry per waiting Job per minute under a rejecting strategy).

    Preemption: every pod requests a whole node's GPUs and a pool has one node per pod, so a Job fills
    its pool exactly; a low-priority JobSet of the scenario's shape fills every pool, then a high-priority
    one of the same shape arrives and has to preempt its way in (`bench.strategies`).

    Gang: `jobsets` JobSets of J Jobs each, submitted together, race for the D pools; each JobSet is one
    kubesim gang (docs/kubesim-controllers.md, "Gang progress"), so its pods progress only while all of
    them run. A JobSet holding some pools while waiting for the rest computes nothing, and JobSets holding
    each other's missing pools never finish: the run ends at `gang_deadline_seconds`.

    A new kind of scenario adds its own fields here with a validation in
    `__post_init__`, describes itself in `fields()` and `bench.report.scenario_label`, and, if it needs
    more than the JobSet in its namespace, a hook in `bench.strategies` like the backlog's."""

    name: str
    jobs: int
    pods_per_job: int
    pools: int
    pod_run_seconds: float | None = None
    scheduler_pods_per_second: float | None = None
    """Scheduling cycles per simulated second; None: kubesim's default (300, upstream's basic figure)."""
    time_scale: float | None = None
    """Real seconds per simulated second for this scenario; None: the bench's `--time-scale`.

    A throttled scenario needs 1.0: kubesim throttles in simulated time, but the API server, the webhook
    and the controllers process requests in real time (a few hundred pods per real second here). At 0.1,
    60 simulated pods/s is 600 real pods/s, faster than pods can be created, so the scheduler never has
    a backlog; at 1.0 it binds 60 pods per real second and pods queue behind each other. A long-wait
    scenario needs a small one instead (LONG_WAIT_TIME_SCALE), so that hours of waves fit in a minute."""
    backlog: Backlog | None = None
    """Non-exclusive pods submitted first, so the measured leaders arrive behind a scheduler backlog."""
    long_wait: bool = False
    """Reports the waiting it causes: `waiting_job_minutes` and wasted requests per waiting-Job minute."""
    jobset_webhooks: bool = True
    """JobSet's own pod webhooks and pod reconciler run in kubesim, as in a real JobSet install."""
    preemption: bool = False
    """A low-priority JobSet fills every pool first; the measured high-priority JobSet preempts it."""
    gang: bool = False
    """`jobsets` gang JobSets race for the pools (the class docstring); the pod template carries kubesim's
    gang annotations: the gang is the JobSet, its size all of the JobSet's pods."""
    jobsets: int = 1
    gang_deadline_seconds: float | None = None
    """Simulated seconds after the JobSets' creation at which a gang run ends, whether or not every JobSet
    completed (a deadlock never does)."""

    def __post_init__(self) -> None:
        if min(self.jobs, self.pods_per_job, self.pools, self.jobsets) < 1:
            raise ValueError(f"scenario {self.name}: jobs, pods_per_job and pools must be >= 1")
        if self.scheduler_pods_per_second is not None and self.scheduler_pods_per_second <= 0:
            raise ValueError(f"scenario {self.name}: scheduler_pods_per_second must be > 0")
        if self.time_scale is not None and self.time_scale <= 0:
            raise ValueError(f"scenario {self.name}: time_scale must be > 0")
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
        elif self.jobsets != 1 or self.gang_deadline_seconds is not None:
            raise ValueError(f"scenario {self.name}: several JobSets and a deadline need a gang scenario")
        if self.backlog is not None:
            if not self.throttled:
                raise ValueError(f"scenario {self.name}: a backlog needs a throttled scheduler to queue in")
            free_slots = self.nodes * (PODS_PER_NODE - GPUS_PER_NODE)
            if self.backlog.pods > free_slots:
                raise ValueError(
                    f"scenario {self.name}: {self.backlog.pods} backlog pods exceed the {free_slots} pod "
                    "slots the nodes have besides the measured Jobs"
                )

    def _check_long_wait(self) -> None:
        if not self.contended:
            raise ValueError(f"scenario {self.name}: a long wait needs more Jobs than pools")
        if self.time_scale is None or (self.pod_run_seconds or 0) * self.time_scale < MIN_REAL_POD_SECONDS:
            raise ValueError(
                f"scenario {self.name}: a long wait needs its own time scale at which its pods run at least "
                f"{MIN_REAL_POD_SECONDS:g} real seconds (pod_run_seconds x time_scale)"
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

    @property
    def throttled(self) -> bool:
        return self.scheduler_pods_per_second is not None

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

    def fields(self, time_scale: float) -> dict[str, Any]:
        """The scenario's own fields in strategies.json (`time_scale`: the one it ran at)."""
        return {
            "name": self.name,
            "jobs": self.jobs,
            "pods_per_job": self.pods_per_job,
            "pools": self.pools,
            "nodes": self.nodes,
            "contended": self.contended,
            "long_wait": self.long_wait,
            "pod_run_seconds": self.pod_run_seconds,
            "scheduler_pods_per_second": self.scheduler_pods_per_second,
            "time_scale": time_scale,
            "backlog_pods": self.backlog.pods if self.backlog else None,
            "preemption": self.preemption,
            "gpus_per_pod": self.gpus_per_pod,
            "gang": self.gang,
            "jobsets": self.jobsets,
            "gang_deadline_seconds": self.gang_deadline_seconds,
        }


ANTI_AFFINITY_PODS_PER_SECOND = 60.0
"""Upstream's scheduler CI threshold at 5,000 nodes for pods with required anti-affinity (basic: 270)."""

LONG_WAIT_TIME_SCALE = 0.01
"""Real seconds per simulated second of the long-wait scenarios: 20-minute pods last 12 real seconds. The
control plane's own processing is real time, so at this scale a real second of it is 100 simulated
seconds. That bounds how many Jobs may wait at once: each waiting Job's retry (a rejected create through
an HTTPS webhook, ~50 ms real here) must fit well inside the Job controller's 60 s backoff cap, or real
processing, not the backoff, sets the retry rate. Measured at 0.005 with 40 Jobs waiting at once: `gate`
retried 0.15 times per waiting-Job minute against JobSet's 1.1 (its in-process webhook costs ~1 ms)."""
MIN_REAL_POD_SECONDS = 5.0
"""A long-wait scenario's pods must run at least this many real seconds. Its time scale compresses the
pods' run but not the (real-time) control plane: a leader that finished before its followers were admitted
would leave a rejecting strategy's Job waiting forever for a leader that no longer runs (measured on this
2-core machine under load with 1.5 real seconds)."""

GANG_QUICK_TIME_SCALE = 0.05
"""The quick gang scenario's time scale: its deadline (60 simulated seconds) is 3 real seconds."""

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
    Scenario(
        "throttled-32x32",
        jobs=32,
        pods_per_job=32,
        pools=32,
        scheduler_pods_per_second=ANTI_AFFINITY_PODS_PER_SECOND,
        time_scale=1.0,
    ),
    # Leaders arriving behind an existing backlog (upstream's case): 800 queued pods at 60 pods/s are
    # ~13 s of scheduler work ahead of the first leader, minus what drains while they are being created.
    Scenario(
        "backlog-16x16",
        jobs=16,
        pods_per_job=16,
        pools=16,
        scheduler_pods_per_second=ANTI_AFFINITY_PODS_PER_SECOND,
        time_scale=1.0,
        backlog=Backlog(jobs=8, pods_per_job=100),
    ),
    # Three waves of 20 simulated minutes: two Jobs wait 20 minutes for a pool, two wait 40.
    Scenario(
        "long-wait-6x8-on-2",
        jobs=6,
        pods_per_job=8,
        pools=2,
        pod_run_seconds=1200.0,
        time_scale=LONG_WAIT_TIME_SCALE,
        long_wait=True,
    ),
    # 8 pools of 4 full nodes held by a low-priority JobSet; a high-priority one of the same shape preempts.
    Scenario("preemption-8x4", jobs=8, pods_per_job=4, pools=8, preemption=True),
    # 4 gang JobSets of 3 Jobs racing for 4 pools: one at a time fits; whenever a JobSet completes, the
    # waiting leaders of the others race for its pools, and two partial JobSets hold each other off.
    GANG_4X3,
)
QUICK_SCENARIOS: tuple[Scenario, ...] = (
    # Exercises the throttle end to end (kubesim flag, time scale 1); too small for leaders to queue.
    Scenario(
        "throttled-4x8",
        jobs=4,
        pods_per_job=8,
        pools=4,
        scheduler_pods_per_second=ANTI_AFFINITY_PODS_PER_SECOND,
        time_scale=1.0,
    ),
    # Two waves of 10 simulated minutes (6 real seconds): the second wave waits long enough for the Job
    # controller's backoff to reach its 60 s cap.
    Scenario(
        "long-wait-4x4-on-2",
        jobs=4,
        pods_per_job=4,
        pools=2,
        pod_run_seconds=600.0,
        time_scale=LONG_WAIT_TIME_SCALE,
        long_wait=True,
    ),
    Scenario("preemption-4x2", jobs=4, pods_per_job=2, pools=4, preemption=True),
    # gang-3x3's race with 2-pod Jobs and short runs; a deadlocked run ends at 3 real seconds.
    Scenario(
        "gang-3x3-quick",
        jobs=3,
        pods_per_job=2,
        pools=4,
        pod_run_seconds=6.0,
        time_scale=GANG_QUICK_TIME_SCALE,
        gang=True,
        jobsets=3,
        gang_deadline_seconds=60.0,
    ),
)


LARGE_SCENARIOS: tuple[Scenario, ...] = (Scenario("64x64", jobs=64, pods_per_job=64, pools=64),)
"""Beyond `make bench`'s 15-minute budget on 2 cores: run by name (`--scenario 64x64`). kubesim alone spent
~140 CPU-seconds per strategy run of 64x64 once the kubelet's status writes and events were modelled
(~10 requests per pod), so five strategies take over 11 minutes on their own."""


def scenarios_named(names: Sequence[str]) -> tuple[Scenario, ...]:
    """The scenarios called `names` (full, quick and large ones, and gang-3x3), in that order; ValueError
    naming any unknown name."""
    known: dict[str, Scenario] = {}
    for scenario in FULL_SCENARIOS + QUICK_SCENARIOS + LARGE_SCENARIOS + (GANG_3X3,):
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
    kubesim's gang `name` of all the JobSet's pods (the size on the pod: `elastic` shrinks the Jobs), and,
    with `all_or_nothing`, `exclusive-placement.io/all-or-nothing: "true"` on the JobSet."""
    gang = {GANG_ANNOTATION: name, GANG_SIZE_ANNOTATION: str(scenario.jobset_pods)}
    manifest = jobset_manifest(scenario, strategy, name=name, namespace=namespace, pod_annotations=gang)
    if all_or_nothing:
        manifest["metadata"]["annotations"][ALL_OR_NOTHING_ANNOTATION] = "true"
    return manifest


def backlog_pods(backlog: Backlog, *, namespace: str) -> list[dict[str, Any]]:
    """The backlog's bare pods, `backlog.jobs` groups of `backlog.pods_per_job`: CPU only, no strategy
    annotation, no owner. Bare pods because the bench creates them at its own pace: created through Jobs,
    they would arrive at the Job controller's 20 qps, slower than a 60-pods/s scheduler binds them, and no
    queue would form (a busy cluster's queue comes from many clients at once)."""
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
