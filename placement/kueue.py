"""Jobs that Kueue queues: which of them `elastic` cannot shrink, and why (pure).

Kueue builds the Workload of a plain Job labelled `kueue.x-k8s.io/queue-name` from the Job itself: it
reserves quota for `spec.parallelism` pods and, once the Workload is admitted, checks that the Job still
matches it (its `jobframework` reconciler). A Job `elastic` admitted at size 1 is admitted by Kueue for one
pod, and its resize to N fails that check: Kueue stops the Job and deletes its Workload, or, with Kueue's
`kueue.x-k8s.io/elastic-job: "true"` (workload slices), runs the new pods behind its own scheduling gate in
a new slice. Neither keeps the Job whole and within quota, so such a Job is placed with `gate` instead (at
full size from the start: Kueue reserves quota for all of its pods). So is a plain Job that names no queue in
a namespace with a LocalQueue named `default` (`DEFAULT_LOCAL_QUEUE`): Kueue's LocalQueue defaulting labels
it for that queue in Kueue's own Job webhook, which kube-apiserver calls after this project's, so the
webhook reads that LocalQueue (`DefaultQueue`) rather than wait for the label.

A JobSet's child Jobs are shrunk as anywhere else: Kueue builds a JobSet's Workload from the JobSet's spec
(quota for every pod) and never checks the child Jobs. When Kueue preempts or evicts an admitted JobSet,
JobSet suspends the child Jobs in place; the resizer puts a suspended Job it had resized back to size 1
(`placement.rewind`), so the resume places it as at its first start.

`kueue_queued` is what `status` and `explain` say of a suspended Job Kueue has not admitted yet: its
LocalQueue and its Workload's condition message (the Workload is owned by the Job, or by its JobSet).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from placement.constants import KUEUE_QUEUE_NAME_LABEL
from placement.jobset import owning_jobset
from placement.objects import (
    Obj,
    annotations_of,
    items,
    labels_of,
    metadata,
    namespace_of,
    section,
)

KUEUE_ELASTIC_JOB_ANNOTATION = "kueue.x-k8s.io/elastic-job"
KUEUE_GROUP = "kueue.x-k8s.io"
KUEUE_VERSION = "v1beta2"
WORKLOADS = "workloads"
DEFAULT_LOCAL_QUEUE = "default"
"""Kueue's LocalQueue defaulting (stable since Kueue v0.17): a Job or JobSet created without a queue label,
in a namespace that has a LocalQueue of this name, is labelled for it by Kueue's webhook."""
_PENDING_CONDITIONS = ("QuotaReserved", "Admitted")
"""A Workload's conditions that say why it is not admitted, the most telling first."""


def queue_name(job: Obj) -> str | None:
    """The LocalQueue a plain Job asks Kueue to queue it in (None: not queued, or a JobSet's child Job)."""
    name = labels_of(job).get(KUEUE_QUEUE_NAME_LABEL)
    if not name or owning_jobset(job) is not None:
        return None
    return name


@dataclass(frozen=True)
class DefaultQueue:
    """The LocalQueue Kueue's LocalQueue defaulting gives a plain Job that names none: `DEFAULT_LOCAL_QUEUE`
    of its namespace, as the webhook found it (`unread`: why the webhook could not tell whether it exists)."""

    local_queue: str
    """`<namespace>/<name>`."""
    unread: str = ""


def kueue_elastic_problem(job: Obj, default_queue: DefaultQueue | None = None) -> str | None:
    """Why `elastic` cannot shrink this Job because Kueue queues it, or None. `default_queue`: the LocalQueue
    Kueue's webhook, which kube-apiserver calls after this project's (webhook configurations run in the
    order of their names), will label a Job that names none for (None: the namespace has none)."""
    name = queue_name(job)
    if name is not None:
        how = f"label {KUEUE_QUEUE_NAME_LABEL}={name}"
    elif default_queue is not None and owning_jobset(job) is None:
        how = _defaulted(default_queue)
    else:
        return None
    if annotations_of(job).get(KUEUE_ELASTIC_JOB_ANNOTATION) == "true":
        return (
            f"the Job is queued by Kueue ({how}) as an elastic Job "
            f'({KUEUE_ELASTIC_JOB_ANNOTATION}: "true"): Kueue would admit one pod\'s quota and put the '
            "resized pods in a new workload slice behind its own scheduling gate, which this project does "
            "not handle"
        )
    return (
        f"the Job is queued by Kueue ({how}): Kueue builds its Workload "
        "from the Job, so it would reserve quota for one pod and stop the Job when it is resized"
    )


def _defaulted(queue: DefaultQueue) -> str:
    if queue.unread:
        return (
            f"it names no LocalQueue, and LocalQueue {queue.local_queue} could not be read ({queue.unread}): "
            f"if it exists, Kueue's LocalQueue defaulting labels the Job {KUEUE_QUEUE_NAME_LABEL}="
            f"{DEFAULT_LOCAL_QUEUE}"
        )
    return (
        f"it names no LocalQueue, and its namespace has LocalQueue {queue.local_queue}: Kueue's LocalQueue "
        f"defaulting labels the Job {KUEUE_QUEUE_NAME_LABEL}={DEFAULT_LOCAL_QUEUE}"
    )


@dataclass(frozen=True)
class KueueQueued:
    """A suspended Job that waits for Kueue to admit it."""

    queue: str
    """The LocalQueue (empty when only the Workload is known and names none)."""
    message: str


def workload_of(job: Obj, workloads: Iterable[Obj]) -> Obj | None:
    """The Kueue Workload of a Job: the one owned by the Job itself, or by its JobSet."""
    jobset = owning_jobset(job)
    owners = {uid for uid in (str(metadata(job).get("uid") or ""), jobset.uid if jobset else "") if uid}
    for workload in workloads:
        if namespace_of(workload) != namespace_of(job):
            continue
        refs = items(metadata(workload), "ownerReferences")
        if any(isinstance(ref, dict) and ref.get("uid") in owners for ref in refs):
            return workload
    return None


def _condition(workload: Obj, kind: str) -> Obj | None:
    for condition in items(section(workload, "status"), "conditions"):
        if isinstance(condition, dict) and condition.get("type") == kind:
            return condition
    return None


def _pending_message(workload: Obj | None) -> str:
    if workload is None:
        return "Kueue has no Workload for it yet (is Kueue running, and does the LocalQueue exist?)"
    for kind in _PENDING_CONDITIONS:
        condition = _condition(workload, kind)
        if condition is not None and condition.get("status") == "False" and condition.get("message"):
            return f"Workload {metadata(workload).get('name')}: {condition['message']}"
    return f"Workload {metadata(workload).get('name')} not evaluated by Kueue yet"


def kueue_queued(job: Obj, workloads: Iterable[Obj]) -> KueueQueued | None:
    """Why a suspended Job waits for Kueue (its LocalQueue, its Workload's word), or None: it names no
    LocalQueue and has no Workload, or its Workload is admitted (Kueue resumes it next)."""
    workload = workload_of(job, workloads)
    queue = labels_of(job).get(KUEUE_QUEUE_NAME_LABEL) or str(
        section(workload or {}, "spec").get("queueName") or ""
    )
    admitted = workload is not None and (_condition(workload, "Admitted") or {}).get("status") == "True"
    if admitted or (workload is None and not queue):
        return None
    where = f"LocalQueue {namespace_of(job)}/{queue}" if queue else "Kueue"
    return KueueQueued(queue, f"queued by Kueue in {where}: {_pending_message(workload)}")
