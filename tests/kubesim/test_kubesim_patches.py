"""Merge, strategic-merge and JSON patches on Kubernetes-shaped objects."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.apiserver.patches import apply_patch, merge_patch, strategic_merge_patch
from kubesim.errors import ApiError

POD: dict[str, Any] = {
    "metadata": {"name": "p", "labels": {"a": "1", "b": "2"}, "finalizers": ["x"]},
    "spec": {
        "nodeSelector": {"pool": "p1"},
        "schedulingGates": [{"name": "g1"}, {"name": "g2"}],
        "containers": [{"name": "main", "image": "i:1"}, {"name": "side", "image": "s:1"}],
        "tolerations": [{"key": "t"}],
    },
}


def test_merge_patch_merges_maps_deletes_nulls_and_replaces_lists() -> None:
    patched = merge_patch(
        POD, {"metadata": {"labels": {"a": None, "c": "3"}}, "spec": {"containers": [{"name": "x"}]}}
    )
    assert patched["metadata"]["labels"] == {"b": "2", "c": "3"}
    assert patched["spec"]["containers"] == [{"name": "x"}]
    assert POD["metadata"]["labels"] == {"a": "1", "b": "2"}, "the input must not be mutated"


@pytest.mark.parametrize(
    ("patch", "path", "expected"),
    [
        ({"spec": {"containers": [{"name": "side", "image": "s:2"}]}}, ("spec", "containers"),
         [{"name": "main", "image": "i:1"}, {"name": "side", "image": "s:2"}]),
        ({"spec": {"containers": [{"name": "new", "image": "n"}]}}, ("spec", "containers"),
         [{"name": "main", "image": "i:1"}, {"name": "side", "image": "s:1"}, {"name": "new", "image": "n"}]),
        ({"spec": {"schedulingGates": [{"name": "g1", "$patch": "delete"}]}}, ("spec", "schedulingGates"),
         [{"name": "g2"}]),
        ({"spec": {"schedulingGates": None}}, ("spec", "schedulingGates"), None),
        ({"spec": {"nodeSelector": {"rack": "r1"}}}, ("spec", "nodeSelector"), {"pool": "p1", "rack": "r1"}),
        ({"spec": {"nodeSelector": {"$patch": "replace", "rack": "r1"}}}, ("spec", "nodeSelector"),
         {"rack": "r1"}),
        ({"spec": {"tolerations": [{"key": "u"}]}}, ("spec", "tolerations"), [{"key": "u"}]),
        ({"metadata": {"finalizers": ["y"]}}, ("metadata", "finalizers"), ["x", "y"]),
        ({"metadata": {"$deleteFromPrimitiveList/finalizers": ["x"]}}, ("metadata", "finalizers"), []),
        ({"spec": {"$setElementOrder/containers": [{"name": "side"}, {"name": "main"}]}},
         ("spec", "containers"), [{"name": "main", "image": "i:1"}, {"name": "side", "image": "s:1"}]),
    ],
)  # fmt: skip
def test_strategic_merge_patch(patch: dict[str, Any], path: tuple[str, str], expected: Any) -> None:
    patched = strategic_merge_patch(POD, patch)
    assert patched[path[0]].get(path[1]) == expected


def test_json_patch_applies_and_test_failure_is_422() -> None:
    ops = [{"op": "test", "path": "/spec/nodeSelector/pool", "value": "p1"},
           {"op": "add", "path": "/spec/nodeSelector/rack", "value": "r"}]  # fmt: skip
    assert apply_patch(POD, ops, "json")["spec"]["nodeSelector"] == {"pool": "p1", "rack": "r"}
    with pytest.raises(ApiError) as info:
        apply_patch(POD, [{"op": "test", "path": "/spec/nodeSelector/pool", "value": "other"}], "json")
    assert info.value.status == 422


def test_json_patch_under_missing_parent_is_422() -> None:
    with pytest.raises(ApiError) as info:
        apply_patch(POD, [{"op": "add", "path": "/spec/affinity/podAffinity", "value": {}}], "json")
    assert info.value.status == 422
