"""Identity of Jobs and pods, read from plain Kubernetes dicts.

- `topology_key_of_job(job)` / `topology_key_of_pod(pod)`: the node label key that defines a domain
  (`exclusive-placement.io/topology` wins over JobSet's `alpha.jobset.sigs.k8s.io/exclusive-topology`).
  For a Job, metadata is read first, then the pod template.
- `job_ref_of_pod(pod)`: the owning Job (name, uid) from the controller ownerReference, else from the
  `batch.kubernetes.io/job-name` / `controller-uid` labels (pods from generateName have no name yet);
  `owner_job_key(pod)`: that Job as `<namespace>/<name>`.
- `job_key(namespace, job_name)`: sha1 of `<namespace>/<job name>` (JobSet's own formula); every affinity
  term selects on it. Derived from the pod's own namespace and owning Job, never read from a label: a Job
  template or a pod can carry any label (`placement.reserved` denies a JobSet job-key that disagrees).
- `completion_index(pod)` / `is_leader(pod)`: the leader is completion index "0".
- `target_size(job)`: the completions a Job is meant to run: the target the webhook recorded when it
  shrank the Job (elastic), else `spec.completions`.
- `is_terminating(obj)`, `is_finished_pod(pod)`: leaders in these states are ignored; `is_finished_job(job)`.
- `section(obj, field)`, `items(obj, field)`, `labels_of(obj)`, `annotations_of(obj)`, `node_name(pod)`,
  `namespace_of(obj)`, `uid_of(obj)`: null-safe accessors.
"""

from __future__ import annotations

import functools
import hashlib
from dataclasses import dataclass
from typing import Any

from placement.constants import (
    CONTROLLER_UID_LABEL,
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOB_COMPLETION_INDEX_LABEL,
    JOB_NAME_LABEL,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    LEADER_COMPLETION_INDEX,
    LEGACY_CONTROLLER_UID_LABEL,
    LEGACY_JOB_NAME_LABEL,
    MAX_FOLLOWER_SHARDS,
    TARGET_COMPLETIONS_ANNOTATION,
    TOPOLOGY_ANNOTATION,
)
from placement.counts import MAX_INDEXED_JOB_SIZE, InvalidCount, parse_count

Obj = dict[str, Any]
FINISHED_POD_PHASES = frozenset({"Succeeded", "Failed"})
FINISHED_JOB_CONDITIONS = frozenset({"Complete", "Failed", "SuccessCriteriaMet", "FailureTarget"})


@dataclass(frozen=True)
class JobRef:
    """The Job a pod belongs to. `uid` is empty when only the name label is known."""

    name: str
    uid: str


def section(obj: Obj, field: str) -> Obj:
    """`obj[field]` when it is a map (spec, status, template, …), else an empty map: never raises on
    objects that are not shaped as the API server would send them."""
    value = obj.get(field)
    return value if isinstance(value, dict) else {}


def items(obj: Obj, field: str) -> list[Any]:
    """`obj[field]` when it is a list (ownerReferences, schedulingGates, conditions, …), else an empty list:
    never raises on objects that are not shaped as the API server would send them."""
    value = obj.get(field)
    return value if isinstance(value, list) else []


def metadata(obj: Obj) -> Obj:
    return section(obj, "metadata")


_STRINGS_ONLY = frozenset({str})


def string_map(obj: Obj, field: str) -> dict[str, str]:
    """metadata.labels / metadata.annotations as a str→str dict (missing or null → empty)."""
    value = metadata(obj).get(field)
    if not isinstance(value, dict):
        return {}
    if _STRINGS_ONLY.issuperset(map(type, value.values())) and _STRINGS_ONLY.issuperset(map(type, value)):
        return dict(value)  # what the API server sends: copied in C, not entry by entry
    return {str(k): str(v) for k, v in value.items() if v is not None}


def labels_of(obj: Obj) -> dict[str, str]:
    return string_map(obj, "labels")


def annotations_of(obj: Obj) -> dict[str, str]:
    return string_map(obj, "annotations")


def _string_in(obj: Obj, field: str, key: str) -> str | None:
    """`string_map(obj, field).get(key)` without copying the map."""
    value = metadata(obj).get(field)
    if not isinstance(value, dict):
        return None
    item = value.get(key)
    return None if item is None else str(item)


def label(obj: Obj, key: str) -> str | None:
    return _string_in(obj, "labels", key)


def annotation(obj: Obj, key: str) -> str | None:
    return _string_in(obj, "annotations", key)


def topology_key_from_annotations(annos: dict[str, str]) -> str | None:
    for key in (TOPOLOGY_ANNOTATION, JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION):
        value = annos.get(key, "").strip()
        if value:
            return value
    return None


def pod_template(job: Obj) -> Obj:
    return section(section(job, "spec"), "template")


def topology_key_of_pod(pod: Obj) -> str | None:
    return topology_key_from_annotations(annotations_of(pod))


def topology_key_of_job(job: Obj) -> str | None:
    """Job metadata first, then the pod template (JobSet copies its annotation to both)."""
    return _topology_key_in(job) or _topology_key_in(pod_template(job))


def _topology_key_in(obj: Obj) -> str | None:
    """`topology_key_from_annotations(annotations_of(obj))` without copying the annotations (admission reads
    a Job's several times)."""
    for key in (TOPOLOGY_ANNOTATION, JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION):
        value = (annotation(obj, key) or "").strip()
        if value:
            return value
    return None


def job_ref_of_pod(pod: Obj) -> JobRef | None:
    for ref in items(metadata(pod), "ownerReferences"):
        if isinstance(ref, dict) and ref.get("kind") == "Job" and ref.get("controller") and ref.get("name"):
            return JobRef(name=str(ref["name"]), uid=str(ref.get("uid") or ""))
    name = label(pod, JOB_NAME_LABEL) or label(pod, LEGACY_JOB_NAME_LABEL)
    if not name:
        return None
    uid = label(pod, CONTROLLER_UID_LABEL) or label(pod, LEGACY_CONTROLLER_UID_LABEL) or ""
    return JobRef(name=name, uid=uid)


def owner_job_key(pod: Obj) -> str | None:
    """`<namespace>/<job name>` of the Job controlling this pod (None for a pod of no Job): the index both
    caches keep leader pods under, and the resizer's work-queue key."""
    ref = job_ref_of_pod(pod)
    return None if ref is None else f"{namespace_of(pod)}/{ref.name}"


@functools.lru_cache(maxsize=4096)  # a pod's admission asks for its Job's key three times
def job_key(namespace: str, job_name: str) -> str:
    """sha1 hex of `<namespace>/<job name>` (40 chars: a valid label value), as JobSet computes its
    `jobset.sigs.k8s.io/job-key` (`jobHashKey` in its JobSet controller)."""
    return hashlib.sha1(f"{namespace}/{job_name}".encode(), usedforsecurity=False).hexdigest()


def pin_shard(namespace: str, job_name: str, shards: int) -> str:
    """The follower shard of a Job (`PIN_SHARD_LABEL`), "0" to `shards - 1`: the first 32 bits of its
    `job_key` (the sha1 of `<namespace>/<job name>`) modulo `shards`; stable across processes and releases
    (no salted hash). Raises ValueError unless 1 <= shards <= MAX_FOLLOWER_SHARDS."""
    if not 1 <= shards <= MAX_FOLLOWER_SHARDS:
        raise ValueError(f"follower shards must be 1 to {MAX_FOLLOWER_SHARDS}, not {shards}")
    return str(int(job_key(namespace, job_name)[:8], 16) % shards)


def completion_index(pod: Obj) -> str | None:
    index = annotation(pod, JOB_COMPLETION_INDEX_ANNOTATION) or label(pod, JOB_COMPLETION_INDEX_LABEL)
    return index.strip() if index else None


def completion_index_in(annotations: dict[str, str], labels: dict[str, str]) -> str | None:
    """`completion_index` of a pod whose annotations and labels are read already."""
    index = annotations.get(JOB_COMPLETION_INDEX_ANNOTATION) or labels.get(JOB_COMPLETION_INDEX_LABEL)
    return index.strip() if index else None


def is_leader(pod: Obj) -> bool:
    return completion_index(pod) == LEADER_COMPLETION_INDEX


def positive_int(value: Any) -> int | None:
    """An int > 0, or a count as the webhook writes it (`placement.counts`: ASCII digits, up to the largest
    Indexed Job), as an int; None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value > 0 else None
    if isinstance(value, str):
        try:
            return parse_count(value, MAX_INDEXED_JOB_SIZE)
        except InvalidCount:
            return None
    return None


def target_size(job: Obj) -> int:
    """The recorded target of a shrunk Job, else `spec.completions`; 1 when neither is a positive int."""
    recorded = positive_int(annotations_of(job).get(TARGET_COMPLETIONS_ANNOTATION))
    return recorded or positive_int(section(job, "spec").get("completions")) or 1


def is_terminating(obj: Obj) -> bool:
    return bool(metadata(obj).get("deletionTimestamp"))


def is_finished_pod(pod: Obj) -> bool:
    return section(pod, "status").get("phase") in FINISHED_POD_PHASES


def is_finished_job(job: Obj) -> bool:
    """A Job condition says it finished, or is about to (the terminal conditions and their targets)."""
    return any(
        isinstance(condition, dict)
        and condition.get("type") in FINISHED_JOB_CONDITIONS
        and condition.get("status") == "True"
        for condition in items(section(job, "status"), "conditions")
    )


def node_name(pod: Obj) -> str | None:
    name = section(pod, "spec").get("nodeName")
    return str(name) if name else None


def uid_of(obj: Obj) -> str:
    return str(metadata(obj).get("uid") or "")


def namespace_of(obj: Obj, default: str = "") -> str:
    return str(metadata(obj).get("namespace") or default)
