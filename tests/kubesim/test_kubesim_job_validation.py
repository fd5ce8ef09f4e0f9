"""Job validation (k/k pkg/apis/batch/validation/validation.go via pkg/registry/batch/job/strategy.go): the
rules where elastic resizing meets the Job's size, with upstream's field paths and messages. Each table row
names the upstream rule it pins."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from kubernetes import client

from kubesim.apiserver.defaults import apply_defaults, prepare_for_create
from kubesim.apiserver.job_validation import validate_job, validate_job_update
from kubesim.errors import invalid
from tests.support.kube import as_body, error_status

Obj = dict[str, Any]
LONG_NAME = "j" * 61
"""`<name>-9` is a 63-character DNS label, `<name>-10` is one too many."""


def job(name: str = "elastic", **spec: Any) -> Obj:
    """A Job as the API server stores it: defaulted and prepared (selector and labels from its uid)."""
    body: Obj = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": "default", "uid": "0f3c9a3e-uid"},
        "spec": {
            "completionMode": "Indexed",
            "completions": 4,
            "parallelism": 4,
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36"}]}
            },
            **spec,
        },
    }
    apply_defaults("jobs", body)
    prepare_for_create("jobs", body)
    return body


def with_spec(old: Obj, **spec: Any) -> Obj:
    new = copy.deepcopy(old)
    new["spec"].update(spec)
    return new


def rule(count: int | None = None, indexes: str | None = None) -> Obj:
    result: Obj = {}
    if count is not None:
        result["succeededCount"] = count
    if indexes is not None:
        result["succeededIndexes"] = indexes
    return result


def policy(*rules: Obj) -> Obj:
    return {"rules": list(rules)}


CREATE_CASES = [
    ("validateJobSpec: a valid elastic Indexed Job", job(), []),
    (
        "validateJobSpec: maxFailedIndexes <= completions",
        job(completions=10, parallelism=10, backoffLimitPerIndex=1, maxFailedIndexes=11),
        [("spec.maxFailedIndexes", "Invalid value: 11: must be less than or equal to completions")],
    ),
    (
        "validateJobSpec: maxFailedIndexes requires backoffLimitPerIndex",
        job(maxFailedIndexes=1),
        [("spec.backoffLimitPerIndex", "Required value: when maxFailedIndexes is specified")],
    ),
    (
        "validateJobSpec: maxFailedIndexes <= maxFailedIndexesForIndexedJob",
        job(completions=200_000, parallelism=1, backoffLimitPerIndex=1, maxFailedIndexes=100_001),
        [
            ("spec.maxFailedIndexes", "Invalid value: 100001: must be less than or equal to 100000"),
            (
                "spec.maxFailedIndexes",
                "Invalid value: 100001: must be less than or equal to 10000 when completions are above "
                "100000 and used with backoff limit per index",
            ),
        ],
    ),
    (
        "validateJobSpec: backoffLimitPerIndex requires indexed completion mode",
        job(completionMode="NonIndexed", backoffLimitPerIndex=1),
        [("spec.backoffLimitPerIndex", "Invalid value: 1: requires indexed completion mode")],
    ),
    (
        "validateJobSpec: parallelism <= maxParallelismForIndexedJob",
        job(parallelism=100_001),
        [
            (
                "spec.parallelism",
                "Invalid value: 100001: must be less than or equal to 100000 when completion mode is Indexed",
            )
        ],
    ),
    (
        "validateJobSpec: backoffLimit is non-negative",
        job(backoffLimit=-1),
        [("spec.backoffLimit", "Invalid value: -1: must be greater than or equal to 0")],
    ),
    (
        "validateSuccessPolicyRule: succeededIndexes < completions",
        job(successPolicy=policy(rule(indexes="0-4"))),
        [
            (
                "spec.successPolicy.rules[0].succeededIndexes",
                'Invalid value: "0-4": error parsing succeededIndexes: too large index: "4"',
            )
        ],
    ),
    (
        "validateSuccessPolicyRule: succeededCount <= completions",
        job(successPolicy=policy(rule(count=5))),
        [
            (
                "spec.successPolicy.rules[0].succeededCount",
                "Invalid value: 5: must be less than or equal to 4 (the number of specified completions)",
            )
        ],
    ),
    (
        "validateSuccessPolicyRule: succeededCount <= the number of succeededIndexes",
        job(successPolicy=policy(rule(count=3, indexes="0,2"))),
        [
            (
                "spec.successPolicy.rules[0].succeededCount",
                "Invalid value: 3: must be less than or equal to 2 (the number of indexes in the specified "
                "succeededIndexes field)",
            )
        ],
    ),
    (
        "validateSuccessPolicyRule: one of succeededCount or succeededIndexes",
        job(successPolicy=policy(rule())),
        [
            (
                "spec.successPolicy.rules[0]",
                "Required value: at least one of succeededCount or succeededIndexes must be specified",
            )
        ],
    ),
    (
        "parseIndexInterval: intervals increase",
        job(successPolicy=policy(rule(indexes="2-1"))),
        [
            (
                "spec.successPolicy.rules[0].succeededIndexes",
                'Invalid value: "2-1": error parsing succeededIndexes: non-increasing order, previous: 2, '
                "current: 1",
            )
        ],
    ),
    (
        "validateIndexesFormat: intervals do not overlap",
        job(successPolicy=policy(rule(indexes="0-1,1"))),
        [
            (
                "spec.successPolicy.rules[0].succeededIndexes",
                'Invalid value: "0-1,1": error parsing succeededIndexes: non-increasing order, previous: 1, '
                "current: 1",
            )
        ],
    ),
    (
        "parseIndexInterval: indexes are integers",
        job(successPolicy=policy(rule(indexes="x"))),
        [
            (
                "spec.successPolicy.rules[0].succeededIndexes",
                'Invalid value: "x": error parsing succeededIndexes: cannot convert string to integer for '
                'index: "x"',
            )
        ],
    ),
    (
        "validateSuccessPolicy: at least one rule",
        job(successPolicy=policy()),
        [
            (
                "spec.successPolicy.rules",
                "Required value: at least one rules must be specified when the successPolicy is specified",
            )
        ],
    ),
    (
        "validateSuccessPolicy: at most 20 rules",
        job(successPolicy=policy(*[rule(count=1)] * 21)),
        [("spec.successPolicy.rules", "Too many: 21: must have at most 20 items")],
    ),
    (
        "validateJobSpec: successPolicy requires indexed completion mode",
        job(completionMode="NonIndexed", successPolicy=policy(rule(count=1))),
        [
            (
                "spec.successPolicy",
                'Invalid value: {"rules":[{"succeededCount":1}]}: requires indexed completion mode',
            )
        ],
    ),
    (
        "ValidateJob: the last index's hostname is a DNS label",
        job(LONG_NAME, completions=11, parallelism=11),
        [
            (
                "metadata.name",
                f'Invalid value: "{LONG_NAME}": will not able to create pod with invalid DNS label: '
                f"{LONG_NAME}-10",
            )
        ],
    ),
    (
        "validatePodReplacementPolicy: supported values",
        job(podReplacementPolicy="Sometimes"),
        [
            (
                "spec.podReplacementPolicy",
                'Unsupported value: "Sometimes": supported values: "Failed", "TerminatingOrFailed"',
            )
        ],
    ),
    (
        "validateJobSpec: restartPolicy Always is rejected",
        job(template={"spec": {"restartPolicy": "Always", "containers": [{"name": "c", "image": "i"}]}}),
        [("spec.template.spec.restartPolicy", 'Required value: valid values: "OnFailure", "Never"')],
    ),
]


@pytest.mark.parametrize(("rule_name", "body", "causes"), CREATE_CASES, ids=[c[0] for c in CREATE_CASES])
def test_create_rules(rule_name: str, body: Obj, causes: list[tuple[str, str]]) -> None:
    assert validate_job(body) == causes, rule_name


UPDATE_CASES = [
    (
        "validateCompletions: an Indexed Job's completions change together with parallelism",
        job(),
        {"completions": 8, "parallelism": 8},
        [],
    ),
    (
        "validateCompletions: completions may change only in tandem with parallelism",
        job(),
        {"completions": 8},
        [("spec.completions", "Invalid value: 8: can only be modified in tandem with spec.parallelism")],
    ),
    (
        "validateCompletions: a NonIndexed Job's completions are immutable",
        job(completionMode="NonIndexed"),
        {"completions": 8, "parallelism": 8},
        [("spec.completions", "Invalid value: 8: field is immutable")],
    ),
    (
        "validateJobSpec on update: scaling down below maxFailedIndexes",
        job(completions=10, parallelism=10, backoffLimitPerIndex=1, maxFailedIndexes=8),
        {"completions": 5, "parallelism": 5},
        [("spec.maxFailedIndexes", "Invalid value: 8: must be less than or equal to completions")] * 2,
    ),
    (
        "validateSuccessPolicyRule on update: scaling down below succeededIndexes",
        job(completions=10, parallelism=10, successPolicy=policy(rule(indexes="0-7"))),
        {"completions": 5, "parallelism": 5},
        [
            (
                "spec.successPolicy.rules[0].succeededIndexes",
                'Invalid value: "0-7": error parsing succeededIndexes: too large index: "7"',
            )
        ]
        * 2,
    ),
    (
        "validateSuccessPolicyRule on update: scaling down below succeededCount",
        job(completions=10, parallelism=10, successPolicy=policy(rule(count=6))),
        {"completions": 5, "parallelism": 5},
        [
            (
                "spec.successPolicy.rules[0].succeededCount",
                "Invalid value: 6: must be less than or equal to 5 (the number of specified completions)",
            )
        ]
        * 2,
    ),
    (
        "ValidateJob on update: growing past the hostname DNS label",
        job(LONG_NAME, completions=10, parallelism=10),
        {"completions": 11, "parallelism": 11},
        [
            (
                "metadata.name",
                f'Invalid value: "{LONG_NAME}": will not able to create pod with invalid DNS label: '
                f"{LONG_NAME}-10",
            )
        ],
    ),
    (
        "ValidateJobSpecUpdate: successPolicy is immutable",
        job(),
        {"successPolicy": policy(rule(count=1))},
        [("spec.successPolicy", 'Invalid value: {"rules":[{"succeededCount":1}]}: field is immutable')],
    ),
    (
        "ValidateJobSpecUpdate: backoffLimitPerIndex is immutable",
        job(),
        {"backoffLimitPerIndex": 2},
        [("spec.backoffLimitPerIndex", "Invalid value: 2: field is immutable")],
    ),
    (
        "ValidateJobSpecUpdate: completionMode is immutable",
        job(),
        {"completionMode": "NonIndexed"},
        [("spec.completionMode", 'Invalid value: "NonIndexed": field is immutable')],
    ),
]


@pytest.mark.parametrize(
    ("rule_name", "old", "change", "causes"), UPDATE_CASES, ids=[c[0] for c in UPDATE_CASES]
)
def test_update_rules(rule_name: str, old: Obj, change: Obj, causes: list[tuple[str, str]]) -> None:
    assert validate_job_update(old, with_spec(old, **change)) == causes, rule_name


def test_a_suspended_never_started_job_may_change_only_its_scheduling_directives() -> None:
    """validatePodTemplateUpdate with AllowMutableSchedulingDirectives."""
    old = job(suspend=True)
    scheduled = copy.deepcopy(old)
    template = scheduled["spec"]["template"]
    template["spec"]["nodeSelector"] = {"pool": "a"}
    template["spec"]["tolerations"] = [{"key": "k", "operator": "Exists"}]
    template["spec"]["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {}}}
    template["metadata"]["annotations"] = {"a": "b"}
    assert validate_job_update(old, scheduled) == []
    reimaged = copy.deepcopy(scheduled)
    reimaged["spec"]["template"]["spec"]["containers"][0]["image"] = "busybox:2"
    assert [field for field, _ in validate_job_update(old, reimaged)] == ["spec.template"]
    started = {**old, "status": {"startTime": "2024-01-01T00:00:00Z"}}
    assert [field for field, _ in validate_job_update(started, scheduled)] == ["spec.template"]


def test_repeated_update_causes_appear_once_in_the_message() -> None:
    """apierrors.NewInvalid: every cause in details, each distinct text once in the aggregated message."""
    old = job(completions=10, parallelism=10, backoffLimitPerIndex=1, maxFailedIndexes=8)
    causes = validate_job_update(old, with_spec(old, completions=5, parallelism=5))
    error = invalid("Job", "batch", "elastic", causes)
    assert error.message == (
        'Job.batch "elastic" is invalid: spec.maxFailedIndexes: Invalid value: 8: must be less than or '
        "equal to completions"
    )
    assert [c["reason"] for c in error.details["causes"]] == ["FieldValueInvalid"] * 2


# --- through the official kubernetes Python client over HTTP ----------------------------------------------


def _body(name: str, **spec: Any) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completionMode": "Indexed",
            "completions": 4,
            "parallelism": 4,
            "suspend": True,
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36"}]}
            },
            **spec,
        },
    }


def _status(error: client.ApiException) -> Obj:
    assert error.status == 422
    body: Obj = error_status(error)
    assert (body["kind"], body["reason"], body["code"]) == ("Status", "Invalid", 422)
    assert body["details"]["group"] == "batch"
    assert body["details"]["kind"] == "Job"
    return body


def test_client_reads_the_field_path_of_a_rejected_resize(kube: client.ApiClient) -> None:
    batch = client.BatchV1Api(kube)
    batch.create_namespaced_job("default", as_body(_body("resize-tandem")))
    with pytest.raises(client.ApiException) as info:
        batch.patch_namespaced_job("resize-tandem", "default", {"spec": {"completions": 6}})
    body = _status(info.value)
    assert body["details"]["name"] == "resize-tandem"
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueInvalid",
            "message": "Invalid value: 6: can only be modified in tandem with spec.parallelism",
            "field": "spec.completions",
        }
    ]
    resized = batch.patch_namespaced_job(
        "resize-tandem", "default", {"spec": {"completions": 6, "parallelism": 6}}
    )
    assert resized.spec is not None
    assert (resized.spec.completions, resized.spec.parallelism) == (6, 6)


def test_client_reads_every_cause_of_a_shrink_below_the_success_policy(kube: client.ApiClient) -> None:
    batch = client.BatchV1Api(kube)
    success = {"rules": [{"succeededIndexes": "0-3", "succeededCount": 4}]}
    batch.create_namespaced_job("default", as_body(_body("resize-policy", successPolicy=success)))
    with pytest.raises(client.ApiException) as info:
        batch.patch_namespaced_job("resize-policy", "default", {"spec": {"completions": 2, "parallelism": 2}})
    body = _status(info.value)
    fields = {(c["field"], c["message"]) for c in body["details"]["causes"]}
    # a succeededIndexes that does not parse counts 0 indexes, so succeededCount exceeds that too (upstream)
    assert fields == {
        (
            "spec.successPolicy.rules[0].succeededIndexes",
            'Invalid value: "0-3": error parsing succeededIndexes: too large index: "3"',
        ),
        (
            "spec.successPolicy.rules[0].succeededCount",
            "Invalid value: 4: must be less than or equal to 2 (the number of specified completions)",
        ),
        (
            "spec.successPolicy.rules[0].succeededCount",
            "Invalid value: 4: must be less than or equal to 0 (the number of indexes in the specified "
            "succeededIndexes field)",
        ),
    }
    assert body["message"].startswith('Job.batch "resize-policy" is invalid: [spec.successPolicy.rules[0]')


def test_client_reads_a_required_cause_on_create(kube: client.ApiClient) -> None:
    batch = client.BatchV1Api(kube)
    with pytest.raises(client.ApiException) as info:
        batch.create_namespaced_job("default", as_body(_body("no-per-index", maxFailedIndexes=1)))
    body = _status(info.value)
    assert body["details"]["causes"] == [
        {
            "reason": "FieldValueRequired",
            "message": "Required value: when maxFailedIndexes is specified",
            "field": "spec.backoffLimitPerIndex",
        }
    ]
