"""The webhooks' CEL matchConditions, evaluated by a CEL interpreter: only annotated objects get through.

Their meaning is checked here, case by case; kube-apiserver evaluates them end to end
(tests/kube/test_kube_chart.py).
"""

from __future__ import annotations

import pytest

from placement.constants import (
    ALL_OR_NOTHING_ANNOTATION,
    GANG_SIZE_ANNOTATION,
    JOB_KEY_LABEL,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    JOBSET_NAME_LABEL,
    JOBSET_NODE_SELECTOR_ANNOTATION,
    RESIZE_LABEL,
    STRATEGY_ANNOTATION,
    TARGET_COMPLETIONS_ANNOTATION,
    TOPOLOGY_ANNOTATION,
    ZONE_LABEL,
)
from placement.reserved import GANG_KEYS, GANG_LABELS, RESIZE_KEYS, RESIZE_LABELS
from tests.chart.cel_evaluation import all_true
from tests.chart.chart_rendering import Obj, render, webhooks
from tests.support.builders import make_job, make_pod


def pod(annotations: dict[str, str] | None = None, labels: dict[str, str] | None = None) -> Obj:
    """A pod whose metadata maps are exactly these (None: absent)."""
    built = make_pod("train-abcde", "team-a")
    if annotations is not None:
        built.annotations(annotations)
    return (built.labels(labels) if labels is not None else built).obj()


def job(
    annotations: dict[str, str] | None = None,
    template_annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
) -> Obj:
    """A Job whose annotations, its pod template's, and its labels are exactly these (None: absent)."""
    built = make_job("train", "team-a")
    for key, value in (template_annotations or {}).items():
        built.template_annotation(key, value)
    if labels is not None:
        built.labels(labels)
    return (built.annotations(annotations) if annotations is not None else built).obj()


OURS = {TOPOLOGY_ANNOTATION: ZONE_LABEL}
JOBSETS = {JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: ZONE_LABEL}
NODE_SELECTOR_MODE = {**JOBSETS, JOBSET_NODE_SELECTOR_ANNOTATION: "true"}
OTHER = {"team": "ml"}

POD_CASES = [
    ("our annotation", pod(OURS), True),
    ("JobSet's annotation", pod(JOBSETS), True),
    ("both", pod(OURS | JOBSETS), True),
    ("no metadata maps", pod(), False),
    ("other annotations", pod(OTHER), False),
    ("empty annotations", pod({}), False),
    ("JobSet pod without exclusive placement", pod(OTHER, {JOBSET_NAME_LABEL: "js"}), False),
    ("our label but no annotation", pod(None, {JOB_KEY_LABEL: "k"}), False),
    ("JobSet's node-selector mode", pod(NODE_SELECTOR_MODE), False),
]
JOB_CASES = [
    ("annotation on the Job", job(OURS), True),
    ("JobSet's annotation on the Job", job(JOBSETS), True),
    ("annotation on the pod template only", job(None, OURS), True),
    ("JobSet's annotation on the template only", job(OTHER, JOBSETS), True),
    ("no annotations anywhere", job(), False),
    ("template metadata without annotations", job(OTHER, {}), False),
    ("unrelated annotations", job(OTHER, OTHER), False),
    ("JobSet's node-selector mode on the Job", job(NODE_SELECTOR_MODE, JOBSETS), False),
    ("JobSet's node-selector mode on the template", job(JOBSETS, NODE_SELECTOR_MODE), False),
    # Any resize key, on any Job: the webhook removes the keys it did not set itself.
    *(
        (
            f"{key} on a plain Job",
            job(labels={key: "pending"}) if key in RESIZE_LABELS else job({key: "40"}),
            True,
        )
        for key in RESIZE_KEYS
    ),
    ("resize label in node-selector mode", job(NODE_SELECTOR_MODE, labels={RESIZE_LABEL: "pending"}), True),
    ("a resize key on the pod template only", job(None, {TARGET_COMPLETIONS_ANNOTATION: "40"}), False),
    # Any gang key, on any Job or its pod template: only the webhook puts a Job in the all-or-nothing queue.
    *(
        (
            f"{key} on a plain Job{where}",
            job(labels={key: "true"})
            if key in GANG_LABELS and not template
            else job(None, {key: "1"})
            if template
            else job({key: "1"}),
            True,
        )
        for key in GANG_KEYS
        for template, where in ((False, ""), (True, "'s pod template"))
    ),
    ("a gang key in node-selector mode", job(NODE_SELECTOR_MODE, {GANG_SIZE_ANNOTATION: "4"}), True),
    ("other labels", job(labels=OTHER), False),
]


def match_conditions(webhook_name: str) -> list[Obj]:
    objects = render({"certs": {"mode": "cert-manager"}})
    for _, webhook in webhooks(objects):
        if webhook["name"] == webhook_name:
            conditions: list[Obj] = webhook["matchConditions"]
            return conditions
    raise AssertionError(f"no webhook {webhook_name}")


def admitted(conditions: list[Obj], obj: Obj, old: Obj | None = None) -> bool:
    """All matchConditions true (the API server ANDs them); `old`: an UPDATE's oldObject (null: CREATE)."""
    operation = "CREATE" if old is None else "UPDATE"
    variables = {"object": obj, "oldObject": old, "request": {"operation": operation}}
    return all_true((c["expression"] for c in conditions), variables)


@pytest.mark.parametrize(("case", "obj", "expected"), POD_CASES, ids=[c[0] for c in POD_CASES])
def test_pod_webhook_sees_only_pods_with_a_topology_annotation(case: str, obj: Obj, expected: bool) -> None:
    assert admitted(match_conditions("pods.mutate.exclusive-placement.io"), obj) is expected, case


@pytest.mark.parametrize(("case", "obj", "expected"), JOB_CASES, ids=[c[0] for c in JOB_CASES])
def test_job_webhook_sees_jobs_with_a_topology_annotation_or_a_resize_key(
    case: str, obj: Obj, expected: bool
) -> None:
    assert admitted(match_conditions("jobs.mutate.exclusive-placement.io"), obj) is expected, case


def jobset(
    annotations: dict[str, str] | None = None,
    job_annotations: dict[str, str] | None = None,
    pod_annotations: dict[str, str] | None = None,
    *,
    spec: bool = True,
) -> Obj:
    template: Obj = {"spec": {"template": {"spec": {"containers": [{"name": "c"}]}}}}
    if job_annotations is not None:
        template["metadata"] = {"annotations": job_annotations}
    if pod_annotations is not None:
        template["spec"]["template"]["metadata"] = {"annotations": pod_annotations}
    meta: Obj = {"name": "train"}
    if annotations is not None:
        meta["annotations"] = annotations
    obj: Obj = {"apiVersion": "jobset.x-k8s.io/v1alpha2", "kind": "JobSet", "metadata": meta}
    if spec:
        obj["spec"] = {"replicatedJobs": [{"name": "w", "template": template}]}
    return obj


STRATEGY = {STRATEGY_ANNOTATION: "fastest"}
JOBSET_CASES = [
    ("JobSet's exclusive-topology on the JobSet", jobset(JOBSETS), True),
    ("a strategy on the pod template only", jobset(OTHER, None, STRATEGY), True),
    ("a strategy on the Job template only", jobset(None, STRATEGY), True),
    ("all-or-nothing on the JobSet", jobset({ALL_OR_NOTHING_ANNOTATION: "yes"}), True),
    ("no annotations anywhere", jobset(), False),
    ("other annotations everywhere", jobset(OTHER, OTHER, OTHER), False),
    ("no spec at all", jobset(OTHER, spec=False), False),
]


@pytest.mark.parametrize(("case", "obj", "expected"), JOBSET_CASES, ids=[c[0] for c in JOBSET_CASES])
def test_jobset_webhook_sees_only_jobsets_with_this_projects_annotations(
    case: str, obj: Obj, expected: bool
) -> None:
    assert admitted(match_conditions("jobsets.validate.exclusive-placement.io"), obj) is expected, case


def test_jobset_webhook_sees_an_update_that_removes_this_projects_annotations() -> None:
    conditions = match_conditions("jobsets.validate.exclusive-placement.io")
    assert admitted(conditions, jobset(OTHER), old=jobset({STRATEGY_ANNOTATION: "gate"}))
    assert not admitted(conditions, jobset(OTHER), old=jobset(OTHER))
