"""Objects the webhook must leave alone get `allowed: true`, no patch, and cost no leader lookup.

(Namespaces the webhook must not see — its own and kube-system — are exempted by the webhook configuration's
namespaceSelector; `test_lifecycle_faults.py` checks that end to end on the real control plane.)
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Callable
from typing import Any

import pytest

from placement.constants import (
    JOB_NAME_LABEL,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    STRATEGIES,
    TOPOLOGY_ANNOTATION,
)
from tests.reliability.fuzz_inputs import OPERATIONS, load_fixture
from tests.reliability.reliability_app import LEADER_STATES, SettableLeaders, admission_app
from tests.support.asgi import AsgiClient

Review = dict[str, Any]
TOPOLOGY_KEYS = (TOPOLOGY_ANNOTATION, JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION)


def _strip_topology(obj: dict[str, Any]) -> None:
    """Remove every topology annotation/label, also from a Job's pod template."""
    for meta in (
        obj.get("metadata") or {},
        ((obj.get("spec") or {}).get("template") or {}).get("metadata") or {},
    ):
        for field in ("annotations", "labels"):
            for key in TOPOLOGY_KEYS:
                (meta.get(field) or {}).pop(key, None)


def without_topology(fixture: str) -> Review:
    review = load_fixture(fixture)
    _strip_topology(review["request"]["object"])
    return review


def owned_by_replicaset(fixture: str) -> Review:
    review = load_fixture(fixture)
    meta = review["request"]["object"]["metadata"]
    meta["ownerReferences"] = [
        {"apiVersion": "apps/v1", "kind": "ReplicaSet", "name": "web-7d9", "uid": "u-1", "controller": True}
    ]
    for key in list(meta.get("labels") or {}):
        if key in (JOB_NAME_LABEL, "job-name", "controller-uid", "batch.kubernetes.io/controller-uid"):
            del meta["labels"][key]
    return review


def with_operation(fixture: str, operation: str) -> Review:
    review = load_fixture(fixture)
    review["request"]["operation"] = operation
    if operation in ("UPDATE", "DELETE"):
        review["request"]["oldObject"] = copy.deepcopy(review["request"]["object"])
    if operation == "DELETE":
        review["request"]["object"] = None
    return review


def with_kind(fixture: str, kind: str) -> Review:
    review = load_fixture(fixture)
    review["request"]["kind"]["kind"] = kind
    return review


CASES: dict[str, Callable[[], Review]] = {
    "leader pod without topology annotation": lambda: without_topology("leader-pod.json"),
    "follower pod without topology annotation": lambda: without_topology("follower-pod.json"),
    "plain pod (fixture)": lambda: load_fixture("non-exclusive-pod.json"),
    "Job without topology annotation": lambda: without_topology("indexed-job.json"),
    "JobSet child Job without topology annotation": lambda: without_topology("jobset-child-job.json"),
    # A non-leader with the annotation and no Job is denied, as JobSet denies it (tests/webhook/
    # test_webhook_jobset.py::test_a_follower_without_a_job_is_denied); a leader is let through unplaced.
    "leader pod owned by a ReplicaSet": lambda: owned_by_replicaset("leader-pod.json"),
    "a JobSet sent to the pod endpoints": lambda: with_kind("leader-pod.json", "JobSet"),
    "a Deployment sent to the Job endpoint": lambda: with_kind("indexed-job.json", "Deployment"),
    **{
        f"{operation} of {fixture}": functools.partial(with_operation, fixture, operation)
        for fixture in ("leader-pod.json", "follower-pod.json", "indexed-job.json", "jobset-child-job.json")
        for operation in OPERATIONS
        if operation != "CREATE"
    },
}


@pytest.mark.parametrize("strategy", STRATEGIES)
@pytest.mark.parametrize("case", sorted(CASES))
def test_left_alone_allowed_without_patch_or_lookup(case: str, strategy: str) -> None:
    for dry_run in (False, True):
        for state in LEADER_STATES:
            leaders = SettableLeaders(state)
            with AsgiClient(admission_app(leaders, strategy)) as client:
                for endpoint in ("/mutate-pods", "/validate-pods", "/mutate-jobs"):
                    review = CASES[case]()
                    review["request"]["dryRun"] = dry_run
                    response = client.post(endpoint, json=review)
                    assert response.status_code == 200, response.text
                    answer = response.json()["response"]
                    assert answer["uid"] == review["request"]["uid"]
                    assert answer["allowed"] is True, (endpoint, answer)
                    assert "patch" not in answer, (endpoint, answer)
                    assert "patchType" not in answer, (endpoint, answer)
            assert leaders.lookups == [], f"{case}: a leader lookup was made"
