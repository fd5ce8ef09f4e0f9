"""What no client may decide (placement.reserved): a Job's resize keys, a JobSet job-key of another Job.

Job cases go through `mutate_job`, pod cases through `plan_pod` / `validate_pod`, as the webhook calls them.
"""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from placement.admission import LeaderState, LeaderStatus, Skip, mutate_job, plan_pod, validate_pod
from placement.constants import (
    JOB_KEY_LABEL,
    JOBSET_JOB_KEY_LABEL,
    JOBSET_NODE_SELECTOR_ANNOTATION,
    RESIZE_LABEL,
    RESIZE_PENDING,
    STRATEGY_ANNOTATION,
    TARGET_COMPLETIONS_ANNOTATION,
    TARGET_MAX_FAILED_INDEXES_ANNOTATION,
    TARGET_PARALLELISM_ANNOTATION,
    TOPOLOGY_ANNOTATION,
    Strategy,
)
from placement.patch import apply
from placement.reserved import RESIZE_KEYS
from tests.placement.placement_pods import JOB, NS, ZONE, job, pod

Obj = dict[str, Any]
EXCLUSIVE = {TOPOLOGY_ANNOTATION: ZONE}
FORGED_TARGET = {
    TARGET_COMPLETIONS_ANNOTATION: "100000",
    TARGET_PARALLELISM_ANNOTATION: "100000",
    TARGET_MAX_FAILED_INDEXES_ANNOTATION: "7",
}
PENDING = {RESIZE_LABEL: RESIZE_PENDING}


def jobset_key(namespace: str, job_name: str) -> str:
    """JobSet's formula written out independently of the code under test."""
    return hashlib.sha1(f"{namespace}/{job_name}".encode(), usedforsecurity=False).hexdigest()


def admitted(original: Obj, **kwargs: Any) -> tuple[Obj, tuple[str, ...]]:
    verdict = mutate_job(original, kwargs.pop("default", Strategy.ELASTIC), namespace=NS, **kwargs)
    assert verdict.allowed, verdict.message
    return apply(original, verdict.patch), verdict.warnings


def reserved_keys(obj: Obj) -> set[str]:
    meta = obj["metadata"]
    return (set(meta.get("labels") or {}) | set(meta.get("annotations") or {})) & set(RESIZE_KEYS)


# --- resize keys ----------------------------------------------------------------------------------------

FORGERIES = [
    (
        "Job the webhook would not place",
        job(completions=1, parallelism=1, annotations={**FORGED_TARGET}),
        set(),
    ),
    (
        "exclusive single-pod Job",
        job(completions=1, parallelism=1, annotations={**EXCLUSIVE, **FORGED_TARGET}),
        set(),
    ),
    (
        "exclusive gate Job",
        job(annotations={**EXCLUSIVE, STRATEGY_ANNOTATION: "gate", **FORGED_TARGET}),
        set(),
    ),
    (
        "JobSet node-selector mode",
        job(annotations={**EXCLUSIVE, JOBSET_NODE_SELECTOR_ANNOTATION: "true", **FORGED_TARGET}),
        set(),
    ),
    (
        "exclusive elastic Job: the webhook records its own target",
        job(annotations={**EXCLUSIVE, **FORGED_TARGET}),
        {RESIZE_LABEL, TARGET_COMPLETIONS_ANNOTATION, TARGET_PARALLELISM_ANNOTATION},
    ),
]


@pytest.mark.parametrize(("original", "kept"), [c[1:] for c in FORGERIES], ids=[c[0] for c in FORGERIES])
def test_resize_keys_a_client_sends_are_removed(original: Obj, kept: set[str]) -> None:
    original["metadata"]["labels"] = dict(PENDING)
    result, warnings = admitted(original)
    assert reserved_keys(result) == kept
    assert any(f"removed {RESIZE_LABEL}, {TARGET_COMPLETIONS_ANNOTATION}" in w for w in warnings), warnings
    if kept:  # recorded from the Job's own size, never from what the client wrote
        assert result["metadata"]["annotations"][TARGET_COMPLETIONS_ANNOTATION] == "4"
        assert (result["spec"]["completions"], result["spec"]["parallelism"]) == (1, 1)
    else:
        assert (result["spec"]["completions"], result["spec"]["parallelism"]) == (
            original["spec"]["completions"],
            original["spec"]["parallelism"],
        )


def test_a_target_record_sent_on_the_pod_template_is_replaced_by_the_webhooks_own() -> None:
    """The resizer never grows a Job past the record on its pod template: a client may not seed it."""
    original = job(annotations=dict(EXCLUSIVE), template_annotations=dict(FORGED_TARGET))
    result, warnings = admitted(original)
    record = result["spec"]["template"]["metadata"]["annotations"]
    assert {key: record.get(key) for key in FORGED_TARGET} == {
        TARGET_COMPLETIONS_ANNOTATION: "4",
        TARGET_PARALLELISM_ANNOTATION: "4",
        TARGET_MAX_FAILED_INDEXES_ANNOTATION: None,
    }
    assert any(f"{TARGET_COMPLETIONS_ANNOTATION} (pod template)" in warning for warning in warnings), warnings


def test_a_job_without_resize_keys_gets_no_warning_about_them() -> None:
    _, warnings = admitted(job(completions=1, parallelism=1))
    assert warnings == ()


def test_other_labels_and_annotations_are_kept() -> None:
    original = job(annotations={**FORGED_TARGET, "team": "ml"}, labels={**PENDING, "app": "train"})
    result, _ = admitted(original)
    assert (result["metadata"]["labels"], result["metadata"]["annotations"]) == (
        {"app": "train"},
        {"team": "ml"},
    )


# --- JobSet's job-key -----------------------------------------------------------------------------------


@pytest.mark.parametrize("where", ["job", "template"])
def test_an_exclusive_job_carrying_another_jobs_jobset_key_is_denied(where: str) -> None:
    original = job(annotations=dict(EXCLUSIVE))
    forged = {JOBSET_JOB_KEY_LABEL: jobset_key("team-b", "victim")}
    if where == "job":
        original["metadata"]["labels"] = forged
    else:
        original["spec"]["template"].setdefault("metadata", {})["labels"] = forged
    verdict = mutate_job(original, Strategy.ELASTIC, namespace=NS)
    assert (verdict.allowed, verdict.reason, verdict.patch) == (False, "forged-job-key", [])
    field = "metadata.labels" if where == "job" else "spec.template.metadata.labels"
    assert verdict.message.startswith(f"exclusive placement: Job {JOB}: {field}: ")  # as a JobSet's denial
    assert JOBSET_JOB_KEY_LABEL in verdict.message
    assert jobset_key("team-b", "victim") in verdict.message
    assert jobset_key(NS, JOB) in verdict.message


def test_jobsets_own_key_is_admitted() -> None:
    original = job(annotations=dict(EXCLUSIVE), labels={JOBSET_JOB_KEY_LABEL: jobset_key(NS, JOB)})
    original["spec"]["template"].setdefault("metadata", {})["labels"] = {
        JOBSET_JOB_KEY_LABEL: jobset_key(NS, JOB)
    }
    admitted(original)


def test_the_namespace_of_the_request_is_the_one_hashed() -> None:
    """The API server sets the object's namespace from the request; the request's is the one trusted."""
    original = job(annotations=dict(EXCLUSIVE), labels={JOBSET_JOB_KEY_LABEL: jobset_key("other", JOB)})
    original["metadata"]["namespace"] = "other"
    assert not mutate_job(original, Strategy.ELASTIC, namespace=NS).allowed


def test_a_key_on_a_job_without_a_name_is_denied() -> None:
    original = job(name="", annotations=dict(EXCLUSIVE), labels={JOBSET_JOB_KEY_LABEL: jobset_key(NS, "")})
    original["metadata"]["generateName"] = "train-"
    verdict = mutate_job(original, Strategy.ELASTIC, namespace=NS)
    assert (verdict.allowed, verdict.reason) == (False, "forged-job-key")
    assert "generateName" in verdict.message


def test_a_non_exclusive_job_is_not_judged_by_its_jobset_key() -> None:
    original = job(labels={JOBSET_JOB_KEY_LABEL: "anything"})
    assert mutate_job(original, Strategy.ELASTIC, namespace=NS).allowed


@pytest.mark.parametrize("index", [0, 1])
def test_a_pod_relabelled_after_the_mutation_is_denied_at_validation(index: int) -> None:
    exclusive_pod = pod(index, strategy="affinity", labels={JOB_KEY_LABEL: jobset_key("team-b", "victim")})
    plan = plan_pod(exclusive_pod, NS, Strategy.ELASTIC)
    assert not isinstance(plan, Skip)
    verdict = validate_pod(exclusive_pod, plan, LeaderState(LeaderStatus.NOT_FOUND))
    assert (verdict.allowed, verdict.reason) == (False, "forged-job-key")
    assert JOB_KEY_LABEL in verdict.message


def test_a_pod_carrying_its_own_key_is_validated_as_before() -> None:
    exclusive_pod = pod(0, labels={JOB_KEY_LABEL: jobset_key(NS, JOB)})
    plan = plan_pod(exclusive_pod, NS, Strategy.ELASTIC)
    assert not isinstance(plan, Skip)
    assert validate_pod(exclusive_pod, plan, None).allowed


@pytest.mark.parametrize(
    ("where", "field"), [("job", "metadata.annotations"), ("template", "spec.template.metadata.annotations")]
)
def test_a_jobs_unknown_strategy_is_denied_naming_the_job_and_the_field(where: str, field: str) -> None:
    original = job(annotations=dict(EXCLUSIVE))
    place = (
        original["metadata"] if where == "job" else original["spec"]["template"].setdefault("metadata", {})
    )
    place.setdefault("annotations", {})[STRATEGY_ANNOTATION] = "fastest"
    verdict = mutate_job(original, Strategy.ELASTIC, namespace=NS)
    assert (verdict.allowed, verdict.reason) == (False, "invalid-strategy")
    assert verdict.message.startswith(
        f"exclusive placement: Job {JOB}: {field}: unknown exclusive placement "
    )
