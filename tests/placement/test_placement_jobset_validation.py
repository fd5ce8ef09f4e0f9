"""placement.jobset_validation and placement.topology: what a JobSet's admission denies or warns about."""

from __future__ import annotations

from typing import Any

import pytest

from placement.admission import Verdict
from placement.constants import (
    ALL_OR_NOTHING_ANNOTATION,
    GKE_NODEPOOL_LABEL,
    HOSTNAME_LABEL,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    JOBSET_NODE_SELECTOR_ANNOTATION,
    STRATEGY_ANNOTATION,
    TOPOLOGY_ANNOTATION,
    ZONE_LABEL,
)
from placement.jobset_validation import validate_jobset
from placement.topology import unknown_topology_warning, with_topology_warning
from tests.placement.placement_pods import job

NODE_KEYS = frozenset({GKE_NODEPOOL_LABEL, HOSTNAME_LABEL, ZONE_LABEL})
VALID = "valid values: elastic, gate, scheduling-gate, affinity"
POD_TEMPLATE = "spec.replicatedJobs[0].template.spec.template.metadata.annotations"


def jobset(
    annotations: dict[str, str] | None = None,
    *,
    job_annotations: dict[str, str] | None = None,
    pod_annotations: dict[str, str] | None = None,
    mode: str | None = "Indexed",
) -> dict[str, Any]:
    """A JobSet of one replicated Job `workers`, exclusive on node pools unless `annotations` say else."""
    job_spec: dict[str, Any] = {
        "completions": 2,
        "parallelism": 2,
        "template": {"metadata": {"annotations": pod_annotations or {}}, "spec": {"containers": []}},
    }
    if mode is not None:
        job_spec["completionMode"] = mode
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": "trainer",
            "annotations": {JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: GKE_NODEPOOL_LABEL}
            if annotations is None
            else annotations,
        },
        "spec": {
            "replicatedJobs": [
                {
                    "name": "workers",
                    "replicas": 2,
                    "template": {"metadata": {"annotations": job_annotations or {}}, "spec": job_spec},
                }
            ]
        },
    }


def check(js: dict[str, Any], *, default_all_or_nothing: bool = False, old: Any = None) -> Verdict:
    return validate_jobset(
        js, default_all_or_nothing=default_all_or_nothing, node_label_keys=NODE_KEYS, old=old
    )


@pytest.mark.parametrize(
    ("the_jobset", "where"),
    [
        (jobset(pod_annotations={STRATEGY_ANNOTATION: "fastest"}), POD_TEMPLATE),
        (
            jobset(job_annotations={STRATEGY_ANNOTATION: "fastest"}),
            "spec.replicatedJobs[0].template.metadata",
        ),
        (
            jobset({TOPOLOGY_ANNOTATION: GKE_NODEPOOL_LABEL, STRATEGY_ANNOTATION: "fastest"}),
            "metadata.annotations",
        ),
    ],
    ids=["pod template", "Job template", "JobSet"],
)
def test_an_unknown_strategy_anywhere_is_denied_with_the_valid_values(
    the_jobset: dict[str, Any], where: str
) -> None:
    verdict = check(the_jobset)
    assert (verdict.allowed, verdict.reason) == (False, "invalid-jobset")
    assert verdict.message.startswith("exclusive placement: JobSet trainer: ")
    assert where in verdict.message
    assert "unknown exclusive placement strategy 'fastest'" in verdict.message
    assert VALID in verdict.message


@pytest.mark.parametrize("value", ["yes", "", "1", "ture"])
def test_a_malformed_all_or_nothing_value_is_denied_with_the_valid_values(value: str) -> None:
    verdict = check(
        jobset({JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: GKE_NODEPOOL_LABEL, ALL_OR_NOTHING_ANNOTATION: value})
    )
    assert not verdict.allowed
    assert f'{ALL_OR_NOTHING_ANNOTATION} is {value!r}; valid values: "true", "false"' in verdict.message


def test_every_problem_is_named_in_one_denial() -> None:
    verdict = check(
        jobset(
            {JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: GKE_NODEPOOL_LABEL, ALL_OR_NOTHING_ANNOTATION: "maybe"},
            pod_annotations={STRATEGY_ANNOTATION: "fastest"},
        )
    )
    assert "'maybe'" in verdict.message
    assert "'fastest'" in verdict.message


@pytest.mark.parametrize(
    ("annotation", "default", "denied"),
    [("true", False, True), (None, True, True), ("false", True, False), (None, False, False)],
)
def test_an_all_or_nothing_jobset_of_non_indexed_jobs_is_denied(
    annotation: str | None, default: bool, denied: bool
) -> None:
    annotations = {JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: GKE_NODEPOOL_LABEL}
    if annotation is not None:
        annotations[ALL_OR_NOTHING_ANNOTATION] = annotation
    verdict = check(jobset(annotations, mode="NonIndexed"), default_all_or_nothing=default)
    assert verdict.allowed is not denied
    if denied:
        assert "completionMode is NonIndexed" in verdict.message
        assert "set completionMode: Indexed" in verdict.message


def test_a_valid_jobset_is_allowed_without_warnings() -> None:
    verdict = check(
        jobset(
            {JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: GKE_NODEPOOL_LABEL, ALL_OR_NOTHING_ANNOTATION: "true"},
            pod_annotations={STRATEGY_ANNOTATION: "scheduling-gate"},
        )
    )
    assert (verdict.allowed, verdict.warnings) == (True, ())


def test_all_or_nothing_on_a_template_is_allowed_with_a_warning_that_it_is_not_read_there() -> None:
    verdict = check(jobset(pod_annotations={ALL_OR_NOTHING_ANNOTATION: "true"}))
    assert verdict.allowed
    assert verdict.warnings == (
        f"exclusive placement: {ALL_OR_NOTHING_ANNOTATION} is read from the JobSet's own "
        f"metadata.annotations only; at {POD_TEMPLATE.removesuffix('.annotations')} it has no effect",
    )


def test_a_topology_key_no_node_carries_is_allowed_with_a_warning() -> None:
    verdict = check(jobset({TOPOLOGY_ANNOTATION: "cloud.google.com/gke-nodepol"}))
    assert verdict.allowed
    assert len(verdict.warnings) == 1
    assert "no node carries the label cloud.google.com/gke-nodepol" in verdict.warnings[0]
    assert f"did you mean {GKE_NODEPOOL_LABEL}?" in verdict.warnings[0]


@pytest.mark.parametrize(
    "the_jobset",
    [
        jobset({}),
        jobset({"team": "a"}, pod_annotations={"other.io/strategy": "fastest"}),
        jobset({JOBSET_NODE_SELECTOR_ANNOTATION: "true", STRATEGY_ANNOTATION: "fastest"}),
    ],
    ids=["no annotations", "other projects' annotations", "JobSet's node-selector mode"],
)
def test_jobsets_without_this_projects_annotations_are_not_looked_at(the_jobset: dict[str, Any]) -> None:
    assert check(the_jobset) == Verdict(allowed=True, reason="not-exclusive")


def test_an_update_is_checked_only_when_it_changes_the_projects_annotations() -> None:
    broken = jobset(pod_annotations={STRATEGY_ANNOTATION: "fastest"})
    relabelled = jobset(pod_annotations={STRATEGY_ANNOTATION: "fastest"})
    relabelled["metadata"]["labels"] = {"team": "a"}
    assert check(relabelled, old=broken).reason == "unchanged"
    changed = jobset(
        {JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: GKE_NODEPOOL_LABEL, ALL_OR_NOTHING_ANNOTATION: "nope"}
    )
    assert not check(changed, old=jobset()).allowed


@pytest.mark.parametrize(
    ("before", "after", "shown"),
    [
        ({STRATEGY_ANNOTATION: "elastic"}, {STRATEGY_ANNOTATION: "gate"}, "from 'elastic' to 'gate'"),
        ({}, {ALL_OR_NOTHING_ANNOTATION: "true"}, "from absent to 'true'"),
        ({ALL_OR_NOTHING_ANNOTATION: "true"}, {}, "from 'true' to absent"),
    ],
    ids=["strategy changed", "all-or-nothing added", "all-or-nothing removed"],
)
def test_an_update_of_the_jobsets_strategy_or_all_or_nothing_is_denied_as_creation_only(
    before: dict[str, str], after: dict[str, str], shown: str
) -> None:
    topology = {JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: GKE_NODEPOOL_LABEL}
    verdict = check(jobset(topology | after), old=jobset(topology | before))
    assert (verdict.allowed, verdict.reason) == (False, "changed-at-runtime")
    assert verdict.message.startswith("exclusive placement: JobSet trainer: metadata.annotations: ")
    assert "applies only at the JobSet's creation" in verdict.message
    assert shown in verdict.message
    assert "delete and re-create the JobSet" in verdict.message


def test_removing_every_project_annotation_is_a_change_too() -> None:
    verdict = check(jobset({}), old=jobset({STRATEGY_ANNOTATION: "gate", TOPOLOGY_ANNOTATION: "x"}))
    assert verdict.reason == "changed-at-runtime"


def test_a_node_selector_mode_jobsets_annotations_may_change() -> None:
    old = jobset({JOBSET_NODE_SELECTOR_ANNOTATION: "true", STRATEGY_ANNOTATION: "elastic"})
    new = jobset({JOBSET_NODE_SELECTOR_ANNOTATION: "true", STRATEGY_ANNOTATION: "gate"})
    assert check(new, old=old).allowed


# --- placement.topology --------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("key", "known", "warned", "suggestion"),
    [
        (GKE_NODEPOOL_LABEL, NODE_KEYS, False, None),
        ("cloud.google.com/gke-nodepool-x", NODE_KEYS, True, GKE_NODEPOOL_LABEL),
        ("example.com/rack", NODE_KEYS, True, None),
        ("example.com/rack", frozenset(), False, None),
    ],
    ids=["known", "typo", "unknown", "no node known"],
)
def test_unknown_topology_warning(
    key: str, known: frozenset[str], warned: bool, suggestion: str | None
) -> None:
    warning = unknown_topology_warning(key, known)
    assert (warning is not None) is warned
    if warning is not None:
        assert f"no node carries the label {key}" in warning
        assert ("did you mean" in warning) is (suggestion is not None)


def test_a_jobs_admission_gets_the_topology_warning_after_its_own() -> None:
    exclusive = job(annotations={TOPOLOGY_ANNOTATION: "example.com/rack"})
    verdict = Verdict(allowed=True, reason="shrunk", warnings=("first",))
    warned = with_topology_warning(verdict, exclusive, NODE_KEYS)
    assert warned.warnings[0] == "first"
    assert "no node carries the label example.com/rack" in warned.warnings[1]
    denied = Verdict(allowed=False, reason="invalid-strategy", message="no")
    assert with_topology_warning(denied, exclusive, NODE_KEYS) == denied
    assert with_topology_warning(verdict, job(), NODE_KEYS) == verdict


TAS_REQUIRED = "kueue.x-k8s.io/podset-required-topology"


def queued(js: dict[str, Any]) -> dict[str, Any]:
    js["metadata"]["labels"] = {"kueue.x-k8s.io/queue-name": "user-queue"}
    return js


@pytest.mark.parametrize(
    ("the_jobset", "where"),
    [
        (queued(jobset(pod_annotations={TAS_REQUIRED: GKE_NODEPOOL_LABEL})), POD_TEMPLATE),
        (
            queued(jobset(job_annotations={"kueue.x-k8s.io/podset-preferred-topology": HOSTNAME_LABEL})),
            "spec.replicatedJobs[0].template.metadata.annotations",
        ),
        (
            queued(
                jobset(
                    {},
                    pod_annotations={
                        TOPOLOGY_ANNOTATION: GKE_NODEPOOL_LABEL,
                        STRATEGY_ANNOTATION: "affinity",
                        "kueue.x-k8s.io/podset-slice-required-topology": GKE_NODEPOOL_LABEL,
                    },
                )
            ),
            POD_TEMPLATE,
        ),
    ],
    ids=["required, JobSet's exclusive topology", "preferred on the Job template", "slice, per-Job topology"],
)
def test_a_queued_jobset_asking_kueue_tas_for_an_exclusive_replicated_jobs_topology_is_denied(
    the_jobset: dict[str, Any], where: str
) -> None:
    _assert_tas_conflict(check(the_jobset), where)


@pytest.mark.parametrize(
    "annotations",
    [
        {"kueue.x-k8s.io/podset-unconstrained-topology": "true"},
        {"kueue.x-k8s.io/podset-unconstrained-topology": "false"},
        {"kueue.x-k8s.io/podset-slice-required-topology-constraints": '[{"topology": "rack", "size": 2}]'},
    ],
    ids=["unconstrained", "unconstrained false (still TAS)", "multi-layer slices"],
)
def test_a_queued_jobset_asking_kueue_tas_without_a_topology_level_is_denied_too(
    annotations: dict[str, str],
) -> None:
    _assert_tas_conflict(check(queued(jobset(pod_annotations=annotations))), POD_TEMPLATE)


def _assert_tas_conflict(verdict: Verdict, where: str) -> None:
    assert (verdict.allowed, verdict.reason) == (False, "kueue-tas-conflict")
    assert verdict.message.startswith(f"exclusive placement: JobSet trainer: {where}: kueue.x-k8s.io/podset-")
    assert "Kueue's Topology Aware Scheduling" in verdict.message
    assert "alone in a domain" in verdict.message


@pytest.mark.parametrize(
    "the_jobset",
    [
        jobset(pod_annotations={TAS_REQUIRED: GKE_NODEPOOL_LABEL}),
        queued(jobset(pod_annotations={"kueue.x-k8s.io/podset-group-name": "g"})),
    ],
    ids=["not queued by Kueue", "no TAS topology"],
)
def test_tas_annotations_kueue_does_not_act_on_are_no_conflict(the_jobset: dict[str, Any]) -> None:
    assert check(the_jobset).allowed


def test_a_tas_annotation_on_a_replicated_job_that_is_not_exclusive_is_no_conflict() -> None:
    js = queued(jobset({}, pod_annotations={TOPOLOGY_ANNOTATION: GKE_NODEPOOL_LABEL}))
    driver = {
        "name": "driver",
        "replicas": 1,
        "template": {"spec": {"template": {"metadata": {"annotations": {TAS_REQUIRED: GKE_NODEPOOL_LABEL}}}}},
    }
    js["spec"]["replicatedJobs"].append(driver)
    assert check(js).allowed
