"""Pod validation: the pod spec shape (containers, scheduling gates) and the pod update rules.

Each check returns (field, message) causes; the server turns a non-empty list into a 422 `Invalid`.
"""

from __future__ import annotations

from typing import Any

Obj = dict[str, Any]
Causes = list[tuple[str, str]]

# Pod spec fields an update may change (everything else is immutable, as in the real API server).
MUTABLE_POD_SPEC_FIELDS = frozenset(
    {
        "activeDeadlineSeconds",
        "tolerations",
        "schedulingGates",
        "nodeSelector",
        "containers",
        "initContainers",
    }
)


def validate_pod_spec(spec: Any, path: str) -> Causes:
    if not isinstance(spec, dict):
        return [(path, "Required value")]
    containers = spec.get("containers")
    if not isinstance(containers, list) or not containers:
        return [(f"{path}.containers", "Required value")]
    causes: Causes = []
    seen: set[str] = set()
    for i, container in enumerate(containers):
        if not isinstance(container, dict):
            causes.append((f"{path}.containers[{i}]", "Invalid value: must be an object"))
            continue
        name = str(container.get("name") or "")
        if not name:
            causes.append((f"{path}.containers[{i}].name", "Required value"))
        elif name in seen:
            causes.append((f"{path}.containers[{i}].name", f'Duplicate value: "{name}"'))
        seen.add(name)
        if not container.get("image"):
            causes.append((f"{path}.containers[{i}].image", "Required value"))
    for i, gate in enumerate(spec.get("schedulingGates") or []):
        if not isinstance(gate, dict) or not gate.get("name"):
            causes.append((f"{path}.schedulingGates[{i}].name", "Required value"))
    return causes


def validate_pod_update(old: Obj, new: Obj) -> Causes:
    old_spec, new_spec = old.get("spec") or {}, new.get("spec") or {}
    causes: Causes = []
    changed = {k for k in set(old_spec) | set(new_spec) if old_spec.get(k) != new_spec.get(k)}
    if changed - MUTABLE_POD_SPEC_FIELDS:
        causes.append(
            (
                "spec",
                "Forbidden: pod updates may not change fields other than `spec.containers[*].image`, "
                "`spec.initContainers[*].image`, `spec.activeDeadlineSeconds`, `spec.tolerations` "
                "(only additions to existing tolerations), `spec.schedulingGates` (only deletions), "
                "`spec.nodeSelector` (only additions while gated) "
                f"(changed: {', '.join(sorted(changed - MUTABLE_POD_SPEC_FIELDS))})",
            )
        )
    for key in ("containers", "initContainers"):
        if key in changed and _strip_images(old_spec.get(key)) != _strip_images(new_spec.get(key)):
            causes.append((f"spec.{key}", "Forbidden: pod updates may only change the container image"))
    old_gates = [g.get("name") for g in old_spec.get("schedulingGates") or []]
    new_gates = [g.get("name") for g in new_spec.get("schedulingGates") or []]
    added_gates = [g for g in new_gates if g not in old_gates]
    if added_gates:
        causes.append(
            (
                "spec.schedulingGates",
                f'Forbidden: only deletion is allowed, but found new scheduling gate "{added_gates[0]}"',
            )
        )
    if "nodeSelector" in changed:
        old_sel, new_sel = old_spec.get("nodeSelector") or {}, new_spec.get("nodeSelector") or {}
        only_additions = all(new_sel.get(k) == v for k, v in old_sel.items())
        if not old_gates or not only_additions:
            causes.append(
                (
                    "spec.nodeSelector",
                    "Invalid value: only additions to spec.nodeSelector are allowed, and only while the pod "
                    "has scheduling gates",
                )
            )
    if "tolerations" in changed:
        new_tolerations = new_spec.get("tolerations") or []
        if not all(t in new_tolerations for t in old_spec.get("tolerations") or []):
            causes.append(
                (
                    "spec.tolerations",
                    "Forbidden: existing toleration can not be modified except its tolerationSeconds",
                )
            )
    return causes


def _strip_images(containers: Any) -> Any:
    if not isinstance(containers, list):
        return containers
    return [{k: v for k, v in c.items() if k != "image"} if isinstance(c, dict) else c for c in containers]
