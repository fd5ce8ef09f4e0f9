"""The strategies the benchmark measures — the keys of strategies.json — and how to check that a run
measured the strategy it claims (pure data and checks, no I/O).

`jobset` is JobSet today, exactly: JobSet's own pod webhooks (`mpod.kb.io` / `vpod.kb.io`) and pod
reconciler place the pods, and this project stays out of it the way a user would keep it out — the namespace
is listed in the chart's `webhook.admission.exemptNamespaces`, and the resizer only acts on Jobs labelled
`exclusive-placement.io/resize`, which nothing sets there. The project's own strategies are selected per Job
by the `exclusive-placement.io/strategy` annotation on the JobSet's pod template; `gate` is the project's
JobSet-like rejection, not JobSet (its webhook looks a leader up live when its cache does not show it bound).

The `+all-or-nothing` contenders are their strategy with `exclusive-placement.io/all-or-nothing: "true"` on
each JobSet (leaders released together once enough domains are free); they only run in gang scenarios,
which in turn run only `GANG_CONTENDER_KEYS`. A Kueue scenario runs `KUEUE_CONTENDER_KEYS`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import Any

from placement.constants import (
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOB_KEY_LABEL,
    JOB_NAME_LABEL,
    LEADER_COMPLETION_INDEX,
    RESIZE_DONE,
    RESIZE_LABEL,
    ROLE_LABEL,
    Strategy,
)

JOBSET_BASELINE = "jobset"
MAX_PROBLEMS = 20


class FollowerPlacement(StrEnum):
    NODE_SELECTOR = "nodeSelector"
    """Pinned to the leader's domain by a nodeSelector on the topology key."""
    ANTI_AFFINITY = "podAntiAffinity"
    """Carries the leader's affinity terms (JobSet's original implementation)."""


@dataclass(frozen=True)
class Contender:
    key: str
    """Its key in strategies.json."""
    strategy: Strategy | None
    """The `exclusive-placement.io/strategy` annotation on the pod template; None: this project's
    webhooks are exempted from the namespace and JobSet alone places the pods."""
    resized: bool
    """Admitted at size 1 and resized by the resizer once the leader binds."""
    followers: FollowerPlacement
    all_or_nothing: bool = False
    """Sets `exclusive-placement.io/all-or-nothing: "true"` on each JobSet's metadata."""

    @property
    def uses_project_webhooks(self) -> bool:
        return self.strategy is not None


JOBSET = Contender(JOBSET_BASELINE, None, resized=False, followers=FollowerPlacement.NODE_SELECTOR)
CONTENDERS: tuple[Contender, ...] = (
    JOBSET,
    Contender(Strategy.GATE, Strategy.GATE, resized=False, followers=FollowerPlacement.NODE_SELECTOR),
    Contender(Strategy.ELASTIC, Strategy.ELASTIC, resized=True, followers=FollowerPlacement.NODE_SELECTOR),
    Contender(
        Strategy.SCHEDULING_GATE,
        Strategy.SCHEDULING_GATE,
        resized=False,
        followers=FollowerPlacement.NODE_SELECTOR,
    ),
    Contender(Strategy.AFFINITY, Strategy.AFFINITY, resized=False, followers=FollowerPlacement.ANTI_AFFINITY),
    Contender(
        f"{Strategy.ELASTIC}+all-or-nothing",
        Strategy.ELASTIC,
        resized=True,
        followers=FollowerPlacement.NODE_SELECTOR,
        all_or_nothing=True,
    ),
    Contender(
        f"{Strategy.SCHEDULING_GATE}+all-or-nothing",
        Strategy.SCHEDULING_GATE,
        resized=False,
        followers=FollowerPlacement.NODE_SELECTOR,
        all_or_nothing=True,
    ),
)
GANG_CONTENDER_KEYS: frozenset[str] = frozenset(
    {
        JOBSET_BASELINE,
        Strategy.ELASTIC,
        Strategy.SCHEDULING_GATE,
        f"{Strategy.ELASTIC}+all-or-nothing",
        f"{Strategy.SCHEDULING_GATE}+all-or-nothing",
    }
)
"""What a gang scenario measures: JobSet, the two strategies that never reject a pod, and both with
all-or-nothing."""
KUEUE_CONTENDER_KEYS: frozenset[str] = frozenset({JOBSET_BASELINE, Strategy.GATE, Strategy.ELASTIC})
"""What a Kueue scenario measures: JobSet, `elastic` (the child Jobs of a JobSet Kueue queues are resized as
anywhere else, bench.queued) and `gate`, what a plain Job Kueue queues falls back to."""
CONTENDER_KEYS: tuple[str, ...] = tuple(c.key for c in CONTENDERS)
BY_KEY: dict[str, Contender] = {c.key: c for c in CONTENDERS}


def contenders(keys: Sequence[str]) -> tuple[Contender, ...]:
    """The contenders named by `keys`, in the canonical order; ValueError naming any unknown key."""
    unknown = [k for k in keys if k not in BY_KEY]
    if unknown or not keys:
        raise ValueError(f"unknown strategies {unknown}; valid: {', '.join(CONTENDER_KEYS)}")
    wanted = set(keys)
    return tuple(c for c in CONTENDERS if c.key in wanted)


def for_scenario(chosen: Sequence[Contender], *, gang: bool, kueue: bool = False) -> tuple[Contender, ...]:
    """The chosen contenders a scenario runs: a gang scenario's among GANG_CONTENDER_KEYS, a Kueue
    scenario's among KUEUE_CONTENDER_KEYS, any other's without the all-or-nothing ones (they need several
    JobSets racing to mean anything)."""
    if gang:
        return tuple(c for c in chosen if c.key in GANG_CONTENDER_KEYS)
    if kueue:
        return tuple(c for c in chosen if c.key in KUEUE_CONTENDER_KEYS)
    return tuple(c for c in chosen if not c.all_or_nothing)


def _placed_jobs(pods: list[dict[str, Any]]) -> set[str]:
    """Names of the Jobs whose leader pod is bound."""
    return {
        str((pod["metadata"].get("labels") or {}).get(JOB_NAME_LABEL))
        for pod in pods
        if not _is_follower(pod) and (pod.get("spec") or {}).get("nodeName")
    }


def _is_follower(pod: dict[str, Any]) -> bool:
    annotations = pod["metadata"].get("annotations") or {}
    index = str(annotations.get(JOB_COMPLETION_INDEX_ANNOTATION, LEADER_COMPLETION_INDEX))
    return index != LEADER_COMPLETION_INDEX


def _job_problems(
    contender: Contender, jobs: list[dict[str, Any]], expected_jobs: int, placed: set[str] | None
) -> list[str]:
    problems: list[str] = []
    if len(jobs) != expected_jobs:
        problems.append(f"expected {expected_jobs} Jobs, found {len(jobs)}")
    for job in jobs:
        label = (job["metadata"].get("labels") or {}).get(RESIZE_LABEL)
        name = job["metadata"]["name"]
        waiting = placed is not None and name not in placed
        if contender.resized and label != RESIZE_DONE and not waiting:
            problems.append(f"Job {name}: {contender.key} but {RESIZE_LABEL}={label!r} (not resized)")
        if not contender.resized and label is not None:
            problems.append(f"Job {name}: {contender.key} but the Job was shrunk ({RESIZE_LABEL}={label})")
    return problems


def _pod_problems(contender: Contender, pod: dict[str, Any], topology_key: str) -> list[str]:
    name = pod["metadata"]["name"]
    labels = pod["metadata"].get("labels") or {}
    if not contender.uses_project_webhooks and (ROLE_LABEL in labels or JOB_KEY_LABEL in labels):
        return [f"pod {name}: this project's webhook labelled a pod of the exempt {contender.key} namespace"]
    if not _is_follower(pod):
        return []
    spec = pod.get("spec") or {}
    anti = "podAntiAffinity" in (spec.get("affinity") or {})
    pinned = topology_key in (spec.get("nodeSelector") or {})
    if contender.followers is FollowerPlacement.ANTI_AFFINITY and not anti:
        return [f"pod {name}: {contender.key} follower without podAntiAffinity"]
    if contender.followers is FollowerPlacement.NODE_SELECTOR and (anti or not pinned):
        return [f"pod {name}: {contender.key} follower not pinned by nodeSelector"]
    return []


def placement_problems(
    contender: Contender,
    jobs: list[dict[str, Any]],
    pods: list[dict[str, Any]],
    *,
    expected_jobs: int,
    topology_key: str,
    only_placed: bool = False,
) -> list[str]:
    """Checks that the run measured what it claims: the Jobs exist and the strategy really applied (elastic
    Jobs resized, no other Job shrunk; followers pinned by nodeSelector, or anti-affine for `affinity`;
    under `jobset` no pod touched by this project's webhook). With `only_placed` (a run that may end
    with Jobs still waiting, e.g. a gang deadlock) only the Jobs whose leader was bound must have been
    resized and only bound pods must be placed as the strategy says. At most MAX_PROBLEMS."""
    placed = _placed_jobs(pods) if only_placed else None
    problems = _job_problems(contender, jobs, expected_jobs, placed)
    for pod in pods:
        if only_placed and not (pod.get("spec") or {}).get("nodeName"):
            continue  # a follower of a waiting leader (gated, say) is pinned once its leader binds
        problems.extend(_pod_problems(contender, pod, topology_key))
    return problems[:MAX_PROBLEMS]
