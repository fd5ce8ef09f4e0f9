"""The ValidatingAdmissionPolicy keeping a Job's resize keys for this project (SECURITY.md, "Forged resize").

Its CEL validations are evaluated by a CEL interpreter on CREATE and UPDATE requests, for every resize key
(`placement.reserved.RESIZE_KEYS`: the chart's list must name each of them), as a tenant and as the
resizer's ServiceAccount.
"""

from __future__ import annotations

import copy

import pytest

from placement.constants import (
    ALL_OR_NOTHING_ANNOTATION,
    ALL_OR_NOTHING_LABEL,
    GANG_QUEUED_AT_ANNOTATION,
    GANG_SIZE_ANNOTATION,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    LEADER_DOMAIN_ANNOTATION,
    PIN_FOLLOWERS,
    PIN_FOLLOWERS_LABEL,
    RESIZE_DONE,
    RESIZE_LABEL,
    RESIZE_PENDING,
    TARGET_COMPLETIONS_ANNOTATION,
    TARGET_MAX_FAILED_INDEXES_ANNOTATION,
    TARGET_PARALLELISM_ANNOTATION,
    TOPOLOGY_ANNOTATION,
    ZONE_LABEL,
)
from placement.reserved import GANG_KEYS, GANG_LABELS, RESIZE_KEYS, RESIZE_LABELS
from tests.chart.cel_evaluation import all_true
from tests.chart.chart_rendering import NAMESPACE, Obj, merged, named, of_component, render, webhooks

OURS = {TOPOLOGY_ANNOTATION: ZONE_LABEL}
TENANT = "alice@example.com"


def job(
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    template_annotations: dict[str, str] | None = None,
) -> Obj:
    meta: Obj = {"name": "train", "namespace": "team-a"}
    if labels is not None:
        meta["labels"] = labels
    if annotations is not None:
        meta["annotations"] = annotations
    template: Obj = {"spec": {"containers": [{"name": "c"}]}}
    if template_annotations is not None:
        template["metadata"] = {"annotations": template_annotations}
    return {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta, "spec": {"template": template}}


def with_key(obj: Obj, key: str, value: str | None) -> Obj:
    """A copy of the Job with resize key `key` set to `value` (None: removed)."""
    result = copy.deepcopy(obj)
    field = "labels" if key in RESIZE_LABELS else "annotations"
    values = result["metadata"].setdefault(field, {})
    if value is None:
        values.pop(key, None)
    else:
        values[key] = value
    return result


SHRUNK = job(
    # pin-followers and leader-domain as the resize writes them; the same keys, for the test's sake
    {RESIZE_LABEL: RESIZE_PENDING, PIN_FOLLOWERS_LABEL: PIN_FOLLOWERS, "app": "train"},
    {
        **OURS,
        TARGET_COMPLETIONS_ANNOTATION: "8",
        TARGET_PARALLELISM_ANNOTATION: "8",
        TARGET_MAX_FAILED_INDEXES_ANNOTATION: "2",
        LEADER_DOMAIN_ANNOTATION: "pool-3",  # as the resize writes it; the same keys, for the test's sake
    },
)


@pytest.fixture(scope="module")
def objects(mode_values: dict[str, Obj]) -> list[Obj]:
    return render(mode_values["generate"])


@pytest.fixture(scope="module")
def validations(objects: list[Obj]) -> list[str]:
    policy = named(objects, "ValidatingAdmissionPolicy", "-resize-keys")
    return [v["expression"] for v in policy["spec"]["validations"]]


@pytest.fixture(scope="module")
def resizer(objects: list[Obj]) -> str:
    account = of_component(objects, "Deployment", "resizer")["spec"]["template"]["spec"]["serviceAccountName"]
    return f"system:serviceaccount:{NAMESPACE}:{account}"


def create(validations: list[str], obj: Obj) -> bool:
    return all_true(validations, {"object": obj, "oldObject": None, "request": {"operation": "CREATE"}})


def update(validations: list[str], old: Obj, new: Obj, user: str = TENANT) -> bool:
    request = {"operation": "UPDATE", "userInfo": {"username": user}}
    return all_true(validations, {"object": new, "oldObject": old, "request": request})


@pytest.mark.parametrize("key", RESIZE_KEYS)
def test_create_keeps_resize_keys_off_jobs_the_webhook_would_not_place(
    validations: list[str], key: str
) -> None:
    assert create(validations, with_key(job(), key, "40")) is False
    assert create(validations, with_key(job(annotations={"team": "ml"}), key, "40")) is False
    assert create(validations, with_key(job(annotations=dict(OURS)), key, "40")) is True
    jobsets = job(template_annotations={JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: ZONE_LABEL})
    assert create(validations, with_key(jobsets, key, "40")) is True


@pytest.mark.parametrize("obj", [job(), job({"app": "x"}, {"team": "ml"}), job(annotations=dict(OURS))])
def test_create_of_a_job_without_resize_keys_passes(validations: list[str], obj: Obj) -> None:
    assert create(validations, obj) is True


@pytest.mark.parametrize("key", RESIZE_KEYS)
@pytest.mark.parametrize(("change", "value"), [("added or changed", "100000"), ("removed", None)])
def test_a_tenant_cannot_change_a_resize_key(
    validations: list[str], key: str, change: str, value: str | None
) -> None:
    assert update(validations, SHRUNK, with_key(SHRUNK, key, value)) is False, change
    assert update(validations, job(), with_key(job(), key, value or "1")) is False, change


def test_a_tenant_may_edit_everything_else(validations: list[str]) -> None:
    edited = copy.deepcopy(SHRUNK)
    edited["metadata"]["labels"]["app"] = "renamed"
    edited["metadata"]["annotations"]["team"] = "ml"
    assert update(validations, SHRUNK, edited) is True
    assert update(validations, job(), job({"app": "x"}, {"team": "ml"})) is True
    assert update(validations, SHRUNK, copy.deepcopy(SHRUNK)) is True


def test_the_resizer_may_resize_and_mark_done(validations: list[str], resizer: str) -> None:
    done = with_key(SHRUNK, RESIZE_LABEL, RESIZE_DONE)
    assert update(validations, SHRUNK, done, user=resizer) is True
    assert update(validations, SHRUNK, done) is False
    other_release = resizer.replace("exclusive-placement", "other")
    assert update(validations, SHRUNK, done, user=other_release) is False


def test_only_the_resizer_may_retire_a_finished_job_from_the_follower_policys_params(
    validations: list[str], resizer: str
) -> None:
    """Removing pin-followers takes the Job out of the follower policy's params: a tenant who could would
    have its followers gated (the resizer releases them), one who could add it would make a Job a param."""
    retired = with_key(SHRUNK, PIN_FOLLOWERS_LABEL, None)
    assert update(validations, SHRUNK, retired, user=resizer) is True
    assert update(validations, SHRUNK, retired) is False
    assert update(validations, retired, SHRUNK) is False


def test_policy_covers_job_writes_fails_closed_and_denies_by_default(objects: list[Obj]) -> None:
    policy = named(objects, "ValidatingAdmissionPolicy", "-resize-keys")
    binding = named(objects, "ValidatingAdmissionPolicyBinding", "-resize-keys")
    assert policy["spec"]["failurePolicy"] == "Fail"
    assert policy["spec"]["matchConstraints"]["resourceRules"] == [
        {
            "apiGroups": ["batch"],
            "apiVersions": ["v1"],
            "operations": ["CREATE", "UPDATE"],
            "resources": ["jobs", "jobs/status"],
        }
    ]
    assert binding["spec"]["policyName"] == policy["metadata"]["name"]
    assert binding["spec"]["validationActions"] == ["Deny"]
    assert {str(w["namespaceSelector"]) for _, w in webhooks(objects)} == {
        str(binding["spec"]["matchResources"]["namespaceSelector"])
    }


def test_it_can_be_turned_off_or_run_dry(mode_values: dict[str, Obj]) -> None:
    off = render(merged(mode_values["generate"], {"webhook": {"resizeKeysPolicy": {"enabled": False}}}))
    assert not [o for o in off if o["metadata"]["name"].endswith("-resize-keys")]
    dry = {"webhook": {"resizeKeysPolicy": {"enabled": True, "validationActions": ["Warn", "Audit"]}}}
    binding = named(
        render(merged(mode_values["generate"], dry)), "ValidatingAdmissionPolicyBinding", "-resize-keys"
    )
    assert binding["spec"]["validationActions"] == ["Warn", "Audit"]


# --- the gang keys: the all-or-nothing queue's record --------------------------------------------------


def with_gang_key(obj: Obj, key: str, value: str | None) -> Obj:
    result = copy.deepcopy(obj)
    field = "labels" if key in GANG_LABELS else "annotations"
    values = result["metadata"].setdefault(field, {})
    if value is None:
        values.pop(key, None)
    else:
        values[key] = value
    return result


def child_of_a_jobset(obj: Obj) -> Obj:
    result = copy.deepcopy(obj)
    result["metadata"]["ownerReferences"] = [
        {
            "apiVersion": "jobset.x-k8s.io/v1alpha2",
            "kind": "JobSet",
            "name": "js",
            "uid": "u",
            "controller": True,
        }
    ]
    return result


GANG = child_of_a_jobset(
    job(
        {ALL_OR_NOTHING_LABEL: "true"},
        {
            **OURS,
            ALL_OR_NOTHING_ANNOTATION: "true",
            GANG_SIZE_ANNOTATION: "4",
            GANG_QUEUED_AT_ANNOTATION: "2026-01-01T00:00:00Z",
        },
    )
)


@pytest.mark.parametrize("key", GANG_KEYS)
def test_create_keeps_gang_keys_on_exclusive_child_jobs_of_a_jobset(validations: list[str], key: str) -> None:
    assert create(validations, with_gang_key(job(), key, "true")) is False
    assert create(validations, with_gang_key(job(annotations=dict(OURS)), key, "true")) is False  # no JobSet
    assert create(validations, with_gang_key(child_of_a_jobset(job()), key, "true")) is False  # not exclusive
    assert (
        create(validations, with_gang_key(child_of_a_jobset(job(annotations=dict(OURS))), key, "1")) is True
    )
    assert create(validations, GANG) is True


@pytest.mark.parametrize("key", GANG_KEYS)
@pytest.mark.parametrize(
    ("change", "value"), [("added or changed", "2000-01-01T00:00:00Z"), ("removed", None)]
)
def test_no_one_changes_a_gang_key_the_resizer_included(
    validations: list[str], resizer: str, key: str, change: str, value: str | None
) -> None:
    for user in (TENANT, resizer):
        assert update(validations, GANG, with_gang_key(GANG, key, value), user=user) is False, change
        assert update(validations, job(), with_gang_key(job(), key, value or "1"), user=user) is False, change
    assert update(validations, GANG, copy.deepcopy(GANG)) is True
