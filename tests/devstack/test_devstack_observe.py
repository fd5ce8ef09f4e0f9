"""What `make run` observes: exclusivity is checked among the Jobs of one topology key only."""

from __future__ import annotations

from typing import Any

from devstack.report import Timeline
from devstack.scenario import observe
from placement.constants import GKE_NODEPOOL_LABEL, JOB_NAME_LABEL, TOPOLOGY_ANNOTATION

Obj = dict[str, Any]


def node(name: str, pool: str) -> Obj:
    return {"metadata": {"name": name, "labels": {GKE_NODEPOOL_LABEL: pool}}}


def job(name: str, key: str) -> Obj:
    return {
        "metadata": {"name": name, "namespace": "default", "annotations": {TOPOLOGY_ANNOTATION: key}},
        "spec": {"completions": 1, "parallelism": 1},
        "status": {},
    }


def pod(job_name: str, node_name: str) -> Obj:
    return {
        "metadata": {"name": f"{job_name}-0", "namespace": "default", "labels": {JOB_NAME_LABEL: job_name}},
        "spec": {"nodeName": node_name},
        "status": {"phase": "Running"},
    }


class Listed:
    """A cluster that answers `list` from fixed objects."""

    def __init__(self, jobs: list[Obj], pods: list[Obj]) -> None:
        self.objects = {"Job": jobs, "Pod": pods}

    def list(
        self, kind: str, *, namespace: str | None = None, label_selector: str | None = None
    ) -> list[Obj]:
        return self.objects[kind]


def test_a_job_on_a_key_no_node_carries_shares_no_domain_with_the_others() -> None:
    nodes = [node("n0", "pool-0"), node("n1", "pool-1")]
    jobs = [
        job("a", GKE_NODEPOOL_LABEL),
        job("b", GKE_NODEPOOL_LABEL),
        job("typo", "cloud.google.com/gke-nodepol"),
    ]
    cluster = Listed(jobs, [pod("a", "n0"), pod("b", "n1")])
    observation = observe(cluster, None, Timeline(0.0), nodes)  # type: ignore[arg-type]
    assert observation.problems == []


def test_two_jobs_of_one_key_in_one_domain_are_a_violation() -> None:
    nodes = [node("n0", "pool-0"), node("n1", "pool-0")]
    jobs = [job("a", GKE_NODEPOOL_LABEL), job("b", GKE_NODEPOOL_LABEL)]
    observation = observe(Listed(jobs, [pod("a", "n0"), pod("b", "n1")]), None, Timeline(0.0), nodes)  # type: ignore[arg-type]
    assert observation.problems == ["domain pool-0 shared by default/a and default/b"]
