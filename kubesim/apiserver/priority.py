"""The Priority admission plugin and the system PriorityClasses (kube-apiserver's built-in admission).

kubernetes/kubernetes `plugin/pkg/admission/priority/admission.go`:
- `admit_pod` (Plugin.admitPod, mutating, before every mutating webhook): on CREATE, a pod naming a
  `priorityClassName` gets that class's `value` as `spec.priority` and its `preemptionPolicy`; an unknown
  class is 403 Forbidden (`no PriorityClass with name X was found`). A pod naming none gets the global
  default class (the lowest value when several are marked, as `getDefaultPriorityClass`), its name included,
  else priority 0 (`DefaultPriorityWhenNoDefaultClassExists`) and `PreemptLowerPriority`. A client-set
  `priority` or `preemptionPolicy` that differs from the computed one is 403 Forbidden. On UPDATE, values
  left out are kept from the stored pod (pod validation forbids changing them).
- `validate_priority_class` (Plugin.validatePriorityClass): a second `globalDefault` class is 403 Forbidden.

System classes (`pkg/registry/scheduling/rest/storage_scheduling.go`, AddSystemPriorityClasses, a post-start
hook): `system-node-critical` and `system-cluster-critical` exist from the start, as stored objects.
Not modelled: re-running the plugin when a mutating webhook changed the pod (admission reinvocation of
built-in plugins), so a webhook that rewrites `priorityClassName` is not refused here.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from kubesim.apiserver.validation import PREEMPTION_POLICIES, SYSTEM_PRIORITY_CLASSES
from kubesim.errors import ApiError, qualified

Obj = dict[str, Any]

DEFAULT_PRIORITY_WHEN_NO_DEFAULT_CLASS_EXISTS = 0
PREEMPT_LOWER_PRIORITY = PREEMPTION_POLICIES[0]
SCHEDULING_GROUP = "scheduling.k8s.io"
SYSTEM_CLASS_DESCRIPTIONS = {
    "system-node-critical": "Used for system critical pods that must not be moved from their current node.",
    "system-cluster-critical": (
        "Used for system critical pods that must run in the cluster, but can be moved to another node if "
        "necessary."
    ),
}


def system_priority_classes() -> list[Obj]:
    """The classes the API server creates at start (scheduling.SystemPriorityClasses)."""
    return [
        {
            "apiVersion": "scheduling.k8s.io/v1",
            "kind": "PriorityClass",
            "metadata": {"name": name},
            "value": value,
            "globalDefault": False,
            "description": SYSTEM_CLASS_DESCRIPTIONS[name],
            "preemptionPolicy": PREEMPT_LOWER_PRIORITY,
        }
        for name, value in SYSTEM_PRIORITY_CLASSES.items()
    ]


def forbidden(resource: str, group: str, name: str, message: str) -> ApiError:
    """admission.NewForbidden: `<resource> "<name>" is forbidden: <message>` (name: generateName if unset)."""
    details: Obj = {"name": name, "kind": resource}
    if group:
        details["group"] = group
    return ApiError(
        403, "Forbidden", f'{qualified(resource, group)} "{name}" is forbidden: {message}', details
    )


def default_priority_class(classes: Iterable[Obj]) -> Obj | None:
    """getDefaultPriorityClass: among the classes marked globalDefault, the one with the lowest value."""
    marked = [c for c in classes if c.get("globalDefault")]
    return min(marked, key=lambda c: int(c.get("value") or 0)) if marked else None


def _pod_name(pod: Obj) -> str:
    meta = pod.get("metadata") or {}
    return str(meta.get("name") or meta.get("generateName") or "Unknown")


def admit_pod(operation: str, pod: Obj, old: Obj | None, classes: dict[str, Obj]) -> None:
    """Plugin.admitPod on `pod` in place; `classes` are the stored PriorityClasses by name."""
    spec = pod.setdefault("spec", {})
    if operation == "UPDATE":
        old_spec = (old or {}).get("spec") or {}
        for key in ("priority", "preemptionPolicy"):
            if spec.get(key) is None and old_spec.get(key) is not None:
                spec[key] = old_spec[key]
        return
    if operation != "CREATE":
        return
    class_name = str(spec.get("priorityClassName") or "")
    if class_name:
        priority_class = classes.get(class_name)
        if priority_class is None:
            raise forbidden("pods", "", _pod_name(pod), f"no PriorityClass with name {class_name} was found")
    else:
        priority_class = default_priority_class(classes.values())
        if priority_class is not None:
            spec["priorityClassName"] = priority_class["metadata"]["name"]
    if priority_class is None:
        priority, policy = DEFAULT_PRIORITY_WHEN_NO_DEFAULT_CLASS_EXISTS, PREEMPT_LOWER_PRIORITY
    else:
        priority = int(priority_class.get("value") or 0)
        policy = str(priority_class.get("preemptionPolicy") or PREEMPT_LOWER_PRIORITY)
    given = spec.get("priority")
    if given is not None and given != priority:
        raise forbidden(
            "pods",
            "",
            _pod_name(pod),
            f"the integer value of priority ({given}) must not be provided in pod spec; priority admission "
            f"controller computed {priority} from the given PriorityClass name",
        )
    given_policy = spec.get("preemptionPolicy")
    if given_policy is not None and given_policy != policy:
        raise forbidden(
            "pods",
            "",
            _pod_name(pod),
            f"the string value of PreemptionPolicy ({given_policy}) must not be provided in pod spec; "
            f"priority admission controller computed {policy} from the given PriorityClass name",
        )
    spec["priority"] = priority
    spec["preemptionPolicy"] = policy


def validate_priority_class(operation: str, priority_class: Obj, classes: Iterable[Obj]) -> None:
    """Plugin.validatePriorityClass: only one class may be the global default."""
    if operation not in ("CREATE", "UPDATE") or not priority_class.get("globalDefault"):
        return
    name = str((priority_class.get("metadata") or {}).get("name") or "")
    current = default_priority_class(classes)
    if current is None:
        return
    current_name = str(current["metadata"]["name"])
    if operation == "CREATE" or current_name != name:
        raise forbidden(
            "priorityclasses",
            SCHEDULING_GROUP,
            name,
            f"PriorityClass {current_name} is already marked as default. Only one default can exist",
        )
