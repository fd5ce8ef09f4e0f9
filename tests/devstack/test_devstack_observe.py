"""What `make run` observes (its client listing a fake API server): exclusivity is checked among the Jobs of
one topology key only."""

from __future__ import annotations

from typing import Any

from devstack.report import Timeline
from devstack.scenario import observe
from kubekit.generic import GenericClient
from placement.constants import GKE_NODEPOOL_LABEL, JOB_NAME_LABEL, TOPOLOGY_ANNOTATION
from tests.support.fake_api import FakeKubeApi

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


def listed(api: FakeKubeApi, jobs: list[Obj], pods: list[Obj]) -> None:
    """The cluster holds `jobs` and `pods`."""
    for each in jobs:
        api.put("jobs", each)
    for each in pods:
        api.put("pods", each)


def test_a_job_on_a_key_no_node_carries_shares_no_domain_with_the_others(
    fake_api: FakeKubeApi, cluster: GenericClient
) -> None:
    nodes = [node("n0", "pool-0"), node("n1", "pool-1")]
    jobs = [
        job("a", GKE_NODEPOOL_LABEL),
        job("b", GKE_NODEPOOL_LABEL),
        job("typo", "cloud.google.com/gke-nodepol"),
    ]
    listed(fake_api, jobs, [pod("a", "n0"), pod("b", "n1")])
    observation = observe(cluster, None, Timeline(0.0), nodes)
    assert observation.problems == []


def test_two_jobs_of_one_key_in_one_domain_are_a_violation(
    fake_api: FakeKubeApi, cluster: GenericClient
) -> None:
    nodes = [node("n0", "pool-0"), node("n1", "pool-0")]
    jobs = [job("a", GKE_NODEPOOL_LABEL), job("b", GKE_NODEPOOL_LABEL)]
    listed(fake_api, jobs, [pod("a", "n0"), pod("b", "n1")])
    observation = observe(cluster, None, Timeline(0.0), nodes)
    assert observation.problems == ["domain pool-0 shared by default/a and default/b"]
