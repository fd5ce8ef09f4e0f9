"""Small readers of Kubernetes objects shared by the controllers (plain dicts in API JSON shape)."""

from __future__ import annotations

from typing import Any

from kubesim.clock import Clock

Obj = dict[str, Any]


def object_key(obj: Obj) -> str:
    """`namespace/name`, or `name` for cluster-scoped objects (client-go's MetaNamespaceKeyFunc)."""
    meta = obj.get("metadata") or {}
    namespace = meta.get("namespace")
    return f"{namespace}/{meta['name']}" if namespace else str(meta["name"])


def split_key(key: str) -> tuple[str | None, str]:
    namespace, _, name = key.rpartition("/")
    return (namespace or None), name


def labels_of(obj: Obj) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("labels") or {}


def annotations_of(obj: Obj) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def uid_of(obj: Obj) -> str:
    return str((obj.get("metadata") or {}).get("uid") or "")


def controller_uid(obj: Obj) -> str | None:
    """The uid of the owner reference marked controller=true, if any."""
    for ref in (obj.get("metadata") or {}).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("uid"))
    return None


def owner_reference(owner: Obj) -> dict[str, Any]:
    meta = owner["metadata"]
    return {
        "apiVersion": owner["apiVersion"],
        "kind": owner["kind"],
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


def is_deleting(obj: Obj) -> bool:
    return bool((obj.get("metadata") or {}).get("deletionTimestamp"))


def pod_phase(pod: Obj) -> str:
    return str((pod.get("status") or {}).get("phase") or "Pending")


def is_terminal(pod: Obj) -> bool:
    return pod_phase(pod) in ("Succeeded", "Failed")


def condition(obj: Obj, kind: str) -> dict[str, Any] | None:
    for item in (obj.get("status") or {}).get("conditions") or []:
        if item.get("type") == kind:
            return dict(item)
    return None


def condition_true(obj: Obj, kind: str) -> bool:
    found = condition(obj, kind)
    return found is not None and found.get("status") == "True"


def with_condition(conditions: list[dict[str, Any]], new: dict[str, Any]) -> list[dict[str, Any]]:
    """`conditions` with `new` replacing its type; lastTransitionTime kept when the status is unchanged."""
    result: list[dict[str, Any]] = []
    replaced = False
    for item in conditions:
        if item.get("type") == new["type"]:
            merged = dict(new)
            if item.get("status") == new.get("status") and item.get("lastTransitionTime"):
                merged["lastTransitionTime"] = item["lastTransitionTime"]
            result.append(merged)
            replaced = True
        else:
            result.append(item)
    if not replaced:
        result.append(new)
    return result


def new_condition(kind: str, status: str, reason: str = "", message: str = "", probe: bool = False) -> Obj:
    """A condition stamped now; `probe` adds lastProbeTime (pod and job conditions carry it)."""
    now = Clock.wall_time()
    item: Obj = {"type": kind, "status": status, "lastTransitionTime": now}
    if probe:
        item["lastProbeTime"] = now
    if reason:
        item["reason"] = reason
    if message:
        item["message"] = message
    return item


def resource_version(obj: Obj) -> int:
    value = (obj.get("metadata") or {}).get("resourceVersion") or "0"
    return int(value) if str(value).isdigit() else 0
