"""What no client may decide: the keys this project derives or writes itself (SECURITY.md, "Threat model").

- The job key every affinity term selects on is derived from the Job's own namespace and name
  (`placement.objects.job_key`: sha1 of `<namespace>/<job>`, JobSet's formula). JobSet writes the same value
  as `jobset.sigs.k8s.io/job-key` on its child Jobs and their pod templates; the label is otherwise free
  text any Job template or pod may carry. One that disagrees asks to be placed as another Job, perhaps of
  another namespace: `jobset_key_problem_of_job(job, namespace)` / `jobset_key_problem_of_pod(...)` say so,
  and admission denies it.
- The resize keys (`RESIZE_KEYS`: the `exclusive-placement.io/resize` and `pin-followers` labels, the
  `target-*` annotations and the `leader-domain` annotation) tell the resizer how far to grow a Job, and
  the pod admission policies whether and where its followers go. Only the Job webhook writes them, when
  it admits the Job's creation: on the Job, and the target annotations also on its pod template, a record
  no client can change once the Job runs (a Job's pod template is immutable but while it is suspended and
  has never started).
  `strip_resize_keys(job)` removes whatever a client sent, from both places, before the webhook decides its
  own (a ValidatingAdmissionPolicy of the chart keeps everyone but the resizer from changing the Job's
  afterwards; the resizer never grows a Job past its pod template's record).
- The gang keys (`GANG_KEYS`: the `exclusive-placement.io/all-or-nothing` label and annotation,
  `gang-size`, `gang-queued-at`) put a Job in the resizer's all-or-nothing queue. Only the Job webhook
  writes them, derived from the owning JobSet it read (`placement.admission.gang_annotations`); a Job with
  no JobSet owner is never in a gang. `strip_gang_keys(job)` removes whatever a client sent, from the Job
  and its pod template; the same policy keeps the Job's record unchanged afterwards, for everyone.
"""

from __future__ import annotations

from collections.abc import Mapping

from placement.constants import (
    ALL_OR_NOTHING_ANNOTATION,
    ALL_OR_NOTHING_LABEL,
    GANG_QUEUED_AT_ANNOTATION,
    GANG_SIZE_ANNOTATION,
    JOB_KEY_LABEL,
    JOBSET_JOB_KEY_LABEL,
    LEADER_DOMAIN_ANNOTATION,
    PIN_FOLLOWERS_LABEL,
    RESIZE_LABEL,
    TARGET_COMPLETIONS_ANNOTATION,
    TARGET_MAX_FAILED_INDEXES_ANNOTATION,
    TARGET_PARALLELISM_ANNOTATION,
)
from placement.objects import Obj, job_key, labels_of, metadata, namespace_of, pod_template

RESIZE_LABELS = (RESIZE_LABEL, PIN_FOLLOWERS_LABEL)
RESIZE_ANNOTATIONS = (
    TARGET_COMPLETIONS_ANNOTATION,
    TARGET_PARALLELISM_ANNOTATION,
    TARGET_MAX_FAILED_INDEXES_ANNOTATION,
    LEADER_DOMAIN_ANNOTATION,
)
RESIZE_KEYS = (*RESIZE_LABELS, *RESIZE_ANNOTATIONS)
"""Every key of a Job only the Job webhook may set (at CREATE) and only the resizer may change."""

GANG_LABELS = (ALL_OR_NOTHING_LABEL,)
GANG_ANNOTATIONS = (ALL_OR_NOTHING_ANNOTATION, GANG_SIZE_ANNOTATION, GANG_QUEUED_AT_ANNOTATION)
GANG_KEYS = (*GANG_LABELS, *GANG_ANNOTATIONS)
"""Every key of a Job only the Job webhook may set (at CREATE, from the owning JobSet) and no one may
change: the record the all-or-nothing queue trusts."""


def strip_resize_keys(job: Obj) -> tuple[str, ...]:
    """Removes the resize keys from the Job's metadata and its pod template's in place; returns the ones it
    removed (those of the template marked so)."""
    return _strip(job, RESIZE_LABELS, RESIZE_ANNOTATIONS)


def strip_gang_keys(job: Obj) -> tuple[str, ...]:
    """Removes the gang keys from the Job's metadata and its pod template's in place (labels and
    annotations); returns the ones it removed (those of the template marked so)."""
    return _strip(job, GANG_LABELS, GANG_ANNOTATIONS, template_labels=True)


def _strip(
    job: Obj, labels: tuple[str, ...], annotations: tuple[str, ...], *, template_labels: bool = False
) -> tuple[str, ...]:
    removed: list[str] = []
    template = metadata(pod_template(job))
    places = [
        (metadata(job), "labels", labels, ""),
        (metadata(job), "annotations", annotations, ""),
        (template, "annotations", annotations, " (pod template)"),
    ]
    if template_labels:
        places.append((template, "labels", labels, " (pod template)"))
    for meta, field, keys, where in places:
        values = meta.get(field)
        if not isinstance(values, dict):
            continue
        for key in keys:
            if key in values:
                del values[key]
                removed.append(key + where)
    return tuple(removed)


def stripped_warning(removed: tuple[str, ...]) -> str:
    return (
        f"exclusive placement: removed {', '.join(removed)} from the Job: only this project's Job webhook "
        "sets them, when it admits the Job"
    )


def jobset_key_problem(labels: Mapping[str, str], namespace: str, job_name: str, where: str) -> str | None:
    """Why a JobSet job-key label in `labels` (of `where`) cannot be admitted, or None when it is absent or
    is the key of Job `namespace/job_name`."""
    value = labels.get(JOBSET_JOB_KEY_LABEL)
    if value is None:
        return None
    if not job_name:
        return (
            f"{where} carries the {JOBSET_JOB_KEY_LABEL} label, which cannot be checked on a Job without "
            "a name (generateName): exclusive placement derives the key from the Job's namespace and name; "
            "remove the label or name the Job"
        )
    expected = job_key(namespace, job_name)
    if value == expected:
        return None
    return (
        f"{where} carries {JOBSET_JOB_KEY_LABEL}={value!r}, but the key of Job {namespace}/{job_name} is "
        f"{expected!r} (sha1 of {namespace}/{job_name}, as JobSet computes it): exclusive placement "
        "derives a Job's key from its own namespace and name and denies a label naming another Job; remove "
        "the label (JobSet sets it on the Jobs it creates)"
    )


def jobset_key_problem_of_job(job: Obj, namespace: str) -> str | None:
    """A Job whose own labels or pod template labels carry a JobSet job-key of another Job."""
    ns = namespace or namespace_of(job)
    name = str(metadata(job).get("name") or "")
    places = (("the Job", labels_of(job)), ("the Job's pod template", labels_of(pod_template(job))))
    for where, labels in places:
        problem = jobset_key_problem(labels, ns, name, where)
        if problem is not None:
            return problem
    return None


def job_key_label_problem(labels: Mapping[str, str], namespace: str, job_name: str) -> str | None:
    """A pod whose `exclusive-placement.io/job-key` (written by the pod mutation) is not its Job's key by
    the time it is validated: something after the mutation changed it."""
    value = labels.get(JOB_KEY_LABEL)
    expected = job_key(namespace, job_name)
    if value is None or value == expected:
        return None
    return (
        f"the pod carries {JOB_KEY_LABEL}={value!r}, but the key of its Job {namespace}/{job_name} is "
        f"{expected!r}: exclusive placement's pod webhook writes the label; a later mutation changed it"
    )
