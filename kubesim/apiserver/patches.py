"""JSON merge patch (RFC 7386), strategic merge patch (the subset kubesim needs) and JSON patch (RFC 6902).

Strategic merge: lists named in `MERGE_KEYS` merge element-wise by that key (containers by name, ...);
`$patch: delete|replace`, `$deleteFromPrimitiveList/<field>` and `$retainKeys` are honoured;
`$setElementOrder/<field>` (sent by client-side `kubectl apply`) only orders, so it is dropped.
Other lists are replaced, except the primitive sets in `MERGED_PRIMITIVE_LISTS` (finalizers).
"""

from __future__ import annotations

import copy
from typing import Any, TypeVar, cast

import jsonpatch

from kubesim.errors import ApiError, bad_request

_T = TypeVar("_T")

MERGE_KEYS: dict[str, str] = {
    "containers": "name",
    "initContainers": "name",
    "ephemeralContainers": "name",
    "volumes": "name",
    "env": "name",
    "ports": "containerPort",
    "volumeMounts": "mountPath",
    "volumeDevices": "devicePath",
    "schedulingGates": "name",
    "imagePullSecrets": "name",
    "conditions": "type",
    "ownerReferences": "uid",
    "hostAliases": "ip",
    "resourceClaims": "name",
    "readinessGates": "conditionType",
    "replicatedJobs": "name",
    "addresses": "type",
    "taints": "key",
}
MERGED_PRIMITIVE_LISTS = frozenset({"finalizers"})


def _copy(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _copy(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_copy(v) for v in value]
    return value


def deep_copy(value: _T) -> _T:
    """A fast deep copy of JSON data (several times quicker than copy.deepcopy)."""
    return cast(_T, _copy(value))


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: maps merge recursively, null deletes, everything else replaces."""
    if not isinstance(patch, dict):
        return deep_copy(patch)
    result = deep_copy(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return deep_copy(patch)
    if patch.get("$patch") == "replace":
        return {k: deep_copy(v) for k, v in patch.items() if k != "$patch"}
    if patch.get("$patch") == "delete":
        return None
    result: dict[str, Any] = deep_copy(target) if isinstance(target, dict) else {}
    retain = patch.get("$retainKeys")
    for key, value in patch.items():
        if key.startswith("$setElementOrder/") or key in ("$retainKeys", "$patch"):
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            current = result.get(field) or []
            result[field] = [v for v in current if v not in (value or [])]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list):
            result[key] = _merge_list(key, result.get(key), value)
        elif isinstance(value, dict):
            merged = strategic_merge_patch(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
        else:
            result[key] = value
    if isinstance(retain, list):
        keep = set(retain)
        result = {k: v for k, v in result.items() if k in keep or (k not in patch and k in keep)}
    return result


def _merge_list(field: str, current: Any, patch: list[Any]) -> list[Any]:
    current_list: list[Any] = list(current) if isinstance(current, list) else []
    if field in MERGED_PRIMITIVE_LISTS:
        return current_list + [v for v in patch if v not in current_list]
    merge_key = MERGE_KEYS.get(field)
    if merge_key is None or not all(isinstance(item, dict) for item in patch):
        return [deep_copy(item) for item in patch if not (isinstance(item, dict) and item.get("$patch"))]
    if any(isinstance(item, dict) and item.get("$patch") == "replace" for item in patch):
        return [deep_copy(item) for item in patch if item.get("$patch") != "replace"]
    result = [deep_copy(item) for item in current_list]
    for item in patch:
        key_value = item.get(merge_key)
        index = next(
            (
                i
                for i, existing in enumerate(result)
                if isinstance(existing, dict) and existing.get(merge_key) == key_value
            ),
            None,
        )
        if item.get("$patch") == "delete":
            if index is not None:
                result.pop(index)
            continue
        if index is None:
            result.append(strategic_merge_patch({}, item))
        else:
            result[index] = strategic_merge_patch(result[index], item)
    return result


def json_patch(target: Any, operations: Any) -> Any:
    """RFC 6902 including `test`; a failed test or a bad path is a 422 like the real API server."""
    if not isinstance(operations, list):
        raise bad_request("json patch must be a list of operations")
    try:
        return jsonpatch.JsonPatch(operations).apply(copy.deepcopy(target))
    except jsonpatch.JsonPatchTestFailed as exc:
        raise ApiError(
            422, "Invalid", f"the server rejected our request due to an error in our request: {exc}"
        ) from exc
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, KeyError) as exc:
        raise ApiError(
            422, "Invalid", f"the server rejected our request due to an error in our request: {exc}"
        ) from exc


def apply_patch(target: Any, patch: Any, patch_type: str) -> Any:
    if patch_type == "merge":
        return merge_patch(target, patch)
    if patch_type in ("strategic", "apply"):
        return strategic_merge_patch(target, patch)
    if patch_type == "json":
        return json_patch(target, patch)
    raise bad_request(f"unknown patch type {patch_type!r}")


def create_json_patch(before: Any, after: Any) -> list[dict[str, Any]]:
    """The JSONPatch turning `before` into `after` (used to compare objects across admission)."""
    return list(jsonpatch.make_patch(before, after).patch)
