"""Real-shaped Kubernetes objects for tests, built as JobSet's test wrappers build theirs
(`MakeJobSet(name, ns).ReplicatedJob(...).Obj()`): a minimal valid object, then what the test is about,
chained; `.obj()` returns a fresh dict each time.

    leader = make_pod("train-0-0", "team").owned_by("train-0", "job-uid").index(0).node("node-5").obj()
    job = make_job("train-0", "team").uid("job-uid").indexed(1).pending(8).obj()
"""

from __future__ import annotations

import copy
from collections.abc import Mapping, Sequence
from typing import Any, Self

from placement.constants import (
    ALL_OR_NOTHING_ANNOTATION,
    CONTROLLER_UID_LABEL,
    GANG_QUEUED_AT_ANNOTATION,
    GANG_SIZE_ANNOTATION,
    GKE_NODEPOOL_LABEL,
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOB_NAME_LABEL,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    JOBSET_GROUP,
    JOBSET_KIND,
    JOBSET_NAME_LABEL,
    JOBSET_RESTART_ATTEMPT_LABEL,
    JOBSET_UID_LABEL,
    JOBSET_VERSION,
    LEADER_SCHEDULED_GATE,
    RESIZE_LABEL,
    RESIZE_PENDING,
    TARGET_COMPLETIONS_ANNOTATION,
    TARGET_PARALLELISM_ANNOTATION,
    TOPOLOGY_ANNOTATION,
)
from placement.kueue import KUEUE_GROUP, KUEUE_VERSION

Obj = dict[str, Any]


class Wrapper:
    """What every object has: metadata."""

    def __init__(self, body: Obj) -> None:
        self._obj = body

    @property
    def _meta(self) -> Obj:
        meta: Obj = self._obj["metadata"]
        return meta

    def obj(self) -> Obj:
        return copy.deepcopy(self._obj)

    def uid(self, uid: str) -> Self:
        self._meta["uid"] = uid
        return self

    def labels(self, values: Mapping[str, str]) -> Self:
        """metadata.labels exactly `values` (an empty map too)."""
        self._meta["labels"] = dict(values)
        return self

    def annotations(self, values: Mapping[str, str]) -> Self:
        """metadata.annotations exactly `values` (an empty map too)."""
        self._meta["annotations"] = dict(values)
        return self

    def label(self, key: str, value: str) -> Self:
        self._meta.setdefault("labels", {})[key] = value
        return self

    def annotation(self, key: str, value: str) -> Self:
        self._meta.setdefault("annotations", {})[key] = value
        return self

    def resource_version(self, version: str) -> Self:
        self._meta["resourceVersion"] = version
        return self

    def generation(self, generation: int) -> Self:
        self._meta["generation"] = generation
        return self

    def created(self, timestamp: str) -> Self:
        self._meta["creationTimestamp"] = timestamp
        return self

    def terminating(self, since: str = "2026-01-01T00:00:00Z") -> Self:
        self._meta["deletionTimestamp"] = since
        return self

    def in_gang(self, jobset: str, size: int, *, queued_at: str | None = None, attempt: str = "0") -> Self:
        """As JobSet's controller and the webhook leave a Job or pod of an all-or-nothing JobSet of `size`
        Jobs (the JobSet's uid: `<jobset>-uid`)."""
        self.label(JOBSET_NAME_LABEL, jobset).label(JOBSET_RESTART_ATTEMPT_LABEL, attempt)
        self.label(JOBSET_UID_LABEL, f"{jobset}-uid")
        self.annotation(ALL_OR_NOTHING_ANNOTATION, "true").annotation(GANG_SIZE_ANNOTATION, str(size))
        return self if queued_at is None else self.annotation(GANG_QUEUED_AT_ANNOTATION, queued_at)

    def spec(self, **fields: Any) -> Self:
        self._obj.setdefault("spec", {}).update(fields)
        return self

    def status(self, **fields: Any) -> Self:
        self._obj.setdefault("status", {}).update(fields)
        return self

    def condition(self, kind: str, status: str = "True", **fields: str) -> Self:
        conditions = self._obj.setdefault("status", {}).setdefault("conditions", [])
        conditions.append({"type": kind, "status": status, **fields})
        return self


def _metadata(name: str, namespace: str | None) -> Obj:
    return {"name": name} if namespace is None else {"name": name, "namespace": namespace}


class PodWrapper(Wrapper):
    def __init__(self, name: str, namespace: str | None) -> None:
        super().__init__(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": _metadata(name, namespace),
                "spec": {"containers": [{"name": "c", "image": "busybox"}]},
                "status": {"phase": "Pending"},
            }
        )

    def owner_references(self, references: Sequence[Obj]) -> Self:
        self._meta["ownerReferences"] = [dict(reference) for reference in references]
        return self

    def owned_by(self, job: str, uid: str = "", *, labels: bool = False) -> Self:
        """Controlled by Job `job` (its ownerReference; with `labels`, the Job controller's labels too)."""
        reference = {"apiVersion": "batch/v1", "kind": "Job", "name": job, "uid": uid, "controller": True}
        self._meta["ownerReferences"] = [reference]
        if labels:
            self.label(JOB_NAME_LABEL, job).label(CONTROLLER_UID_LABEL, uid)
        return self

    def job_label(self, job: str) -> Self:
        """Labelled with its Job's name only (as pods are before their ownerReference is read)."""
        return self.label(JOB_NAME_LABEL, job)

    def index(self, index: int | str) -> Self:
        return self.annotation(JOB_COMPLETION_INDEX_ANNOTATION, str(index))

    def topology(self, key: str, annotation: str = JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION) -> Self:
        return self.annotation(annotation, key)

    def node(self, name: str | None) -> Self:
        if name is not None:
            self._obj["spec"]["nodeName"] = name
        return self

    def gated(self, *gates: str) -> Self:
        self._obj["spec"]["schedulingGates"] = [{"name": gate} for gate in gates or (LEADER_SCHEDULED_GATE,)]
        return self

    def selector(self, key: str, value: str) -> Self:
        self._obj["spec"].setdefault("nodeSelector", {})[key] = value
        return self

    def phase(self, phase: str | None) -> Self:
        """Its status.phase; None: none at all (a pod the API server has not defaulted)."""
        if phase is None:
            self._obj["status"].pop("phase", None)
            return self
        return self.status(phase=phase)

    def requests(self, **resources: str) -> Self:
        """Resource requests of its (first) container, e.g. `requests(**{"nvidia.com/gpu": "8"})`."""
        container = self._obj["spec"]["containers"][0]
        container.setdefault("resources", {}).setdefault("requests", {}).update(resources)
        return self

    def priority(self, priority: int) -> Self:
        return self.spec(priority=priority)


class JobWrapper(Wrapper):
    def __init__(self, name: str, namespace: str | None) -> None:
        super().__init__(
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": _metadata(name, namespace),
                "spec": {
                    "template": {
                        "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox"}]}
                    }
                },
            }
        )

    def indexed(self, completions: int, parallelism: int | None = None) -> Self:
        return self.spec(
            completionMode="Indexed",
            completions=completions,
            parallelism=completions if parallelism is None else parallelism,
        )

    def limits(self, **resources: str) -> Self:
        """Resource limits of its pod template's first container: `limits(**{"nvidia.com/gpu": "4"})`."""
        container = self._obj["spec"]["template"]["spec"]["containers"][0]
        container.setdefault("resources", {}).setdefault("limits", {}).update(resources)
        return self

    def template_annotations(self, values: Mapping[str, str]) -> Self:
        """Its pod template's metadata.annotations exactly `values` (an empty map too)."""
        self._obj["spec"]["template"].setdefault("metadata", {})["annotations"] = dict(values)
        return self

    def controlled_by_jobset(self, jobset: str, uid: str) -> Self:
        reference = {
            "apiVersion": f"{JOBSET_GROUP}/{JOBSET_VERSION}",
            "kind": JOBSET_KIND,
            "name": jobset,
            "uid": uid,
            "controller": True,
            "blockOwnerDeletion": True,
        }
        self._meta["ownerReferences"] = [reference]
        return self

    def template_annotation(self, key: str, value: str) -> Self:
        self._obj["spec"]["template"].setdefault("metadata", {}).setdefault("annotations", {})[key] = value
        return self

    def pending(
        self, target: int, parallelism: int | None = None, *, topology_key: str = GKE_NODEPOOL_LABEL
    ) -> Self:
        """As the webhook leaves an elastic Job: `resize: pending`, its target size recorded on the Job and
        on its pod template, which carries the topology annotation."""
        record = {
            TARGET_COMPLETIONS_ANNOTATION: str(target),
            TARGET_PARALLELISM_ANNOTATION: str(target if parallelism is None else parallelism),
        }
        self.label(RESIZE_LABEL, RESIZE_PENDING)
        for key, value in {**record, TOPOLOGY_ANNOTATION: topology_key}.items():
            self.template_annotation(key, value)
        for key, value in record.items():
            self.annotation(key, value)
        return self


class NodeWrapper(Wrapper):
    def __init__(self, name: str) -> None:
        super().__init__({"apiVersion": "v1", "kind": "Node", "metadata": {"name": name}, "spec": {}})

    def unschedulable(self) -> Self:
        return self.spec(unschedulable=True)


class WorkloadWrapper(Wrapper):
    """A Kueue Workload (kueue.x-k8s.io/v1beta2), as Kueue's manager makes one for a Job or JobSet."""

    def __init__(self, name: str, namespace: str) -> None:
        super().__init__(
            {
                "apiVersion": f"{KUEUE_GROUP}/{KUEUE_VERSION}",
                "kind": "Workload",
                "metadata": _metadata(name, namespace),
                "spec": {"podSets": []},
            }
        )

    def owned_by(self, kind: str, name: str, uid: str, api_version: str) -> Self:
        reference = {"apiVersion": api_version, "kind": kind, "name": name, "uid": uid, "controller": True}
        self._meta.setdefault("ownerReferences", []).append(reference)
        return self

    def queue(self, name: str) -> Self:
        self._obj["spec"]["queueName"] = name
        return self


class JobSetWrapper(Wrapper):
    """A JobSet (jobset.x-k8s.io) as a watch delivers it: its suspension and its conditions."""

    def __init__(self, name: str, namespace: str) -> None:
        super().__init__(
            {
                "apiVersion": f"{JOBSET_GROUP}/{JOBSET_VERSION}",
                "kind": JOBSET_KIND,
                "metadata": _metadata(name, namespace),
                "spec": {"replicatedJobs": []},
            }
        )

    def suspended(self, suspend: bool = True) -> Self:
        return self.spec(suspend=suspend)


def make_pod(name: str, namespace: str | None = "default") -> PodWrapper:
    """A pod in `namespace` (None: none named, for a manifest created into one)."""
    return PodWrapper(name, namespace)


def make_job(name: str, namespace: str | None = "default") -> JobWrapper:
    """A Job in `namespace` (None: none named, for a manifest created into one)."""
    return JobWrapper(name, namespace)


def make_workload(name: str, namespace: str = "default") -> WorkloadWrapper:
    return WorkloadWrapper(name, namespace)


def make_jobset(name: str, namespace: str = "default") -> JobSetWrapper:
    return JobSetWrapper(name, namespace)


def make_node(name: str) -> NodeWrapper:
    return NodeWrapper(name)
