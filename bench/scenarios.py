"""Benchmark scenarios and the JobSet each one submits (pure data, no I/O)."""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from devstack.manifests import exclusive_jobset
from placement.constants import GKE_NODEPOOL_LABEL

GPUS_PER_NODE = 8
TOPOLOGY_KEY = GKE_NODEPOOL_LABEL


@dataclass(frozen=True)
class Scenario:
    """J Jobs x P pods (one GPU each) over D node pools of ceil(P / 8) eight-GPU nodes.

    Uncontended: D == J, every leader finds a free pool at once. Contended: D < J; pods run for
    `pod_run_seconds` (simulated) and then succeed, so later leaders wait until an earlier Job completes
    and frees its pool — the case where `gate` piles up rejected follower creations."""

    name: str
    jobs: int
    pods_per_job: int
    pools: int
    pod_run_seconds: float | None = None

    def __post_init__(self) -> None:
        if min(self.jobs, self.pods_per_job, self.pools) < 1:
            raise ValueError(f"scenario {self.name}: jobs, pods_per_job and pools must be >= 1")
        if self.pools < self.jobs and self.pod_run_seconds is None:
            raise ValueError(
                f"scenario {self.name}: fewer pools than Jobs needs pod_run_seconds to free pools"
            )

    @property
    def contended(self) -> bool:
        return self.pools < self.jobs

    @property
    def nodes_per_pool(self) -> int:
        return math.ceil(self.pods_per_job / GPUS_PER_NODE)

    @property
    def nodes(self) -> int:
        return self.pools * self.nodes_per_pool

    @property
    def total_pods(self) -> int:
        return self.jobs * self.pods_per_job


FULL_SCENARIOS: tuple[Scenario, ...] = (
    Scenario("4x8", jobs=4, pods_per_job=8, pools=4),
    Scenario("16x32", jobs=16, pods_per_job=32, pools=16),
    Scenario("64x64", jobs=64, pods_per_job=64, pools=64),
    Scenario("contended-16x8-on-4", jobs=16, pods_per_job=8, pools=4, pod_run_seconds=30.0),
)
QUICK_SCENARIOS: tuple[Scenario, ...] = (
    Scenario("4x8", jobs=4, pods_per_job=8, pools=4),
    Scenario("contended-6x4-on-2", jobs=6, pods_per_job=4, pools=2, pod_run_seconds=20.0),
)


def jobset_manifest(scenario: Scenario, strategy: str, *, name: str, namespace: str) -> dict[str, Any]:
    """The scenario's JobSet: one GPU per pod, the strategy chosen per Job by annotation."""
    return exclusive_jobset(
        name,
        jobs=scenario.jobs,
        pods_per_job=scenario.pods_per_job,
        strategy=strategy,
        namespace=namespace,
        topology_key=TOPOLOGY_KEY,
    )
