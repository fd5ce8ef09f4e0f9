"""Job validation as kube-apiserver 1.31+ runs it (k/k pkg/apis/batch/validation/validation.go, called by the
Job strategy in pkg/registry/batch/job/strategy.go).

Create runs `validate_job` (ValidateJob); update runs `validate_job` on the new object and then
`validate_job_spec_update` (ValidateJobUpdate), exactly as `jobStrategy.ValidateUpdate` appends both lists, so
a spec error is reported twice among an update's causes (the message lists it once), as upstream does.

The rules where this project's elastic resize meets validation: an Indexed Job's completions may change only
to the same value as parallelism; maxFailedIndexes, successPolicy's succeededIndexes and succeededCount must
fit within completions; and the pod hostname `<job>-<completions - 1>` must stay a DNS label — all checked
again on every resize. Messages, field paths and value formats are upstream's (`field_errors`).

Not checked: podFailurePolicy rules, managedBy, ttlSecondsAfterFinished beyond its sign, label selector syntax
beyond the operators.
"""

from __future__ import annotations

import re
from typing import Any

from kubesim.apiserver import field_errors as fe
from kubesim.apiserver.pod_validation import validate_pod_spec
from kubesim.apiserver.selectors import selector_from_dict
from kubesim.errors import ApiError
from placement.constants import (
    CONTROLLER_UID_LABEL,
    JOB_NAME_LABEL,
    LEGACY_CONTROLLER_UID_LABEL,
    LEGACY_JOB_NAME_LABEL,
)

Obj = dict[str, Any]
Causes = list[tuple[str, str]]

MAX_PARALLELISM_FOR_INDEXED_JOB = 100_000
MAX_FAILED_INDEXES_FOR_INDEXED_JOB = 100_000
COMPLETIONS_SOFT_LIMIT = 100_000
PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS = 10_000
MAX_FAILED_INDEXES_LIMIT_FOR_HIGH_COMPLETIONS = 10_000
MAX_SUCCEEDED_INDEXES_LENGTH = 64 * 1024
MAX_SUCCESS_POLICY_RULES = 20
INDEXED = "Indexed"
NON_INDEXED = "NonIndexed"
POD_REPLACEMENT_POLICIES = ("Failed", "TerminatingOrFailed")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
_GO_INT = re.compile(r"^[+-]?[0-9]+$")
_NON_NEGATIVE_FIELDS = (
    "parallelism",
    "completions",
    "activeDeadlineSeconds",
    "backoffLimit",
    "ttlSecondsAfterFinished",
    "backoffLimitPerIndex",
    "maxFailedIndexes",
)
_IMMUTABLE_SPEC_FIELDS = (
    "completionMode",
    "podFailurePolicy",
    "backoffLimitPerIndex",
    "managedBy",
    "successPolicy",
)
_MUTABLE_SCHEDULING_DIRECTIVES = ("nodeSelector", "tolerations", "schedulingGates")


# --- create: ValidateJob ------------------------------------------------------------------------------


def validate_job(job: Obj) -> Causes:
    """ValidateJob (metadata names are checked by the caller)."""
    causes = _generated_selector(job)
    causes += validate_job_spec(job.get("spec") or {})
    causes += _indexed_hostname(job)
    return causes


def _int_fields(spec: Obj) -> tuple[dict[str, int], Causes]:
    """The integer fields that are set; a value that is not an integer is a cause (upstream's decoder would
    answer 400 for it)."""
    values: dict[str, int] = {}
    causes: Causes = []
    for name in _NON_NEGATIVE_FIELDS:
        value = spec.get(name)
        if value is None:
            continue
        if isinstance(value, bool) or not isinstance(value, int):
            causes.append(fe.invalid(f"spec.{name}", value, "must be an integer"))
            continue
        values[name] = value
    return values, causes


def validate_job_spec(spec: Obj) -> Causes:
    """ValidateJobSpec: validateJobSpec, then the selector rules."""
    causes = _job_spec(spec)
    selector = spec.get("selector")
    if selector is None:
        causes.append(fe.required("spec.selector"))
        return causes
    try:
        matcher = selector_from_dict(selector)
    except ApiError as error:
        causes.append(fe.invalid("spec.selector", selector, error.message))
        return causes
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    if not matcher.matches(labels):
        causes.append(
            fe.invalid("spec.template.metadata.labels", labels, "`selector` does not match template `labels`")
        )
    return causes


def validate_job_template_spec(spec: Obj) -> Causes:
    """ValidateJobTemplateSpec (a CronJob's jobTemplate): validateJobSpec without the selector rules, since
    the selector is generated when the Job is created."""
    return _job_spec(spec)


def _job_spec(spec: Obj) -> Causes:
    """validateJobSpec."""
    ints, causes = _int_fields(spec)
    for name, value in ints.items():
        causes += fe.non_negative(f"spec.{name}", value)
    if "maxFailedIndexes" in ints and spec.get("backoffLimitPerIndex") is None:
        causes.append(fe.required("spec.backoffLimitPerIndex", "when maxFailedIndexes is specified"))
    mode = spec.get("completionMode")
    if mode is not None:
        if mode not in (NON_INDEXED, INDEXED):
            causes.append(fe.not_supported("spec.completionMode", mode, (NON_INDEXED, INDEXED)))
        if mode == INDEXED:
            causes += _indexed_limits(spec, ints)
    if mode is None or mode == NON_INDEXED:
        for name in ("backoffLimitPerIndex", "maxFailedIndexes"):
            if name in ints:
                causes.append(fe.invalid(f"spec.{name}", ints[name], "requires indexed completion mode"))
    success_policy = spec.get("successPolicy")
    if success_policy is not None:
        if mode != INDEXED:
            causes.append(
                fe.invalid("spec.successPolicy", success_policy, "requires indexed completion mode")
            )
        else:
            causes += _success_policy(success_policy, ints.get("completions"))
    causes += _pod_replacement_policy(spec)
    template = spec.get("template") or {}
    causes += validate_pod_spec(template.get("spec"), "spec.template.spec")
    causes += _restart_policy(spec, template.get("spec") or {})
    return causes


def _indexed_limits(spec: Obj, ints: dict[str, int]) -> Causes:
    causes: Causes = []
    completions, parallelism = ints.get("completions"), ints.get("parallelism")
    max_failed = ints.get("maxFailedIndexes")
    if spec.get("completions") is None:
        causes.append(fe.required("spec.completions", f"when completion mode is {INDEXED}"))
    if parallelism is not None and parallelism > MAX_PARALLELISM_FOR_INDEXED_JOB:
        causes.append(
            fe.invalid(
                "spec.parallelism",
                parallelism,
                f"must be less than or equal to {MAX_PARALLELISM_FOR_INDEXED_JOB} when completion mode is "
                f"{INDEXED}",
            )
        )
    if completions is not None and max_failed is not None and max_failed > completions:
        causes.append(
            fe.invalid("spec.maxFailedIndexes", max_failed, "must be less than or equal to completions")
        )
    if max_failed is not None and max_failed > MAX_FAILED_INDEXES_FOR_INDEXED_JOB:
        causes.append(
            fe.invalid(
                "spec.maxFailedIndexes",
                max_failed,
                f"must be less than or equal to {MAX_FAILED_INDEXES_FOR_INDEXED_JOB}",
            )
        )
    if completions is not None and completions > COMPLETIONS_SOFT_LIMIT and "backoffLimitPerIndex" in ints:
        causes += _high_completions_limits(parallelism, max_failed)
    return causes


def _high_completions_limits(parallelism: int | None, max_failed: int | None) -> Causes:
    causes: Causes = []
    suffix = f"when completions are above {COMPLETIONS_SOFT_LIMIT} and used with backoff limit per index"
    if max_failed is None:
        causes.append(
            fe.required(
                "spec.maxFailedIndexes",
                f"must be specified when completions is above {COMPLETIONS_SOFT_LIMIT}",
            )
        )
    if parallelism is not None and parallelism > PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS:
        causes.append(
            fe.invalid(
                "spec.parallelism",
                parallelism,
                f"must be less than or equal to {PARALLELISM_LIMIT_FOR_HIGH_COMPLETIONS} {suffix}",
            )
        )
    if max_failed is not None and max_failed > MAX_FAILED_INDEXES_LIMIT_FOR_HIGH_COMPLETIONS:
        causes.append(
            fe.invalid(
                "spec.maxFailedIndexes",
                max_failed,
                f"must be less than or equal to {MAX_FAILED_INDEXES_LIMIT_FOR_HIGH_COMPLETIONS} {suffix}",
            )
        )
    return causes


def _success_policy(policy: Any, completions: int | None) -> Causes:
    """validateSuccessPolicy."""
    path = "spec.successPolicy.rules"
    rules = policy.get("rules") if isinstance(policy, dict) else None
    if not isinstance(rules, list) or not rules:
        return [fe.required(path, "at least one rules must be specified when the successPolicy is specified")]
    causes: Causes = []
    if len(rules) > MAX_SUCCESS_POLICY_RULES:
        causes.append(fe.too_many(path, len(rules), MAX_SUCCESS_POLICY_RULES))
    for i, rule in enumerate(rules):
        causes += _success_policy_rule(rule if isinstance(rule, dict) else {}, completions, f"{path}[{i}]")
    return causes


def _success_policy_rule(rule: Obj, completions: int | None, path: str) -> Causes:
    """validateSuccessPolicyRule; without completions (reported as required) only the shape is checked."""
    indexes, count = rule.get("succeededIndexes"), rule.get("succeededCount")
    if indexes is None and count is None:
        return [fe.required(path, "at least one of succeededCount or succeededIndexes must be specified")]
    causes: Causes = []
    total = 0
    if indexes is not None:
        indexes_path = f"{path}.succeededIndexes"
        if len(str(indexes)) > MAX_SUCCEEDED_INDEXES_LENGTH:
            causes.append(fe.too_long(indexes_path, MAX_SUCCEEDED_INDEXES_LENGTH))
        if completions is not None:
            total, error = indexes_total(str(indexes), completions)
            if error:
                causes.append(fe.invalid(indexes_path, indexes, f"error parsing succeededIndexes: {error}"))
    if count is not None:
        count_path = f"{path}.succeededCount"
        if isinstance(count, bool) or not isinstance(count, int):
            return [*causes, fe.invalid(count_path, count, "must be an integer")]
        causes += fe.non_negative(count_path, count)
        if completions is not None and count > completions:
            causes.append(
                fe.invalid(
                    count_path,
                    count,
                    f"must be less than or equal to {completions} (the number of specified completions)",
                )
            )
        if completions is not None and indexes is not None and count > total:
            causes.append(
                fe.invalid(
                    count_path,
                    count,
                    f"must be less than or equal to {total} (the number of indexes in the specified "
                    "succeededIndexes field)",
                )
            )
    return causes


def indexes_total(text: str, completions: int) -> tuple[int, str]:
    """validateIndexesFormat: (number of indexes, "") or (0, the parse error), e.g. `too large index: "5"`."""
    if not text:
        return 0, ""
    last: int | None = None
    total = 0
    for interval in text.split(","):
        low, high, error = _index_interval(interval, completions)
        if error:
            return 0, error
        if last is not None and last >= low:
            return 0, f"non-increasing order, previous: {last}, current: {low}"
        total += high - low + 1
        last = high
    return total, ""


def _index_interval(text: str, completions: int) -> tuple[int, int, str]:
    """parseIndexInterval."""
    limits = text.split("-")
    if len(limits) > 2:
        return (
            0,
            0,
            f'the fragment "{text}" violates the requirement that an index interval can have at most two '
            "parts separated by '-'",
        )
    bounds: list[int] = []
    for limit in limits:
        if not _GO_INT.match(limit):
            return 0, 0, f'cannot convert string to integer for index: "{limit}"'
        if int(limit) >= completions:
            return 0, 0, f'too large index: "{limit}"'
        bounds.append(int(limit))
    if len(bounds) == 2 and bounds[0] >= bounds[1]:
        return 0, 0, f"non-increasing order, previous: {bounds[0]}, current: {bounds[1]}"
    return bounds[0], bounds[-1], ""


def _pod_replacement_policy(spec: Obj) -> Causes:
    """validatePodReplacementPolicy."""
    policy = spec.get("podReplacementPolicy")
    if policy is None:
        return []
    if spec.get("podFailurePolicy") is not None:
        return (
            [] if policy == "Failed" else [fe.not_supported("spec.podReplacementPolicy", policy, ("Failed",))]
        )
    if policy not in POD_REPLACEMENT_POLICIES:
        return [fe.not_supported("spec.podReplacementPolicy", policy, POD_REPLACEMENT_POLICIES)]
    return []


def _restart_policy(spec: Obj, pod_spec: Obj) -> Causes:
    path = "spec.template.spec.restartPolicy"
    restart = pod_spec.get("restartPolicy")
    if restart in (None, "", "Always"):
        return [fe.required(path, 'valid values: "OnFailure", "Never"')]
    if restart not in ("OnFailure", "Never"):
        return [fe.not_supported(path, restart, ("OnFailure", "Never"))]
    if spec.get("podFailurePolicy") is not None and restart != "Never":
        return [fe.invalid(path, restart, 'only "Never" is supported when podFailurePolicy is specified')]
    return []


def _generated_selector(job: Obj) -> Causes:
    """validateGeneratedSelector (with RequirePrefixedLabels, as for every Job created on 1.27+)."""
    meta = job.get("metadata") or {}
    spec = job.get("spec") or {}
    if spec.get("manualSelector") or spec.get("selector") is None:
        return []
    uid, name = str(meta.get("uid") or ""), str(meta.get("name") or "")
    causes: Causes = [] if uid else [fe.required("metadata.uid")]
    labels = ((spec.get("template") or {}).get("metadata") or {}).get("labels") or {}
    expected = {
        LEGACY_CONTROLLER_UID_LABEL: uid,
        LEGACY_JOB_NAME_LABEL: name,
        CONTROLLER_UID_LABEL: uid,
        JOB_NAME_LABEL: name,
    }
    for key, value in expected.items():
        path = f"spec.template.metadata.labels[{key}]"
        if key not in labels:
            causes.append(fe.required(path))
        elif labels[key] != value:
            causes.append(fe.invalid(path, labels[key], f"must be '{value}'"))
    try:
        generated = selector_from_dict(spec["selector"]).matches(expected)
    except ApiError:
        generated = False
    if not generated:
        causes.append(fe.invalid("spec.selector", spec["selector"], "`selector` not auto-generated"))
    return causes


def _indexed_hostname(job: Obj) -> Causes:
    """ValidateJob: the last index's pod hostname `<name>-<completions - 1>` must be a DNS-1123 label."""
    spec = job.get("spec") or {}
    completions = spec.get("completions")
    if spec.get("completionMode") != INDEXED or not isinstance(completions, int) or completions <= 0:
        return []
    name = str((job.get("metadata") or {}).get("name") or "")
    hostname = f"{name}-{completions - 1}"
    if len(hostname) <= 63 and _DNS_LABEL.match(hostname):
        return []
    return [
        fe.invalid("metadata.name", name, f"will not able to create pod with invalid DNS label: {hostname}")
    ]


# --- update: ValidateJobUpdate ------------------------------------------------------------------------


def validate_job_update(old: Obj, new: Obj) -> Causes:
    """jobStrategy.ValidateUpdate: ValidateJob(new) followed by ValidateJobUpdate(new, old)."""
    return validate_job(new) + validate_job_spec_update(old, new)


def validate_job_spec_update(old: Obj, new: Obj) -> Causes:
    """ValidateJobSpecUpdate."""
    old_spec, spec = old.get("spec") or {}, new.get("spec") or {}
    causes = validate_job_spec(spec)
    causes += _completions_update(old_spec, spec)
    causes += fe.immutable("spec.selector", spec.get("selector"), old_spec.get("selector"))
    causes += _template_update(old, new)
    for name in _IMMUTABLE_SPEC_FIELDS:
        causes += fe.immutable(f"spec.{name}", spec.get(name), old_spec.get(name))
    return causes


def _completions_update(old_spec: Obj, spec: Obj) -> Causes:
    """validateCompletions with AllowElasticIndexedJobs (GA since 1.31): an Indexed Job's completions may
    change only to the value parallelism gets in the same update; a NonIndexed Job's never."""
    completions, old_completions = spec.get("completions"), old_spec.get("completions")
    if spec.get("completionMode") != INDEXED:
        return fe.immutable("spec.completions", completions, old_completions)
    if completions == old_completions or completions is None:
        return []
    if completions != spec.get("parallelism"):
        return [
            fe.invalid(
                "spec.completions", completions, "can only be modified in tandem with spec.parallelism"
            )
        ]
    return []


def _template_update(old: Obj, new: Obj) -> Causes:
    """validatePodTemplateUpdate: immutable, except the scheduling directives (node affinity, nodeSelector,
    tolerations, scheduling gates, labels, annotations) of a Job that is suspended and never started."""
    template = (new.get("spec") or {}).get("template")
    old_template = (old.get("spec") or {}).get("template")
    suspended = bool((old.get("spec") or {}).get("suspend"))
    if suspended and not (old.get("status") or {}).get("startTime"):
        old_template = _with_scheduling_directives_of(old_template or {}, template or {})
    return fe.immutable("spec.template", template, old_template)


def _with_scheduling_directives_of(old_template: Obj, template: Obj) -> Obj:
    """`old_template` carrying `template`'s mutable scheduling directives: only other changes differ."""
    merged = {**old_template}
    old_meta, meta = dict(old_template.get("metadata") or {}), template.get("metadata") or {}
    for key in ("labels", "annotations"):
        _copy_key(old_meta, meta, key)
    merged["metadata"] = old_meta
    old_pod, pod = dict(old_template.get("spec") or {}), template.get("spec") or {}
    for key in _MUTABLE_SCHEDULING_DIRECTIVES:
        _copy_key(old_pod, pod, key)
    old_pod["affinity"] = _with_node_affinity_of(old_pod.get("affinity"), pod.get("affinity"))
    if old_pod["affinity"] is None:
        del old_pod["affinity"]
    merged["spec"] = old_pod
    return merged


def _with_node_affinity_of(old: Obj | None, new: Obj | None) -> Obj | None:
    if new is None:
        rest = {k: v for k, v in (old or {}).items() if k != "nodeAffinity"}
        return rest or None
    merged = {**(old or {})}
    _copy_key(merged, new, "nodeAffinity")
    return merged


def _copy_key(target: Obj, source: Obj, key: str) -> None:
    if key in source:
        target[key] = source[key]
    else:
        target.pop(key, None)
