"""Pure parts of the Job controller's finalizer tracking and claiming, table-driven (each case names the
upstream function of k/k pkg/controller/job or pkg/controller/controller_ref_manager.go it pins)."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.apiserver.patches import strategic_merge_patch
from kubesim.apiserver.selectors import selector_from_dict
from kubesim.controllers.job_claim import Claim, adopt_patch, claim, release_patch
from kubesim.controllers.job_pods import build_pod, plan_indexed, plan_non_indexed
from kubesim.controllers.job_tracking import (
    BackoffRecord,
    Uncounted,
    flush_unfinalized,
    is_pod_failed,
    new_finished_pods,
    plan_finalizer_removal,
)
from placement.constants import JOB_COMPLETION_INDEX_ANNOTATION

FINALIZER = "batch.kubernetes.io/job-tracking"
Obj = dict[str, Any]
JOB_UID = "job-uid"


def job(*, indexed: bool = False, completions: int | None = 3, **spec: Any) -> Obj:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": "j", "namespace": "ns", "uid": JOB_UID},
        "spec": {
            "completions": completions,
            "parallelism": 3,
            "completionMode": "Indexed" if indexed else "NonIndexed",
            "selector": {"matchLabels": {"app": "a"}},
            "template": {"metadata": {"labels": {"app": "a"}}, "spec": {"containers": []}},
            **spec,
        },
    }


def pod(
    uid: str,
    phase: str = "Running",
    *,
    deleting: bool = False,
    finalized: bool = True,
    index: int | None = None,
    owner: str | None = JOB_UID,
    labels: dict[str, str] | None = None,
    namespace: str = "ns",
) -> Obj:
    meta: Obj = {"name": uid, "namespace": namespace, "uid": uid, "labels": labels or {"app": "a"}}
    if finalized:
        meta["finalizers"] = [FINALIZER]
    if deleting:
        meta["deletionTimestamp"] = "2024-01-01T00:00:00Z"
    if index is not None:
        meta["annotations"] = {JOB_COMPLETION_INDEX_ANNOTATION: str(index)}
    if owner:
        meta["ownerReferences"] = [{"kind": "Job", "name": "j", "uid": owner, "controller": True}]
    return {"metadata": meta, "status": {"phase": phase}}


@pytest.mark.parametrize(
    ("case", "the_pod", "the_job", "failed"),
    [
        ("isPodFailed: phase Failed", pod("a", "Failed"), job(), True),
        ("isPodFailed: running", pod("a"), job(), False),
        ("isPodFailed: deleted before succeeding", pod("a", deleting=True), job(), True),
        ("isPodFailed: deleted after succeeding", pod("a", "Succeeded", deleting=True), job(), False),
        (
            "onlyReplaceFailedPods: podReplacementPolicy Failed waits for the phase",
            pod("a", deleting=True),
            job(podReplacementPolicy="Failed"),
            False,
        ),
        (
            "onlyReplaceFailedPods: podFailurePolicy waits for the phase",
            pod("a", deleting=True),
            job(podFailurePolicy={"rules": []}),
            False,
        ),
    ],
)
def test_is_pod_failed(case: str, the_pod: Obj, the_job: Obj, failed: bool) -> None:
    assert is_pod_failed(the_pod, the_job) is failed, case


def test_new_finished_pods_skips_counted_uncounted_and_out_of_range() -> None:
    """getNewFinishedPods / getValidPodsWithFilter."""
    pods = [
        pod("done", "Succeeded", index=0),
        pod("counted", "Succeeded", index=1, finalized=False),
        pod("recorded", "Failed", index=1),
        pod("gone-index", "Failed", index=7),
        pod("lost", deleting=True, index=2),
    ]
    succeeded, failed = new_finished_pods(pods, job(indexed=True), Uncounted(failed=["recorded"]))
    assert [p["metadata"]["uid"] for p in succeeded] == ["done"]
    assert [p["metadata"]["uid"] for p in failed] == ["lost"]


def test_flush_unfinalized_moves_only_pods_without_the_finalizer() -> None:
    """cleanUncountedPodsWithoutFinalizers."""
    status: Obj = {"succeeded": 2, "failed": 1}
    uncounted = Uncounted(succeeded=["s1", "s2"], failed=["f1"])
    assert flush_unfinalized(status, uncounted, with_finalizer={"s2", "f1"}) is True
    assert (status, uncounted) == ({"succeeded": 3, "failed": 1}, Uncounted(["s2"], ["f1"]))
    assert flush_unfinalized(status, uncounted, with_finalizer={"s2", "f1"}) is False


@pytest.mark.parametrize(
    ("case", "pods", "finishing", "failing", "removed", "uncounted", "indexes"),
    [
        (
            "trackJobStatusAndRemoveFinalizers: a succeeded pod is recorded, then unfinalized",
            [pod("s", "Succeeded"), pod("r")],
            False,
            False,
            ["s"],
            Uncounted(succeeded=["s"]),
            [],
        ),
        (
            "a failed or deleted pod is recorded as failed",
            [pod("f", "Failed"), pod("d", deleting=True)],
            False,
            False,
            ["f", "d"],
            Uncounted(failed=["f", "d"]),
            [],
        ),
        (
            "a pod without the finalizer was counted in an earlier sync",
            [pod("s", "Succeeded", finalized=False)],
            False,
            False,
            [],
            Uncounted(),
            [],
        ),
        (
            "canRemoveFinalizer: a finishing Job releases running pods; a success does not count them",
            [pod("r")],
            True,
            False,
            ["r"],
            Uncounted(),
            [],
        ),
        (
            "a failing Job counts every pod that did not succeed as failed",
            [pod("r"), pod("s", "Succeeded")],
            True,
            True,
            ["r", "s"],
            Uncounted(succeeded=["s"], failed=["r"]),
            [],
        ),
    ],
)
def test_plan_finalizer_removal(
    case: str,
    pods: list[Obj],
    finishing: bool,
    failing: bool,
    removed: list[str],
    uncounted: Uncounted,
    indexes: list[int],
) -> None:
    recorded = Uncounted()
    plan = plan_finalizer_removal(pods, job(), recorded, set(), finishing=finishing, failing=failing)
    assert [p["metadata"]["uid"] for p in plan.remove_from] == removed, case
    assert recorded == uncounted, case
    assert plan.new_succeeded_indexes == indexes, case
    assert plan.changed is bool(uncounted), case


def test_plan_finalizer_removal_records_indexes_not_uids_for_indexed_jobs() -> None:
    """Indexed: the completion index is the record (no uid in uncounted.succeeded)."""
    pods = [pod("a", "Succeeded", index=2), pod("b", "Succeeded", index=0), pod("c", "Succeeded", index=5)]
    recorded = Uncounted()
    plan = plan_finalizer_removal(pods, job(indexed=True), recorded, {0}, finishing=False, failing=False)
    assert plan.new_succeeded_indexes == [2]
    assert [p["metadata"]["uid"] for p in plan.remove_from] == ["a", "b", "c"]
    assert recorded == Uncounted()


def test_plan_finalizer_removal_stops_at_max_uncounted_pods() -> None:
    """MaxUncountedPods = 500 per sync."""
    pods = [pod(f"p{i}", "Failed") for i in range(600)]
    recorded = Uncounted()
    plan = plan_finalizer_removal(pods, job(), recorded, set(), finishing=False, failing=False)
    assert (len(plan.remove_from), len(recorded.failed), plan.reached_max_uncounted) == (500, 500, True)


def test_uncounted_status_omits_empty_lists() -> None:
    assert Uncounted().to_status() == {}
    assert Uncounted(failed=["x"]).to_status() == {"failed": ["x"]}
    assert Uncounted.of({"uncountedTerminatedPods": {"succeeded": ["a"]}}) == Uncounted(succeeded=["a"])


@pytest.mark.parametrize(
    ("record", "succeeded", "failed", "now", "remaining"),
    [
        (BackoffRecord(), 0, 0, 5.0, 0.0),
        (BackoffRecord(), 0, 1, 5.0, 10.0),
        (BackoffRecord(1, 0.0), 0, 1, 4.0, 20.0),
        (BackoffRecord(2, 0.0), 1, 1, 4.0, 0.0),
        (BackoffRecord(20, 0.0), 0, 0, 100.0, 500.0),
    ],
)
def test_backoff_record(
    record: BackoffRecord, succeeded: int, failed: int, now: float, remaining: float
) -> None:
    """newBackoffRecord / getRemainingTime: 10 s doubling per failure since the last success, 600 s cap."""
    after = record.after(succeeded, failed, now)
    assert after.remaining(now, 10.0, 600.0) == pytest.approx(remaining)


SELECTOR = selector_from_dict({"matchLabels": {"app": "a"}})


@pytest.mark.parametrize(
    ("case", "the_pod", "the_job", "expected"),
    [
        ("ClaimObject: owned and matching", pod("a"), job(), Claim.OWNED),
        ("owned by someone else", pod("a", owner="other"), job(), Claim.IGNORE),
        ("owned, no longer matching: release", pod("a", labels={"app": "b"}), job(), Claim.RELEASE),
        (
            "owned, no longer matching, Job being deleted: keep",
            pod("a", labels={"app": "b"}),
            {**job(), "metadata": {**job()["metadata"], "deletionTimestamp": "t"}},
            Claim.IGNORE,
        ),
        (
            "owned and matching while the Job is being deleted: still claimed",
            pod("a"),
            {**job(), "metadata": {**job()["metadata"], "deletionTimestamp": "t"}},
            Claim.OWNED,
        ),
        ("orphan matching: adopt", pod("a", owner=None), job(), Claim.ADOPT),
        ("orphan not matching", pod("a", owner=None, labels={"app": "b"}), job(), Claim.IGNORE),
        ("orphan being deleted", pod("a", owner=None, deleting=True), job(), Claim.IGNORE),
        ("orphan in another namespace", pod("a", owner=None, namespace="x"), job(), Claim.IGNORE),
        (
            "orphan, Job being deleted",
            pod("a", owner=None),
            {**job(), "metadata": {**job()["metadata"], "deletionTimestamp": "t"}},
            Claim.IGNORE,
        ),
    ],
)
def test_claim(case: str, the_pod: Obj, the_job: Obj, expected: Claim) -> None:
    assert claim(the_pod, the_job, SELECTOR) is expected, case


def test_adopt_and_release_patches_add_and_remove_the_reference_and_the_finalizer() -> None:
    """ownerRefControllerPatch / GenerateDeleteOwnerRefStrategicMergeBytes, applied as strategic merges."""
    orphan = pod("a", owner=None, finalized=False)
    orphan["metadata"]["ownerReferences"] = [{"kind": "ConfigMap", "name": "c", "uid": "cm"}]
    orphan["metadata"]["finalizers"] = ["example.com/keep"]
    adopted = strategic_merge_patch(orphan, adopt_patch(job(), orphan))
    assert [r["uid"] for r in adopted["metadata"]["ownerReferences"]] == ["cm", JOB_UID]
    assert adopted["metadata"]["finalizers"] == ["example.com/keep", FINALIZER]
    released = strategic_merge_patch(adopted, release_patch(job(), adopted))
    assert released["metadata"]["ownerReferences"] == orphan["metadata"]["ownerReferences"]
    assert released["metadata"]["finalizers"] == ["example.com/keep"]


def test_built_pods_get_the_finalizer_once_next_to_the_templates() -> None:
    """appendJobCompletionFinalizerIfNotFound."""
    the_job = job()
    the_job["spec"]["template"]["metadata"]["finalizers"] = ["example.com/keep", FINALIZER]
    assert build_pod(the_job, None)["metadata"]["finalizers"] == ["example.com/keep", FINALIZER]
    assert build_pod(job(), None)["metadata"]["finalizers"] == [FINALIZER]


def test_terminating_pods_hold_their_index_and_parallelism_when_only_failed_pods_are_replaced() -> None:
    """manageJob with onlyReplaceFailedPods: diff = wantActive - terminating - active; firstPendingIndexes
    skips terminating indexes."""
    plan = plan_indexed(3, 3, set(), [pod("a", index=1)], 500, terminating=[0])
    assert plan.create_indexes == [2]
    assert plan_non_indexed(3, 3, 0, [pod("a")], 500, terminating=1).create_count == 1
