"""What the reconcilers did, reported as it happens: the shape of a Kubernetes Event (events.k8s.io/v1).

Each reconciler is given a `Recorder` and calls `record(Outcome(...))` once per thing it did (nothing in
dry-run, nothing for a decision not to act): client-go's `events.EventRecorder`, injected as
controller-runtime injects its recorder. `regarding` is the object the Event is about, `related` a second
one, `reason` and `action` are fixed words (`Reason`, `Action`), `note` is for people. The app's recorder
is `kubekit.events.EventRecorder` (an `Outcome` is its `Occurrence`), reporting as `REPORTING_CONTROLLER`.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol

from kubekit.events import EventType, ObjectRef
from placement.constants import ALL_OR_NOTHING_STEPPED_OVER_REASON, JOBSET_GROUP, JOBSET_KIND, JOBSET_VERSION
from placement.gang import GangId
from placement.objects import Obj, metadata, namespace_of, uid_of

REPORTING_CONTROLLER = "exclusive-placement.io/resizer"
"""The Events' reporting controller; each replica reports as `<this>-<pod or host name>`."""


class Reason(StrEnum):
    RESIZED = "Resized"
    FOLLOWERS_RELEASED = "FollowersReleased"
    FOLLOWER_REPAIRED = "FollowerRepaired"
    ALL_OR_NOTHING_WAITING = "AllOrNothingWaiting"
    ALL_OR_NOTHING_RELEASED = "AllOrNothingReleased"
    ALL_OR_NOTHING_TIMED_OUT = "AllOrNothingTimedOut"
    ALL_OR_NOTHING_STEPPED_OVER = ALL_OR_NOTHING_STEPPED_OVER_REASON
    RESIZE_REFUSED = "ResizeRefused"


class Action(StrEnum):
    RESIZE = "Resize"
    RELEASE_GATE = "ReleaseGate"
    DELETE_POD = "DeletePod"
    WAIT = "Wait"
    RELEASE_LEADERS = "ReleaseLeaders"
    SUSPEND_JOBS = "SuspendJobs"
    STEP_OVER = "StepOver"


@dataclass(frozen=True)
class Outcome:
    regarding: ObjectRef
    reason: Reason
    action: Action
    note: str
    type: EventType = EventType.NORMAL
    related: ObjectRef | None = None


class Recorder(Protocol):
    def record(self, outcome: Outcome) -> None: ...


class Discard:
    """The recorder of a resizer that writes no Events."""

    def record(self, outcome: Outcome) -> None:
        return None


def job_reference(job: Obj) -> ObjectRef:
    return ObjectRef("batch/v1", "Job", namespace_of(job), str(metadata(job).get("name") or ""), uid_of(job))


def job_reference_by_key(job_key: str, uid: str = "") -> ObjectRef:
    """A Job known by its `namespace/name` (and its uid, when known)."""
    namespace, name = job_key.split("/", 1)
    return ObjectRef("batch/v1", "Job", namespace, name, uid)


def pod_reference(pod: Obj) -> ObjectRef:
    return ObjectRef("v1", "Pod", namespace_of(pod), str(metadata(pod).get("name") or ""), uid_of(pod))


def jobset_reference(gang: GangId, uid: str) -> ObjectRef:
    """The JobSet of a gang; `uid` is what `kubectl describe jobset` selects its Events by (empty: unknown,
    the Event is then listed by `kubectl get events` only)."""
    return ObjectRef(f"{JOBSET_GROUP}/{JOBSET_VERSION}", JOBSET_KIND, gang.namespace, gang.jobset, uid)
