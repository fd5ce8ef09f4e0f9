"""The opt-in ValidatingAdmissionPolicy that reserves the job-key pod label (SECURITY.md, "Residual risk").

Its CEL validations are evaluated by a CEL interpreter on CREATE and UPDATE requests, case by case; the
rendered objects are checked for scope (the webhooks' namespaceSelector) and naming.
"""

from __future__ import annotations

import pytest

from placement.constants import (
    JOB_KEY_LABEL,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    ROLE_LABEL,
    TOPOLOGY_ANNOTATION,
    ZONE_LABEL,
)
from tests.chart.cel_evaluation import all_true
from tests.chart.chart_rendering import Obj, merged, named, of_kind, render, webhooks
from tests.support.builders import make_pod

ENABLED: Obj = {"webhook": {"jobKeyPolicy": {"enabled": True}}}
POLICY_KINDS = {"ValidatingAdmissionPolicy", "ValidatingAdmissionPolicyBinding"}

OURS = {TOPOLOGY_ANNOTATION: ZONE_LABEL}
JOBSETS = {JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: ZONE_LABEL}
KEY = {JOB_KEY_LABEL: "3f1c0e"}
JOB_OWNER = {"apiVersion": "batch/v1", "kind": "Job", "name": "train", "uid": "u1", "controller": True}
REPLICASET_OWNER = JOB_OWNER | {"apiVersion": "apps/v1", "kind": "ReplicaSet"}
FOREIGN_JOB_OWNER = JOB_OWNER | {"apiVersion": "example.com/v1"}
NON_CONTROLLER_JOB_OWNER = {k: v for k, v in JOB_OWNER.items() if k != "controller"}


def pod(
    annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    owners: list[Obj] | None = None,
) -> Obj:
    """A pod whose metadata maps and ownerReferences are exactly these (None: absent)."""
    built = make_pod("train-0", "team-a")
    if annotations is not None:
        built.annotations(annotations)
    if labels is not None:
        built.labels(labels)
    return (built.owner_references(owners) if owners is not None else built).obj()


EXCLUSIVE = pod(OURS, KEY, [JOB_OWNER])
PLAIN = pod(None, {"app": "web"})

CREATE_CASES = [
    ("exclusive Job pod with the label", EXCLUSIVE, True),
    ("JobSet pod with JobSet's annotation and the label", pod(JOBSETS, KEY, [JOB_OWNER]), True),
    ("plain pod with the label", pod(None, KEY), False),
    ("plain pod without the label", PLAIN, True),
    ("pod without any metadata maps", pod(), True),
    ("annotated pod with the label but no owner", pod(OURS, KEY), False),
    ("annotated pod with the label owned by a ReplicaSet", pod(OURS, KEY, [REPLICASET_OWNER]), False),
    ("annotated pod with the label owned by a foreign Job kind", pod(OURS, KEY, [FOREIGN_JOB_OWNER]), False),
    (
        "annotated pod with the label, Job owner not controller",
        pod(OURS, KEY, [NON_CONTROLLER_JOB_OWNER]),
        False,
    ),
    ("Job pod with the label but no topology annotation", pod({"team": "ml"}, KEY, [JOB_OWNER]), False),
    ("exclusive Job pod without the label", pod(OURS, None, [JOB_OWNER]), True),
]

UPDATE_CASES = [
    ("exclusive pod: another label edited", EXCLUSIVE, pod(OURS, KEY | {ROLE_LABEL: "x"}, [JOB_OWNER]), True),
    ("exclusive pod: job-key label removed", EXCLUSIVE, pod(OURS, {}, [JOB_OWNER]), True),
    ("exclusive pod orphaned by the garbage collector", EXCLUSIVE, pod(OURS, KEY, []), True),
    (
        "exclusive pod: job-key value changed",
        EXCLUSIVE,
        pod(OURS, {JOB_KEY_LABEL: "other"}, [JOB_OWNER]),
        False,
    ),
    ("plain pod: label added", PLAIN, pod(None, {"app": "web"} | KEY), False),
    ("plain pod: label, annotation and Job owner added", PLAIN, pod(OURS, KEY, [JOB_OWNER]), False),
    ("plain pod: label added to a pod without labels", pod(), pod(None, KEY), False),
    ("plain pod: another label edited", PLAIN, pod(None, {"app": "api"}), True),
]


@pytest.fixture(scope="module")
def enabled_objects(mode_values: dict[str, Obj]) -> list[Obj]:
    return render(merged(mode_values["generate"], ENABLED))


@pytest.fixture(scope="module")
def validations(enabled_objects: list[Obj]) -> list[str]:
    policy = named(enabled_objects, "ValidatingAdmissionPolicy", "-job-key")
    return [v["expression"] for v in policy["spec"]["validations"]]


@pytest.mark.parametrize(("case", "obj", "allowed"), CREATE_CASES, ids=[c[0] for c in CREATE_CASES])
def test_create_allows_the_label_only_on_exclusive_job_pods(
    validations: list[str], case: str, obj: Obj, allowed: bool
) -> None:
    variables = {"object": obj, "oldObject": None, "request": {"operation": "CREATE"}}
    assert all_true(validations, variables) is allowed, case


@pytest.mark.parametrize(("case", "old", "new", "allowed"), UPDATE_CASES, ids=[c[0] for c in UPDATE_CASES])
def test_update_never_adds_or_changes_the_label(
    validations: list[str], case: str, old: Obj, new: Obj, allowed: bool
) -> None:
    variables = {"object": new, "oldObject": old, "request": {"operation": "UPDATE"}}
    assert all_true(validations, variables) is allowed, case


def test_policy_covers_pod_creates_and_updates_and_fails_closed(enabled_objects: list[Obj]) -> None:
    spec = named(enabled_objects, "ValidatingAdmissionPolicy", "-job-key")["spec"]
    assert spec["failurePolicy"] == "Fail"
    assert spec["matchConstraints"]["resourceRules"] == [
        {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE", "UPDATE"], "resources": ["pods"]}
    ]
    assert all(v["message"] for v in spec["validations"])


def test_off_by_default(mode_values: dict[str, Obj]) -> None:
    for values in mode_values.values():
        names = {o["metadata"]["name"] for o in render(values) if o["kind"] in POLICY_KINDS}
        assert not any(name.endswith("-job-key") for name in names), names


def test_binding_names_the_policy_and_denies_by_default(enabled_objects: list[Obj]) -> None:
    policy = named(enabled_objects, "ValidatingAdmissionPolicy", "-job-key")
    binding = named(enabled_objects, "ValidatingAdmissionPolicyBinding", "-job-key")
    assert binding["spec"]["policyName"] == policy["metadata"]["name"] == "exclusive-placement-job-key"
    assert binding["spec"]["validationActions"] == ["Deny"]


def test_dry_run_actions_come_from_values(mode_values: dict[str, Obj]) -> None:
    values = merged(
        mode_values["generate"],
        {"webhook": {"jobKeyPolicy": {"enabled": True, "validationActions": ["Warn", "Audit"]}}},
    )
    binding = named(render(values), "ValidatingAdmissionPolicyBinding", "-job-key")
    assert binding["spec"]["validationActions"] == ["Warn", "Audit"]


def test_binding_has_the_webhooks_namespace_scope_but_not_their_object_selector(
    mode_values: dict[str, Obj],
) -> None:
    admission = {
        "exemptNamespaces": ["monitoring"],
        "namespaceSelectorExpressions": [{"key": "team", "operator": "In", "values": ["ml"]}],
        "objectSelector": {"matchLabels": {"jobset.sigs.k8s.io/jobset-name": "js"}},
    }
    objects = render(merged(mode_values["generate"], merged(ENABLED, {"webhook": {"admission": admission}})))
    match = named(objects, "ValidatingAdmissionPolicyBinding", "-job-key")["spec"]["matchResources"]
    assert {str(w["namespaceSelector"]) for _, w in webhooks(objects)} == {str(match["namespaceSelector"])}
    assert match["namespaceSelector"]["matchExpressions"][0]["values"] == [
        "exclusive-placement",
        "kube-system",
        "monitoring",
    ]
    # The webhooks' objectSelector narrows what they mutate; the reservation must hold for every pod.
    assert "objectSelector" not in match


def test_policy_is_named_per_release(mode_values: dict[str, Obj]) -> None:
    values = merged(mode_values["generate"], ENABLED)
    names = {
        o["metadata"]["name"]
        for release in ("one", "two")
        for o in of_kind(render(values, name=release), "ValidatingAdmissionPolicy")
        if o["metadata"]["name"].endswith("-job-key")
    }
    assert names == {"one-exclusive-placement-job-key", "two-exclusive-placement-job-key"}
