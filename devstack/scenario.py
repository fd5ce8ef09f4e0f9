"""Apply manifests to the stack and follow their Jobs until each one is placed (the run/demo flow)."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from devstack.diagnosis import diagnose, read_cluster
from devstack.exclusivity import ExclusivityReplay, node_domains, pod_state
from devstack.interrupts import pause
from devstack.report import (
    DONE_STATES,
    JobStatus,
    Timeline,
    format_table,
    job_status,
    node_label_map,
)
from devstack.stack import Stack
from kubekit.client import KubeError
from kubekit.generic import GenericClient
from placement.objects import metadata, namespace_of, topology_key_of_job


class PlacementError(RuntimeError):
    """The Jobs were not all placed (timeout, a failed Job, or an exclusivity violation)."""


def load_manifests(path: Path) -> list[dict[str, Any]]:
    try:
        docs = list(yaml.safe_load_all(path.read_text()))
    except (OSError, yaml.YAMLError) as err:
        raise PlacementError(f"cannot read manifests from {path}: {err}") from err
    objects = [d for d in docs if isinstance(d, dict)]
    for obj in objects:
        if not {"apiVersion", "kind", "metadata"} <= obj.keys():
            raise PlacementError(
                f"{path}: every document needs apiVersion, kind and metadata; got {sorted(obj)}"
            )
    if not objects:
        raise PlacementError(f"{path} holds no Kubernetes objects")
    return objects


def expected_jobs(objects: Iterable[Mapping[str, Any]]) -> int:
    """Jobs the manifests will produce: one per Job, `replicas` per JobSet replicatedJob."""
    total = 0
    for obj in objects:
        if obj["kind"] == "Job":
            total += 1
        elif obj["kind"] == "JobSet":
            total += sum(int(rj.get("replicas", 1)) for rj in obj.get("spec", {}).get("replicatedJobs", []))
    return total


def ensure_namespace(client: GenericClient, namespace: str) -> None:
    try:
        client.get("Namespace", namespace)
    except KubeError as err:
        if not err.not_found:
            raise
        client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})


@dataclass
class Observation:
    statuses: list[JobStatus]
    timeline: Timeline
    problems: list[str]
    """Exclusivity violations seen in the latest snapshot (empty when placement is exclusive)."""

    @property
    def table(self) -> str:
        return format_table(self.statuses, self.timeline)


def observe(
    client: GenericClient, namespace: str | None, timeline: Timeline, nodes: list[dict[str, Any]]
) -> Observation:
    """The exclusive Jobs of `namespace` (None: every namespace), their states and any violation."""
    jobs = [j for j in client.list("Job", namespace=namespace) if topology_key_of_job(j)]
    pods = client.list("Pod", namespace=namespace)
    labels = node_label_map(nodes)
    statuses = [job_status(job, pods, labels) for job in jobs]
    timeline.observe(statuses, time.monotonic())
    problems: list[str] = []
    for key in sorted({topology_key_of_job(j) or "" for j in jobs}):
        # Exclusivity holds among the Jobs of one key: a Job on another key (or a key no node carries,
        # where every node's domain is "") shares nothing with them.
        on_key = {
            f"{namespace_of(j)}/{metadata(j).get('name')}" for j in jobs if topology_key_of_job(j) == key
        }
        replay = ExclusivityReplay(node_domains(nodes, key))
        replay.observe_all(state for p in pods if (state := pod_state(p)).job in on_key)
        problems += replay.describe()
    return Observation(statuses, timeline, problems)


ProgressCallback = Callable[[Observation], None]


def wait_until_placed(
    stack: Stack,
    namespace: str,
    jobs: int,
    *,
    timeout: float,
    on_progress: ProgressCallback | None = None,
    poll_seconds: float = 0.1,
    start: float | None = None,
) -> Observation:
    """Poll until `jobs` exclusive Jobs exist in `namespace` and every one is running or complete."""
    timeline = Timeline(start if start is not None else time.monotonic())
    nodes = stack.client.list("Node")
    deadline = time.monotonic() + timeout
    while True:
        stack.check_alive()
        observation = observe(stack.client, namespace, timeline, nodes)
        if on_progress is not None:
            on_progress(observation)
        if observation.problems:
            raise PlacementError("exclusivity violated:\n  " + "\n  ".join(observation.problems))
        failed = [s.job for s in observation.statuses if s.state == "failed"]
        if failed:
            raise PlacementError(f"Jobs failed: {', '.join(failed)}\n{observation.table}")
        if len(observation.statuses) >= jobs and all(s.state in DONE_STATES for s in observation.statuses):
            return observation
        if time.monotonic() > deadline:
            raise PlacementError(
                f"not every Job was placed within {timeout:.0f}s "
                f"({len(observation.statuses)}/{jobs} Jobs seen):\n{observation.table}\n"
                f"{diagnose(read_cluster(stack.client, namespace)).render()}"
            )
        pause(poll_seconds)
