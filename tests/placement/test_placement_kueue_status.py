"""What `status` and `explain` say of a suspended Job Kueue has not admitted yet: `queued-by-kueue`, with
its LocalQueue and its Workload's condition message (the Workload owned by the Job, or by its JobSet), never
a wait for a domain. Where Kueue is absent (no Workloads) and the Job names no LocalQueue, it is `suspended`
as before."""

from __future__ import annotations

from placement.constants import JOBSET_GROUP, JOBSET_KIND, JOBSET_VERSION, KUEUE_QUEUE_NAME_LABEL
from placement.status import Snapshot, WaitReason, job_progress, waiting_jobs
from tests.placement.placement_pods import NS
from tests.placement.placement_status_objects import Obj, exclusive_job, pools
from tests.support.builders import WorkloadWrapper, make_workload

JOBSET_UID = "train-uid"
NO_QUOTA = (
    "couldn't assign flavors to pod set workers: insufficient unused quota for nvidia.com/gpu in flavor "
    "default-flavor, 8 more needed"
)


def child_job(name: str = "train-workers-0", *, queue: str | None = None) -> Obj:
    """A suspended exclusive Job of JobSet `train`, as JobSet's controller creates it while Kueue holds it."""
    the_job = exclusive_job(name, jobset="train", suspend=True)
    reference = {
        "apiVersion": f"{JOBSET_GROUP}/{JOBSET_VERSION}",
        "kind": JOBSET_KIND,
        "name": "train",
        "uid": JOBSET_UID,
        "controller": True,
    }
    the_job["metadata"]["ownerReferences"] = [reference]
    if queue is not None:
        the_job["metadata"]["labels"][KUEUE_QUEUE_NAME_LABEL] = queue
    return the_job


def jobset_workload(owner_uid: str = JOBSET_UID) -> WorkloadWrapper:
    return (
        make_workload("jobset-train-1a2b3", NS)
        .owned_by(JOBSET_KIND, "train", owner_uid, f"{JOBSET_GROUP}/{JOBSET_VERSION}")
        .queue("user-queue")
    )


def progress(the_job: Obj, workloads: list[Obj]) -> tuple[WaitReason | None, str]:
    waiting = job_progress(Snapshot(pools(2), [], [the_job], workloads=workloads), the_job).waiting
    return (waiting.reason, waiting.message) if waiting is not None else (None, "")


def test_a_jobset_beyond_quota_is_queued_by_kueue_with_its_local_queue_and_the_workloads_message() -> None:
    workload = jobset_workload().condition("QuotaReserved", "False", reason="Pending", message=NO_QUOTA)
    reason, message = progress(child_job(), [workload.obj()])
    assert reason is WaitReason.QUEUED_BY_KUEUE
    assert f"LocalQueue {NS}/user-queue" in message
    assert NO_QUOTA in message


def test_the_admitted_conditions_message_is_given_when_quota_reserved_says_nothing() -> None:
    workload = jobset_workload().condition("Admitted", "False", reason="NoReservation", message="waiting")
    assert progress(child_job(), [workload.obj()]) == (
        WaitReason.QUEUED_BY_KUEUE,
        f"queued by Kueue in LocalQueue {NS}/user-queue: Workload jobset-train-1a2b3: waiting",
    )


def test_a_plain_job_naming_a_local_queue_before_kueue_made_its_workload_is_queued_by_kueue() -> None:
    the_job = exclusive_job("plain", suspend=True, resize=None)
    the_job["metadata"]["labels"] = {KUEUE_QUEUE_NAME_LABEL: "user-queue"}
    reason, message = progress(the_job, [])
    assert reason is WaitReason.QUEUED_BY_KUEUE
    assert message.startswith(f"queued by Kueue in LocalQueue {NS}/user-queue: Kueue has no Workload")


def test_a_plain_jobs_own_workload_is_found_by_the_jobs_uid() -> None:
    the_job = exclusive_job("plain", suspend=True, resize=None)
    the_job["metadata"]["uid"] = "plain-uid"
    workload = (
        make_workload("job-plain-x", NS)
        .owned_by("Job", "plain", "plain-uid", "batch/v1")
        .queue("gpu-queue")
        .condition("QuotaReserved", "False", message=NO_QUOTA)
    )
    reason, message = progress(the_job, [workload.obj()])
    assert reason is WaitReason.QUEUED_BY_KUEUE
    assert f"LocalQueue {NS}/gpu-queue" in message
    assert NO_QUOTA in message


def test_an_admitted_workload_or_another_jobsets_leaves_the_job_suspended_as_before() -> None:
    admitted = jobset_workload().condition("QuotaReserved").condition("Admitted")
    others = jobset_workload("other-uid").condition("QuotaReserved", "False", message=NO_QUOTA)
    assert progress(child_job(), [admitted.obj()])[0] is WaitReason.SUSPENDED
    assert progress(child_job(), [others.obj()])[0] is WaitReason.SUSPENDED
    assert progress(child_job(), [])[0] is WaitReason.SUSPENDED


def test_a_job_waiting_for_quota_is_never_listed_as_waiting_for_a_domain() -> None:
    """Every pool held by another JobSet: the queued Jobs still wait for Kueue, not for room."""
    workload = jobset_workload().condition("QuotaReserved", "False", message=NO_QUOTA)
    jobs = [child_job(f"train-workers-{index}", queue="user-queue") for index in range(3)]
    snapshot = Snapshot(pools(2), [], jobs, workloads=[workload.obj()])
    assert [waiting.reason for waiting in waiting_jobs(snapshot)] == [WaitReason.QUEUED_BY_KUEUE] * 3
