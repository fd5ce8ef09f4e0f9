"""A plain Indexed Job Kueue queues (label `kueue.x-k8s.io/queue-name`) is never shrunk by `elastic`: Kueue
builds its Workload from the Job, so it would take one pod's quota and stop the Job at its resize. It
falls back to `gate` at full size, with a warning naming Kueue, recorded in
`exclusive-placement.io/elastic-fallback`.
So is a plain Job that names no queue where Kueue's LocalQueue defaulting will queue it (its namespace's
`default` LocalQueue exists, or could not be read).
A JobSet's child Job is shrunk as before: Kueue builds a JobSet's Workload from the JobSet."""

from __future__ import annotations

import pytest

from placement.admission import mutate_job
from placement.constants import (
    ELASTIC_FALLBACK_ANNOTATION,
    KUEUE_QUEUE_NAME_LABEL,
    STRATEGY_ANNOTATION,
    TARGET_COMPLETIONS_ANNOTATION,
    TOPOLOGY_ANNOTATION,
    Strategy,
)
from placement.jobset import JobSetStartup, jobset_startup
from placement.kueue import KUEUE_ELASTIC_JOB_ANNOTATION, DefaultQueue, kueue_elastic_problem
from placement.kueue_tas import KUEUE_TAS_ANNOTATIONS, QueueFlavors, QueueUnread
from placement.patch import apply
from tests.placement.placement_pods import ZONE, job

QUEUED = {KUEUE_QUEUE_NAME_LABEL: "user-queue"}


@pytest.mark.parametrize(
    "annotations",
    [{}, {KUEUE_ELASTIC_JOB_ANNOTATION: "true"}],
    ids=["queued", "kueue-elastic-job"],
)
def test_a_plain_job_kueue_queues_falls_back_to_gate_at_full_size_naming_kueue(
    annotations: dict[str, str],
) -> None:
    original = job(labels=QUEUED, annotations=annotations, template_annotations={TOPOLOGY_ANNOTATION: ZONE})
    verdict = mutate_job(original, Strategy.ELASTIC)
    admitted = apply(original, verdict.patch)
    assert verdict.allowed
    assert verdict.reason == "queued-by-kueue"
    assert (admitted["spec"]["completions"], admitted["spec"]["parallelism"]) == (4, 4)
    assert TARGET_COMPLETIONS_ANNOTATION not in admitted["metadata"].get("annotations", {})
    assert admitted["spec"]["template"]["metadata"]["annotations"][STRATEGY_ANNOTATION] == "gate"
    (warning,) = verdict.warnings
    assert "Kueue" in warning
    assert "user-queue" in warning
    assert "using gate" in warning
    recorded = admitted["metadata"]["annotations"][ELASTIC_FALLBACK_ANNOTATION]
    assert "Kueue" in recorded
    assert recorded in warning


def test_the_kueue_elastic_job_opt_in_is_named_in_the_fallback() -> None:
    opted_in = job(labels=QUEUED, annotations={KUEUE_ELASTIC_JOB_ANNOTATION: "true"})
    assert KUEUE_ELASTIC_JOB_ANNOTATION in str(kueue_elastic_problem(opted_in))
    assert KUEUE_ELASTIC_JOB_ANNOTATION not in str(kueue_elastic_problem(job(labels=QUEUED)))


@pytest.mark.parametrize("labels", [None, {KUEUE_QUEUE_NAME_LABEL: ""}], ids=["no-label", "empty-label"])
def test_a_job_kueue_does_not_queue_is_shrunk(labels: dict[str, str] | None) -> None:
    original = job(labels=labels, template_annotations={TOPOLOGY_ANNOTATION: ZONE})
    verdict = mutate_job(original, Strategy.ELASTIC)
    admitted = apply(original, verdict.patch)
    assert verdict.reason == "shrunk"
    assert admitted["spec"]["completions"] == 1
    assert kueue_elastic_problem(original) is None


DEFAULTED = QueueFlavors("team-a/default", "gpu-queue", (("h100", None),), defaulted=True)


def test_a_plain_job_kueue_defaults_to_the_namespaces_default_queue_falls_back_to_gate() -> None:
    original = job(template_annotations={TOPOLOGY_ANNOTATION: ZONE})
    verdict = mutate_job(original, Strategy.ELASTIC, kueue_queue=DEFAULTED)
    admitted = apply(original, verdict.patch)
    assert verdict.reason == "queued-by-kueue"
    assert (admitted["spec"]["completions"], admitted["spec"]["parallelism"]) == (4, 4)
    recorded = admitted["metadata"]["annotations"][ELASTIC_FALLBACK_ANNOTATION]
    assert recorded.startswith(
        "the Job is queued by Kueue (it names no LocalQueue, and its namespace has LocalQueue "
        f"team-a/default: Kueue's LocalQueue defaulting labels the Job {KUEUE_QUEUE_NAME_LABEL}=default)"
    )


def test_a_default_queue_that_could_not_be_read_falls_back_to_gate_saying_so() -> None:
    why = kueue_elastic_problem(job(), DefaultQueue("team-a/default", "no answer within 2 s"))
    assert why is not None
    assert "LocalQueue team-a/default could not be read (no answer within 2 s)" in why
    original = job(template_annotations={TOPOLOGY_ANNOTATION: ZONE})
    unread = QueueUnread("team-a/default", "no answer within 2 s", defaulted=True)
    assert mutate_job(original, Strategy.ELASTIC, kueue_queue=unread).reason == "queued-by-kueue"


def test_a_queue_read_under_its_own_name_or_for_a_jobset_child_is_no_default() -> None:
    named = QueueFlavors("team-a/user-queue", "gpu-queue", (("h100", None),))
    original = job(template_annotations={TOPOLOGY_ANNOTATION: ZONE})
    assert mutate_job(original, Strategy.ELASTIC, kueue_queue=named).reason == "shrunk"
    assert kueue_elastic_problem(job(jobset="trainer"), DefaultQueue("team-a/default")) is None


def test_a_jobset_child_job_with_kueues_label_is_still_shrunk() -> None:
    """Kueue queues the JobSet, never its child Jobs: their resize is invisible to it."""
    original = job(labels=QUEUED, jobset="trainer", template_annotations={TOPOLOGY_ANNOTATION: ZONE})
    verdict = mutate_job(original, Strategy.ELASTIC, owner=JobSetStartup())
    admitted = apply(original, verdict.patch)
    assert verdict.reason == "shrunk"
    assert admitted["spec"]["completions"] == 1
    assert kueue_elastic_problem(original) is None


def test_a_child_job_of_a_jobset_kueue_queues_is_shrunk() -> None:
    """Kueue takes the JobSet's quota from the JobSet's spec; a preemption's suspension in place is undone by
    the resizer's rewind (tests/placement/test_placement_rewind.py, tests/kube: preemption)."""
    original = job(jobset="trainer", template_annotations={TOPOLOGY_ANNOTATION: ZONE})
    queued = jobset_startup({"metadata": {"name": "trainer", "labels": QUEUED}, "spec": {}})
    verdict = mutate_job(original, Strategy.ELASTIC, owner=queued)
    admitted = apply(original, verdict.patch)
    assert verdict.reason == "shrunk"
    assert verdict.warnings == ()
    assert (admitted["spec"]["completions"], admitted["spec"]["parallelism"]) == (1, 1)
    assert ELASTIC_FALLBACK_ANNOTATION not in admitted["metadata"]["annotations"]


@pytest.mark.parametrize("strategy", [Strategy.GATE, Strategy.AFFINITY])
def test_other_strategies_of_a_queued_job_are_left_as_asked(strategy: Strategy) -> None:
    original = job(labels=QUEUED, template_annotations={TOPOLOGY_ANNOTATION: ZONE})
    verdict = mutate_job(original, strategy)
    admitted = apply(original, verdict.patch)
    assert verdict.warnings == ()
    assert admitted["spec"]["completions"] == 4
    assert ELASTIC_FALLBACK_ANNOTATION not in admitted["metadata"].get("annotations", {})


def test_a_single_pod_queued_job_needs_no_fallback() -> None:
    original = job(
        labels=QUEUED, completions=1, parallelism=1, template_annotations={TOPOLOGY_ANNOTATION: ZONE}
    )
    verdict = mutate_job(original, Strategy.ELASTIC)
    assert verdict.reason == "single-pod"
    assert verdict.warnings == ()


TAS_REQUIRED = "kueue.x-k8s.io/podset-required-topology"
TAS_REQUESTS = {
    TAS_REQUIRED: ZONE,
    "kueue.x-k8s.io/podset-preferred-topology": ZONE,
    "kueue.x-k8s.io/podset-unconstrained-topology": "true",
    "kueue.x-k8s.io/podset-slice-required-topology": ZONE,
    "kueue.x-k8s.io/podset-slice-required-topology-constraints": f'[{{"topology": "{ZONE}", "size": 2}}]',
}
"""Every annotation that makes Kueue v0.19.2 place a PodSet with TAS, with a value it accepts."""


def test_every_annotation_that_asks_kueue_for_tas_is_known() -> None:
    assert set(KUEUE_TAS_ANNOTATIONS) == set(TAS_REQUESTS)


@pytest.mark.parametrize("strategy", list(Strategy))
@pytest.mark.parametrize("where", ["Job", "pod template"])
def test_a_queued_exclusive_job_asking_kueue_tas_for_a_topology_is_denied_naming_the_conflict(
    strategy: Strategy, where: str
) -> None:
    tas = {TAS_REQUIRED: ZONE}
    template = {TOPOLOGY_ANNOTATION: ZONE, STRATEGY_ANNOTATION: str(strategy)}
    original = job(
        labels=QUEUED,
        annotations=tas if where == "Job" else {},
        template_annotations=template | (tas if where == "pod template" else {}),
    )
    verdict = mutate_job(original, Strategy.ELASTIC)
    assert (verdict.allowed, verdict.reason) == (False, "kueue-tas-conflict")
    field = "metadata.annotations" if where == "Job" else "spec.template.metadata.annotations"
    assert f": {field}: {TAS_REQUIRED}={ZONE} asks Kueue's Topology Aware Scheduling" in verdict.message


@pytest.mark.parametrize(("key", "value"), TAS_REQUESTS.items(), ids=list(TAS_REQUESTS))
def test_each_way_of_asking_kueue_for_tas_is_denied_on_a_queued_exclusive_job(key: str, value: str) -> None:
    original = job(labels=QUEUED, template_annotations={TOPOLOGY_ANNOTATION: ZONE, key: value})
    verdict = mutate_job(original, Strategy.ELASTIC)
    assert (verdict.allowed, verdict.reason) == (False, "kueue-tas-conflict")
    assert f"spec.template.metadata.annotations: {key}={value} asks Kueue's" in verdict.message


def test_tas_annotations_on_a_job_kueue_does_not_queue_are_no_conflict() -> None:
    original = job(template_annotations={TOPOLOGY_ANNOTATION: ZONE, TAS_REQUIRED: ZONE})
    assert mutate_job(original, Strategy.GATE).allowed
