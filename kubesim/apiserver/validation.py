"""The validation that matters for fidelity: names here; pods in `pod_validation`, Jobs in `job_validation`,
webhook configurations in `cel`.

Each check returns (field, message) causes; the server turns a non-empty list into a 422 `Invalid`.
"""

from __future__ import annotations

import re
from typing import Any

from kubesim.apiserver.cel import validate_webhook_configuration, validate_webhook_configuration_update
from kubesim.apiserver.job_validation import validate_job, validate_job_update
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


CREATE_VALIDATORS = {
    "pods": lambda o: validate_pod_spec(o.get("spec"), "spec"),
    "jobs": validate_job,
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
    "mutatingwebhookconfigurations": validate_webhook_configuration_update,
    "validatingwebhookconfigurations": validate_webhook_configuration_update,
}


def validate_update(resource: str, old: Obj, new: Obj) -> Causes:
    validator = UPDATE_VALIDATORS.get(resource)
    return validator(old, new) if validator is not None else []
