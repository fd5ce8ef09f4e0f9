"""placement.kueue_tas: a workload whose LocalQueue feeds a ClusterQueue of TAS flavors only is denied."""

from __future__ import annotations

from typing import Any

import pytest

from placement.admission import mutate_job
from placement.constants import KUEUE_QUEUE_NAME_LABEL, TOPOLOGY_ANNOTATION, Strategy
from placement.jobset_validation import validate_jobset
from placement.kueue import DEFAULT_LOCAL_QUEUE, DefaultQueue, queue_name
from placement.kueue_tas import (
    QueueFlavors,
    QueueUnread,
    default_queue_of,
    flavor_names,
    implied_tas_conflict,
    job_queue_to_read,
    jobset_queue_to_read,
    queue_flavors,
    topology_of_flavor,
    unread_queue_warning,
)
from tests.placement.placement_pods import ZONE, job
from tests.placement.test_placement_jobset_validation import jobset

QUEUE = "user-queue"
QUEUED = {KUEUE_QUEUE_NAME_LABEL: QUEUE}
TAS_ONLY = QueueFlavors("team-a/user-queue", "gpu-queue", (("h100-tas", "pools"),))
MIXED = QueueFlavors("team-a/user-queue", "gpu-queue", (("h100", None), ("h100-tas", "pools")))


def cluster_queue(*groups: list[str]) -> dict[str, Any]:
    return {
        "spec": {
            "resourceGroups": [
                {"coveredResources": ["nvidia.com/gpu"], "flavors": [{"name": name} for name in names]}
                for names in groups
            ]
        }
    }


def queued_jobset() -> dict[str, Any]:
    queued = jobset()
    queued["metadata"]["labels"] = dict(QUEUED)
    return queued


def test_a_cluster_queues_flavors_are_read_in_order_once_each() -> None:
    assert flavor_names(cluster_queue(["a", "b"], ["b", "c"])) == ["a", "b", "c"]
    assert flavor_names({"spec": {"resourceGroups": [{"flavors": [{}, "x"]}, "y"]}}) == []
    assert flavor_names({}) == []


def test_a_flavor_is_a_tas_flavor_when_it_exists_and_names_a_topology() -> None:
    assert topology_of_flavor({"spec": {"topologyName": "pools"}}) == "pools"
    assert topology_of_flavor({"spec": {"nodeLabels": {"a": "b"}}}) is None
    assert topology_of_flavor({"spec": {"topologyName": ""}}) is None
    assert topology_of_flavor(None) is None


@pytest.mark.parametrize(
    ("flavors", "tas_only"),
    [
        ({"h100-tas": {"spec": {"topologyName": "pools"}}}, True),
        ({"a": {"spec": {"topologyName": "pools"}}, "b": {"spec": {"topologyName": "racks"}}}, True),
        ({"h100": {"spec": {}}, "h100-tas": {"spec": {"topologyName": "pools"}}}, False),
        ({"h100-tas": {"spec": {"topologyName": "pools"}}, "missing": None}, False),
        ({}, False),
    ],
    ids=["one TAS flavor", "two TAS flavors", "a flavor without a topology", "an absent flavor", "none"],
)
def test_only_a_cluster_queue_of_tas_flavors_alone_makes_kueue_use_tas_unasked(
    flavors: dict[str, Any], tas_only: bool
) -> None:
    queue = queue_flavors("team-a/user-queue", "gpu-queue", flavors)
    assert queue.flavors == tuple((name, topology_of_flavor(flavor)) for name, flavor in flavors.items())
    assert queue.tas_only is tas_only
    assert (implied_tas_conflict(queue, "JobSet") is not None) is tas_only


def test_the_queue_is_read_only_for_a_queued_workload_with_exclusive_jobs() -> None:
    assert jobset_queue_to_read(queued_jobset()) == QUEUE
    assert jobset_queue_to_read(jobset()) is None
    not_exclusive = jobset({})
    not_exclusive["metadata"]["labels"] = dict(QUEUED)
    assert jobset_queue_to_read(not_exclusive) is None
    assert queue_name(job(labels=QUEUED)) == QUEUE
    assert queue_name(job(labels=QUEUED, jobset="trainer")) is None


def test_a_plain_job_naming_no_queue_has_the_default_one_read_and_a_jobset_child_none() -> None:
    assert job_queue_to_read(job(labels=QUEUED)) == (QUEUE, False)
    assert job_queue_to_read(job()) == (DEFAULT_LOCAL_QUEUE, True)
    assert job_queue_to_read(job(labels={KUEUE_QUEUE_NAME_LABEL: ""})) == (DEFAULT_LOCAL_QUEUE, True)
    assert job_queue_to_read(job(labels=QUEUED, jobset="trainer")) is None
    assert job_queue_to_read(job(jobset="trainer")) is None


def test_only_a_queue_read_as_the_default_one_is_a_default_queue() -> None:
    defaulted = QueueFlavors("team-a/default", "gpu-queue", (("h100", None),), defaulted=True)
    assert default_queue_of(defaulted) == DefaultQueue("team-a/default")
    unread = QueueUnread("team-a/default", "GET localqueues/default: 500", defaulted=True)
    assert default_queue_of(unread) == DefaultQueue("team-a/default", "GET localqueues/default: 500")
    assert default_queue_of(MIXED) is None
    assert default_queue_of(QueueUnread("team-a/user-queue", "timed out")) is None
    assert default_queue_of(None) is None


def test_a_tas_conflict_through_the_default_queue_says_that_kueue_sets_the_label() -> None:
    defaulted = QueueFlavors("team-a/default", "gpu-queue", (("h100-tas", "pools"),), defaulted=True)
    conflict = implied_tas_conflict(defaulted, "Job")
    assert conflict is not None
    assert conflict.startswith(
        f"{KUEUE_QUEUE_NAME_LABEL}=default (none set: Kueue's LocalQueue defaulting sets it): "
        "LocalQueue team-a/default feeds ClusterQueue gpu-queue"
    )
    assert "LocalQueue defaulting" not in str(implied_tas_conflict(TAS_ONLY, "Job"))


def test_a_jobset_queued_where_kueue_uses_tas_unasked_is_denied_naming_the_queues_and_the_remedy() -> None:
    verdict = validate_jobset(queued_jobset(), default_all_or_nothing=False, kueue_queue=TAS_ONLY)
    assert (verdict.allowed, verdict.reason) == (False, "kueue-tas-conflict")
    assert verdict.message == (
        "exclusive placement: JobSet trainer: metadata.labels: kueue.x-k8s.io/queue-name=user-queue: "
        "LocalQueue team-a/user-queue feeds ClusterQueue gpu-queue, whose flavors are all Topology Aware "
        "Scheduling flavors (h100-tas (Topology pools)), so Kueue places every JobSet it admits with TAS, "
        "asked or not: TAS packs each Job's pods without regard to exclusivity, and a Job it packs next to "
        "another would wait Pending forever; queue exclusive workloads through a ClusterQueue that has a "
        "flavor without spec.topologyName for their resources"
    )


@pytest.mark.parametrize("queue", [MIXED, None], ids=["a flavor without a topology", "no queue read"])
def test_a_jobset_queued_where_kueue_uses_tas_only_when_asked_is_valid(queue: QueueFlavors | None) -> None:
    verdict = validate_jobset(queued_jobset(), default_all_or_nothing=False, kueue_queue=queue)
    assert (verdict.allowed, verdict.reason, verdict.warnings) == (True, "valid", ())


def test_a_queue_the_webhook_could_not_read_is_allowed_with_a_warning_that_says_what_was_not_checked() -> (
    None
):
    unread = QueueUnread("team-a/user-queue", "GET clusterqueues/gpu-queue: 500")
    verdict = validate_jobset(queued_jobset(), default_all_or_nothing=False, kueue_queue=unread)
    assert verdict.allowed
    assert verdict.warnings == (unread_queue_warning(unread),)
    assert verdict.warnings[0] == (
        "exclusive placement: could not read Kueue's LocalQueue team-a/user-queue, its ClusterQueue or their "
        "flavors (GET clusterqueues/gpu-queue: 500): not checked whether Kueue places this workload with "
        "Topology Aware Scheduling, which packs pods without regard to exclusivity"
    )


@pytest.mark.parametrize("strategy", list(Strategy))
def test_a_plain_exclusive_job_queued_where_kueue_uses_tas_unasked_is_denied(strategy: Strategy) -> None:
    queued = job(labels=QUEUED, template_annotations={TOPOLOGY_ANNOTATION: ZONE})
    verdict = mutate_job(queued, strategy, kueue_queue=TAS_ONLY)
    assert (verdict.allowed, verdict.reason) == (False, "kueue-tas-conflict")
    assert verdict.message.startswith(
        "exclusive placement: Job trainer-workers-0: metadata.labels: kueue.x-k8s.io/queue-name=user-queue: "
        "LocalQueue team-a/user-queue feeds ClusterQueue gpu-queue"
    )
    assert "so Kueue places every Job it admits with TAS" in verdict.message


def test_a_plain_exclusive_job_whose_queue_could_not_be_read_is_admitted_with_the_warning() -> None:
    queued = job(labels=QUEUED, template_annotations={TOPOLOGY_ANNOTATION: ZONE})
    unread = QueueUnread("team-a/user-queue", "timed out")
    verdict = mutate_job(queued, Strategy.GATE, kueue_queue=unread)
    assert verdict.allowed
    assert unread_queue_warning(unread) in verdict.warnings
    assert (
        mutate_job(queued, Strategy.GATE, kueue_queue=MIXED).warnings
        == mutate_job(queued, Strategy.GATE).warnings
    )
