"""The validation that matters for fidelity: names here; pods in `pod_validation`, Jobs in `job_validation`,
webhook configurations in `cel`.

Each check returns (field, message) causes; the server turns a non-empty list into a 422 `Invalid`.
"""

from __future__ import annotations

import re
from typing import Any

from kubesim.apiserver.cel import validate_webhook_configuration, validate_webhook_configuration_update
from kubesim.apiserver.job_validation import validate_job, validate_job_template_spec, validate_job_update
from kubesim.apiserver.pod_validation import validate_pod_spec, validate_pod_update

Obj = dict[str, Any]
Causes = list[tuple[str, str]]

_DNS_SUBDOMAIN = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_DNS_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def validate_name(name: str, *, label: bool = False) -> Causes:
    pattern, limit = (_DNS_LABEL, 63) if label else (_DNS_SUBDOMAIN, 253)
    if not name:
        return [("metadata.name", "Required value: name or generateName is required")]
    if len(name) > limit:
        return [("metadata.name", f'Invalid value: "{name}": must be no more than {limit} characters')]
    if not pattern.match(name):
        return [
            (
                "metadata.name",
                f'Invalid value: "{name}": a lowercase RFC 1123 subdomain must consist of lower case '
                "alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character",
            )
        ]
    return []


# CronJob names leave room for the 11-character suffix of the Jobs they create (ValidateCronJobCreate).
CRON_JOB_NAME_MAX_LENGTH = 52
CONCURRENCY_POLICIES = ("Allow", "Forbid", "Replace")


def validate_cron_job(cron_job: Obj) -> Causes:
    """The basics of k/k pkg/apis/batch/validation/validation.go ValidateCronJobCreate: name length,
    schedule present, concurrencyPolicy, and the Job template as a Job's (the cron syntax is not parsed)."""
    causes: Causes = []
    name = str((cron_job.get("metadata") or {}).get("name") or "")
    if len(name) > CRON_JOB_NAME_MAX_LENGTH:
        causes.append(
            (
                "metadata.name",
                f'Invalid value: "{name}": must be no more than {CRON_JOB_NAME_MAX_LENGTH} characters',
            )
        )
    spec = cron_job.get("spec") or {}
    if not spec.get("schedule"):
        causes.append(("spec.schedule", "Required value"))
    policy = spec.get("concurrencyPolicy")
    if policy not in CONCURRENCY_POLICIES:
        supported = ", ".join(f'"{p}"' for p in CONCURRENCY_POLICIES)
        causes.append(
            ("spec.concurrencyPolicy", f'Unsupported value: "{policy}": supported values: {supported}')
        )
    job_spec = (spec.get("jobTemplate") or {}).get("spec") or {}
    causes += [
        (f"spec.jobTemplate.{path}", message) for path, message in validate_job_template_spec(job_spec)
    ]
    return causes


# k/k pkg/apis/scheduling/types.go and pkg/apis/scheduling/v1/helpers.go (the system classes).
HIGHEST_USER_DEFINABLE_PRIORITY = 1_000_000_000
SYSTEM_PRIORITY_CLASS_PREFIX = "system-"
SYSTEM_PRIORITY_CLASSES = {"system-node-critical": 2_000_001_000, "system-cluster-critical": 2_000_000_000}
PREEMPTION_POLICIES = ("PreemptLowerPriority", "Never")


def _system_priority_class_problem(name: str, value: Any, global_default: bool) -> str | None:
    """IsKnownSystemPriorityClass: why a `system-` class is not one of the system classes, or None."""
    if name not in SYSTEM_PRIORITY_CLASSES:
        return f"{name} is not a known system priority class"
    if value != SYSTEM_PRIORITY_CLASSES[name]:
        return f"value of {name} PriorityClass must be {SYSTEM_PRIORITY_CLASSES[name]}"
    if global_default:
        return f"globalDefault of {name} PriorityClass must be false"
    return None


def validate_priority_class(priority_class: Obj) -> Causes:
    """k/k pkg/apis/scheduling/validation/validation.go ValidatePriorityClass."""
    causes: Causes = []
    name = str((priority_class.get("metadata") or {}).get("name") or "")
    value = priority_class.get("value", 0)
    if not isinstance(value, int) or isinstance(value, bool):
        return [("value", f"Invalid value: {value!r}: must be an integer")]
    if name.startswith(SYSTEM_PRIORITY_CLASS_PREFIX):
        problem = _system_priority_class_problem(name, value, bool(priority_class.get("globalDefault")))
        if problem is not None:
            causes.append(
                (
                    "metadata.name",
                    f"Forbidden: priority class names with '{SYSTEM_PRIORITY_CLASS_PREFIX}' prefix are "
                    f"reserved for system use only. error: {problem}",
                )
            )
    elif value > HIGHEST_USER_DEFINABLE_PRIORITY:
        causes.append(
            (
                "value",
                "Forbidden: maximum allowed value of a user defined priority is "
                f"{HIGHEST_USER_DEFINABLE_PRIORITY}",
            )
        )
    policy = priority_class.get("preemptionPolicy")
    if policy == "":
        causes.append(("preemptionPolicy", "Required value"))
    elif policy is not None and policy not in PREEMPTION_POLICIES:
        supported = ", ".join(f'"{p}"' for p in PREEMPTION_POLICIES)
        causes.append(("preemptionPolicy", f'Unsupported value: "{policy}": supported values: {supported}'))
    return causes


def validate_priority_class_update(old: Obj, new: Obj) -> Causes:
    """ValidatePriorityClassUpdate: value and preemptionPolicy are immutable."""
    causes: Causes = []
    if new.get("value", 0) != old.get("value", 0):
        causes.append(("value", "Forbidden: may not be changed in an update."))
    # A PUT that leaves preemptionPolicy out gets the default again, as upstream's decoding would.
    if (new.get("preemptionPolicy") or PREEMPTION_POLICIES[0]) != old.get("preemptionPolicy"):
        causes.append(
            ("preemptionPolicy", f'Invalid value: "{new.get("preemptionPolicy")}": field is immutable')
        )
    return causes


CREATE_VALIDATORS = {
    "pods": lambda o: validate_pod_spec(o.get("spec"), "spec"),
    "jobs": validate_job,
    "cronjobs": validate_cron_job,
    "priorityclasses": validate_priority_class,
    "mutatingwebhookconfigurations": validate_webhook_configuration,
    "validatingwebhookconfigurations": validate_webhook_configuration,
}


def validate_create(resource: str, obj: Obj) -> Causes:
    meta = obj.get("metadata") or {}
    causes = validate_name(str(meta.get("name") or ""), label=resource == "namespaces")
    validator = CREATE_VALIDATORS.get(resource)
    if validator is not None:
        causes += validator(obj)
    return causes


UPDATE_VALIDATORS = {
    "pods": validate_pod_update,
    "jobs": validate_job_update,
    "cronjobs": lambda old, new: validate_cron_job(new),
    "priorityclasses": validate_priority_class_update,
    "mutatingwebhookconfigurations": validate_webhook_configuration_update,
    "validatingwebhookconfigurations": validate_webhook_configuration_update,
}


def validate_update(resource: str, old: Obj, new: Obj) -> Causes:
    validator = UPDATE_VALIDATORS.get(resource)
    return validator(old, new) if validator is not None else []
