"""placement.capacity: enough domains for a JobSet, a domain large enough for a Job, in numbers."""

from __future__ import annotations

from typing import Any

import pytest

from placement.capacity import (
    CapacityReason,
    NodeRooms,
    domain_too_small,
    job_capacity_known,
    job_capacity_problem,
    jobset_capacity_known,
    jobset_capacity_problems,
    node_fits,
    node_room,
    parse_quantity,
    pod_requests,
    pods_at_once,
    schedulable_domains,
    show_quantity,
    too_few_domains,
)
from placement.constants import (
    GKE_NODEPOOL_LABEL,
    GPU_RESOURCE,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    TARGET_PARALLELISM_ANNOTATION,
    TOPOLOGY_ANNOTATION,
)
from tests.support.builders import make_node

POOL = GKE_NODEPOOL_LABEL


def pools(count: int, nodes: int = 2, gpus: int = 8, *, cordoned: tuple[int, ...] = ()) -> list[Any]:
    built = []
    for pool in range(count):
        for node in range(nodes):
            obj = make_node(f"n-{pool}-{node}").label(POOL, f"pool-{pool}").obj()
            obj["status"] = {"allocatable": {GPU_RESOURCE: str(gpus), "cpu": "16", "pods": "110"}}
            if pool in cordoned:
                obj.setdefault("spec", {})["unschedulable"] = True
            built.append(node_room(obj))
    return built


def template(pods: int, gpus: int) -> dict[str, Any]:
    resources = {"limits": {GPU_RESOURCE: str(gpus)}, "requests": {"cpu": "500m"}}
    return {
        "spec": {
            "completions": pods,
            "parallelism": pods,
            "completionMode": "Indexed",
            "template": {"spec": {"containers": [{"name": "c", "resources": resources}]}},
        }
    }


def exclusive_job(pods: int, gpus: int) -> dict[str, Any]:
    job = template(pods, gpus)
    job["metadata"] = {"name": "train", "annotations": {TOPOLOGY_ANNOTATION: POOL}}
    return job


def jobset(jobs: int, pods: int = 2, gpus: int = 4) -> dict[str, Any]:
    return {
        "metadata": {"name": "js", "annotations": {JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: POOL}},
        "spec": {"replicatedJobs": [{"name": "workers", "replicas": jobs, "template": template(pods, gpus)}]},
    }


@pytest.mark.parametrize(
    ("text", "milli"),
    [("4", 4000), ("500m", 500), ("1.5", 1500), ("4Gi", 4 * 2**30 * 1000), ("1k", 10**6), ("1e3", 10**6)],
)
def test_quantities_parse_into_thousandths(text: str, milli: int) -> None:
    assert parse_quantity(text) == milli


@pytest.mark.parametrize("text", ["", "four", "4Xi", "1e3Gi", True])
def test_what_is_not_a_quantity_is_none(text: object) -> None:
    assert parse_quantity(text) is None


def test_quantities_are_shown_as_people_write_them() -> None:
    assert show_quantity(GPU_RESOURCE, 32_000) == "32"
    assert show_quantity("cpu", 500) == "500m"
    assert show_quantity("memory", 64 * 2**30 * 1000) == "64Gi"


def test_a_pods_requests_sum_its_containers_count_init_containers_and_take_a_pods_slot() -> None:
    spec = {
        "containers": [
            {"resources": {"requests": {"cpu": "1"}, "limits": {GPU_RESOURCE: "2"}}},
            {"resources": {"requests": {"cpu": "500m"}}},
        ],
        "initContainers": [{"resources": {"requests": {"cpu": "4"}}}],
        "overhead": {"cpu": "100m"},
    }
    assert pod_requests(spec) == {"cpu": 4100, GPU_RESOURCE: 2000, "pods": 1000}


def test_a_node_holds_as_many_pods_as_its_scarcest_requested_resource_allows() -> None:
    node = pools(1, 1, gpus=8)[0]
    assert node_fits(node, {GPU_RESOURCE: 3000, "cpu": 1000, "pods": 1000}) == 2
    assert node_fits(node, {"example.com/fpga": 1000, "pods": 1000}) == 0


def test_pods_at_once_is_the_recorded_target_else_parallelism_within_completions() -> None:
    assert pods_at_once(template(8, 1)) == 8
    shrunk = template(1, 1)
    shrunk["metadata"] = {"annotations": {TARGET_PARALLELISM_ANNOTATION: "8"}}
    assert pods_at_once(shrunk) == 8
    assert pods_at_once({"spec": {"completions": 10, "parallelism": 3}}) == 3


def test_five_jobs_on_four_pools_are_too_many() -> None:
    problem = too_few_domains(5, POOL, 4)
    assert problem is not None
    assert problem.reason is CapacityReason.TOO_FEW_DOMAINS
    assert problem.message == f"5 Jobs need 5 {POOL} domains; 4 exist"
    assert too_few_domains(4, POOL, 4) is None


def test_no_domain_at_all_names_the_label() -> None:
    problem = too_few_domains(1, "example.com/rack", 0)
    assert problem is not None
    assert problem.message == (
        "1 Job needs 1 example.com/rack domain; none exists (no schedulable node carries the label "
        "example.com/rack)"
    )


def test_a_cordoned_pool_is_not_a_domain() -> None:
    assert len(schedulable_domains(pools(4, cordoned=(0,)), POOL)) == 3


def test_eight_pods_of_four_gpus_do_not_fit_pools_of_two_eight_gpu_nodes() -> None:
    problem = job_capacity_problem(exclusive_job(8, 4), pools(3, nodes=2, gpus=8))
    assert problem is not None
    assert problem.reason is CapacityReason.DOMAIN_TOO_SMALL
    assert problem.message == (
        f"8 pods x 4 {GPU_RESOURCE} need 32 {GPU_RESOURCE} in one {POOL} domain; the largest has 16 "
        "(room for 4 such pods)"
    )
    assert job_capacity_problem(exclusive_job(4, 4), pools(3, nodes=2, gpus=8)) is None


def test_fragmented_nodes_are_counted_per_node() -> None:
    # 2 nodes x 3 GPUs: 6 GPUs in the pool, yet only 2 pods of 2 GPUs fit
    domains = schedulable_domains(pools(1, nodes=2, gpus=3), POOL)
    problem = domain_too_small(3, {GPU_RESOURCE: 2000, "pods": 1000}, POOL, domains)
    assert problem is not None
    assert "need 6 nvidia.com/gpu" in problem.message
    assert "the largest has 6 (room for 2 such pods)" in problem.message


def test_nodes_without_allocatable_say_nothing() -> None:
    bare = [node_room(make_node("n").label(POOL, "p").obj())]
    assert job_capacity_problem(exclusive_job(8, 4), bare) is None


def test_a_jobset_gets_both_diagnoses_with_its_replicated_jobs_name() -> None:
    problems = jobset_capacity_problems(jobset(5, pods=8, gpus=4), pools(4))
    assert [(p.reason, p.message) for p in problems] == [
        (CapacityReason.TOO_FEW_DOMAINS, f"5 Jobs need 5 {POOL} domains; 4 exist"),
        (
            CapacityReason.DOMAIN_TOO_SMALL,
            f"replicated Job workers: 8 pods x 4 {GPU_RESOURCE} need 32 {GPU_RESOURCE} in one {POOL} "
            "domain; the largest has 16 (room for 4 such pods)",
        ),
    ]
    assert jobset_capacity_problems(jobset(4), pools(4)) == []


def test_a_look_at_the_nodes_knows_a_job_once_it_answered_its_shape() -> None:
    rooms = NodeRooms(pools(4))
    job = exclusive_job(8, 4)
    assert not job_capacity_known(job, rooms)
    answer = job_capacity_problem(job, rooms)
    assert job_capacity_known(job, rooms)
    assert job_capacity_problem(job, rooms) == answer
    assert not job_capacity_known(exclusive_job(8, 2), rooms)  # another shape
    assert not job_capacity_known(job, NodeRooms(pools(4)))  # another look at the nodes


def test_a_look_at_the_nodes_knows_a_jobset_once_it_answered_every_replicated_job() -> None:
    rooms = NodeRooms(pools(4))
    five = jobset(5, pods=8, gpus=4)
    assert not jobset_capacity_known(five, rooms)
    answer = jobset_capacity_problems(five, rooms)
    assert jobset_capacity_known(five, rooms)
    assert jobset_capacity_problems(five, rooms) == answer
    assert not jobset_capacity_known(jobset(4), rooms)


def test_no_node_at_all_is_known_and_a_plain_list_never_is() -> None:
    assert job_capacity_known(exclusive_job(8, 4), NodeRooms())
    assert jobset_capacity_known(jobset(5), NodeRooms())
    listed = pools(4)
    job_capacity_problem(exclusive_job(8, 4), listed)
    assert not job_capacity_known(exclusive_job(8, 4), listed)
    assert not jobset_capacity_known(jobset(5), listed)
