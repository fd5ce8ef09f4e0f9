"""Job admission in a real cluster: what the API server accepts at size 1 and on the resize, what JobSet
reads from a child Job (its readiness, its exclusive-topology annotation), and JobSet's node-selector mode.

What kube-apiserver itself answers to the shrunk Job and to its resize (422 for a `maxFailedIndexes` above
the completions, `successPolicy` immutable) is checked on the real control plane:
tests/kube/test_kube_elastic_safety.py.
"""

from __future__ import annotations

from typing import Any

import pytest

from placement.admission import jobset_to_read, mutate_job
from placement.constants import (
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    JOBSET_NODE_SELECTOR_ANNOTATION,
    JOBSET_REPLICATED_JOB_NAME_LABEL,
    RESIZE_LABEL,
    STRATEGIES,
    STRATEGY_ANNOTATION,
    TARGET_MAX_FAILED_INDEXES_ANNOTATION,
    TOPOLOGY_ANNOTATION,
    Strategy,
)
from placement.jobset import JobSetRef, JobSetStartup, JobSetUnknown, jobset_startup
from placement.objects import pod_template
from placement.patch import apply
from placement.resize import decide_resize
from placement.strategy import max_failed_indexes_at_size_one, success_policy_problem
from tests.placement.placement_pods import JOB, NS, ZONE, job, without_resize_keys

JOBSET = {JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: ZONE}
BOUND_LEADER = {
    "metadata": {
        "name": f"{JOB}-0-abcde",
        "annotations": {"batch.kubernetes.io/job-completion-index": "0"},
        "ownerReferences": [{"kind": "Job", "name": JOB, "uid": "job-uid", "controller": True}],
    },
    "spec": {"nodeName": "node-1"},
    "status": {"phase": "Running"},
}


def child_job(
    replicated_job: str = "workers", template_annotations: dict[str, str] | None = None, **kwargs: Any
) -> dict[str, Any]:
    """A JobSet child Job as JobSet's constructJob builds it: the annotation on the Job and its template."""
    return job(
        annotations=dict(JOBSET),
        template_annotations=dict(JOBSET) if template_annotations is None else template_annotations,
        labels={JOBSET_REPLICATED_JOB_NAME_LABEL: replicated_job},
        jobset="trainer",
        **kwargs,
    )


# --- 1. never shrink into a Job the API server rejects ------------------------------------------------------

PER_INDEX = {"backoffLimitPerIndex": 2, "maxFailedIndexes": 3}


def test_max_failed_indexes_is_lowered_for_size_one_and_restored_by_the_resize() -> None:
    # The old shrink (sizes only) is what the API server answered 422 to ("must be less than or equal to
    # completions"), and JobSet retried forever.
    original = job(template_annotations={TOPOLOGY_ANNOTATION: ZONE}, extra_spec=PER_INDEX)
    verdict = mutate_job(original, Strategy.ELASTIC)
    shrunk = apply(original, verdict.patch)
    assert (shrunk["spec"]["completions"], shrunk["spec"]["maxFailedIndexes"]) == (1, 1)
    assert shrunk["spec"]["backoffLimitPerIndex"] == 2
    assert shrunk["metadata"]["annotations"][TARGET_MAX_FAILED_INDEXES_ANNOTATION] == "3"

    shrunk["metadata"]["uid"] = "job-uid"
    decision = decide_resize(shrunk, BOUND_LEADER, gang=None)
    assert decision.patch is not None
    grown = apply(shrunk, decision.patch)
    assert (
        grown["spec"]["parallelism"],
        grown["spec"]["completions"],
        grown["spec"]["maxFailedIndexes"],
    ) == (
        4,
        4,
        3,
    )
    assert grown["metadata"]["labels"][RESIZE_LABEL] == "done"


@pytest.mark.parametrize(
    ("fields", "lowered"),
    [
        ({}, None),
        ({"maxFailedIndexes": 0}, None),
        ({"maxFailedIndexes": 1}, None),
        ({"maxFailedIndexes": 7}, 1),
    ],
)
def test_max_failed_indexes_at_size_one(fields: dict[str, Any], lowered: int | None) -> None:
    assert max_failed_indexes_at_size_one(job(extra_spec={"backoffLimitPerIndex": 1, **fields})) == lowered


@pytest.mark.parametrize(
    ("rule", "problem"),
    [
        ({"succeededIndexes": "0"}, None),
        ({"succeededCount": 1}, None),
        ({"succeededIndexes": "0", "succeededCount": 1}, None),
        ({"succeededIndexes": "0,2"}, "rules[0].succeededIndexes '0,2' names indexes >= 1"),
        ({"succeededIndexes": "1-3"}, "rules[0].succeededIndexes '1-3' names indexes >= 1"),
        ({"succeededCount": 3}, "rules[0].succeededCount is 3"),
        # more digits than int() reads (4,300): no ValueError, the same answer
        ({"succeededIndexes": "0" * 5_000}, None),
        ({"succeededIndexes": "9" * 5_000}, "names indexes >= 1"),
        ({"succeededIndexes": "\u0663"}, None),  # not an ASCII digit: the API server rejects it anyway
    ],
)
def test_success_policy_that_does_not_fit_size_one(rule: dict[str, Any], problem: str | None) -> None:
    spec = {"completionMode": "Indexed", "completions": 4, "successPolicy": {"rules": [rule]}}
    found = success_policy_problem(spec)
    assert (found is None) is (problem is None)
    if problem is not None:
        assert found is not None
        assert problem in found
        assert "cannot be changed afterwards" in found


@pytest.mark.parametrize(
    "rule",
    [{"succeededIndexes": "0-3", "succeededCount": 2}, {"succeededCount": 4}],
    ids=["indexes", "count"],
)
def test_a_success_policy_invalid_at_size_one_falls_back_to_gate_naming_the_field(
    rule: dict[str, Any],
) -> None:
    """successPolicy is immutable (ValidateJobSpecUpdate): it cannot be adapted, so the Job keeps its size."""
    original = job(
        template_annotations={TOPOLOGY_ANNOTATION: ZONE}, extra_spec={"successPolicy": {"rules": [rule]}}
    )
    verdict = mutate_job(original, Strategy.ELASTIC)
    fallen_back = apply(original, verdict.patch)
    assert fallen_back["spec"]["completions"] == 4
    assert fallen_back["spec"]["template"]["metadata"]["annotations"][STRATEGY_ANNOTATION] == "gate"
    assert verdict.reason == "elastic-ineligible"
    assert "spec.successPolicy.rules[0].succeeded" in verdict.warnings[0]
    assert "using gate" in verdict.warnings[0]


# --- 1. never shrink a Job JobSet would count ready too early ---------------------------------------------


@pytest.mark.parametrize(
    ("spec", "startup"),
    [
        ({}, JobSetStartup()),
        ({"startupPolicy": {"startupPolicyOrder": "AnyOrder"}}, JobSetStartup()),
        ({"startupPolicy": {"startupPolicyOrder": "InOrder"}}, JobSetStartup(in_order=True)),
        (
            {
                "replicatedJobs": [
                    {"name": "a"},
                    {"name": "b", "dependsOn": [{"name": "a", "status": "Ready"}]},
                    {"name": "c", "dependsOn": [{"name": "b", "status": "Complete"}]},
                ]
            },
            JobSetStartup(ready_dependencies=frozenset({"a"})),
        ),
    ],
    ids=["none", "AnyOrder", "InOrder", "dependsOn"],
)
def test_jobset_startup(spec: dict[str, Any], startup: JobSetStartup) -> None:
    assert jobset_startup({"spec": spec}) == startup


@pytest.mark.parametrize(
    ("owner", "replicated_job", "needle"),
    [
        (JobSetStartup(in_order=True), "workers", "startupPolicy InOrder"),
        (JobSetStartup(ready_dependencies=frozenset({"workers"})), "workers", "dependsOn (status Ready)"),
        (JobSetUnknown(JobSetRef(NS, "trainer", "u"), "403 Forbidden"), "workers", "could not be read"),
        (None, "workers", "could not be read (not looked up)"),
    ],
    ids=["InOrder", "dependsOn Ready", "unreadable", "not looked up"],
)
def test_a_child_job_whose_readiness_starts_other_jobs_keeps_its_size(
    owner: JobSetStartup | JobSetUnknown | None, replicated_job: str, needle: str
) -> None:
    """JobSet counts a child Job ready once ready + succeeded pods reach its *current* parallelism: at size 1
    its leader alone would start the next replicated Job (InOrder) or a dependent one (dependsOn Ready)."""
    original = child_job(replicated_job)
    verdict = mutate_job(original, Strategy.ELASTIC, owner=owner)
    result = apply(original, verdict.patch)
    assert result["spec"]["completions"] == 4
    assert RESIZE_LABEL not in (result["metadata"].get("labels") or {})
    assert pod_template(result)["metadata"]["annotations"][STRATEGY_ANNOTATION] == "gate"
    assert needle in verdict.warnings[0]


@pytest.mark.parametrize(
    "owner",
    [JobSetStartup(), JobSetStartup(ready_dependencies=frozenset({"driver"}))],
    ids=["no startup order", "another replicated Job is the dependency"],
)
def test_a_child_job_nothing_waits_for_is_shrunk(owner: JobSetStartup) -> None:
    result = apply(
        child_job("workers"), mutate_job(child_job("workers"), Strategy.ELASTIC, owner=owner).patch
    )
    assert (result["spec"]["completions"], result["metadata"]["labels"][RESIZE_LABEL]) == (1, "pending")


TRAINER = JobSetRef(NS, "trainer", "trainer-uid")


@pytest.mark.parametrize(
    ("the_job", "default", "expected"),
    [
        (child_job(), Strategy.ELASTIC, TRAINER),
        (child_job(), Strategy.GATE, TRAINER),
        (child_job(completions=1, parallelism=1), Strategy.ELASTIC, TRAINER),
        (child_job(mode=None), Strategy.ELASTIC, TRAINER),
        (job(annotations=dict(JOBSET)), Strategy.ELASTIC, None),
        (job(jobset="trainer"), Strategy.ELASTIC, None),
    ],
    ids=["to shrink", "not elastic", "single pod", "ineligible", "no JobSet", "not exclusive"],
)
def test_the_jobset_is_read_for_every_exclusive_child_job(
    the_job: dict[str, Any], default: Strategy, expected: JobSetRef | None
) -> None:
    """Its startup order decides the shrink, its all-or-nothing annotation concerns every strategy (one GET
    per JobSet: the webhook remembers the answer by uid)."""
    assert jobset_to_read(the_job, default) == expected
    shrunk = apply(child_job(), mutate_job(child_job(), Strategy.ELASTIC, owner=JobSetStartup()).patch)
    assert jobset_to_read(shrunk, Strategy.ELASTIC) == TRAINER  # re-invocation: read from memory


# --- 2. taking JobSet's annotation over ---------------------------------------------------------------


@pytest.mark.parametrize("strategy", STRATEGIES)
def test_the_takeover_moves_jobsets_annotation_off_the_pod_template(strategy: str) -> None:
    """JobSet's pod webhooks and pod reconciler act on pods carrying `alpha.jobset.sigs.k8s.io/exclusive-
    topology`; with it replaced by ours on the template, the child Job's pods are this project's alone."""
    original = child_job(template_annotations={**JOBSET, STRATEGY_ANNOTATION: strategy})
    verdict = mutate_job(original, Strategy.ELASTIC, owner=JobSetStartup(), take_over_jobset=True)
    result = apply(original, verdict.patch)
    annotations = pod_template(result)["metadata"]["annotations"]
    assert JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION not in annotations
    assert annotations[TOPOLOGY_ANNOTATION] == ZONE
    assert annotations[STRATEGY_ANNOTATION] == strategy
    assert result["metadata"]["annotations"][JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION] == ZONE  # the Job's own
    again = mutate_job(result, Strategy.ELASTIC, owner=JobSetStartup(), take_over_jobset=True)
    readmitted = apply(result, again.patch)["spec"]["template"]
    assert without_resize_keys(readmitted) == without_resize_keys(result["spec"]["template"])


def test_without_the_takeover_the_template_keeps_jobsets_annotation() -> None:
    original = child_job(template_annotations={**JOBSET, STRATEGY_ANNOTATION: "gate"})
    assert mutate_job(original, Strategy.ELASTIC, take_over_jobset=False).patch == []


def test_the_takeover_keeps_our_own_key_when_both_are_set() -> None:
    original = child_job(template_annotations={**JOBSET, TOPOLOGY_ANNOTATION: "rack"})
    original["metadata"]["annotations"][TOPOLOGY_ANNOTATION] = "rack"
    result = apply(original, mutate_job(original, Strategy.GATE, take_over_jobset=True).patch)
    assert pod_template(result)["metadata"]["annotations"] == {TOPOLOGY_ANNOTATION: "rack"}


# --- 3. JobSet's node-selector mode ------------------------------------------------------------------


@pytest.mark.parametrize("on", ["job", "template"])
def test_node_selector_mode_jobs_are_left_to_jobset_and_the_users_pools(on: str) -> None:
    original = child_job()
    where = original["metadata"] if on == "job" else pod_template(original)["metadata"]
    where["annotations"][JOBSET_NODE_SELECTOR_ANNOTATION] = "true"
    assert jobset_to_read(original, Strategy.ELASTIC) is None
    verdict = mutate_job(original, Strategy.ELASTIC, take_over_jobset=True)
    assert (verdict.allowed, verdict.patch, verdict.warnings, verdict.reason) == (
        True,
        [],
        (),
        "jobset-node-selector",
    )
