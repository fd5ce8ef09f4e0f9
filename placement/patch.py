"""Mutate a deep copy, then diff: the only way this project builds admission JSONPatches."""

from __future__ import annotations

from typing import Any

import jsonpatch

JsonPatch = list[dict[str, Any]]


def diff(original: dict[str, Any], mutated: dict[str, Any]) -> JsonPatch:
    """RFC 6902 operations turning `original` into `mutated` (empty when they are equal)."""
    ops: JsonPatch = jsonpatch.make_patch(original, mutated).patch
    return ops


def apply(original: dict[str, Any], ops: JsonPatch) -> dict[str, Any]:
    result: dict[str, Any] = jsonpatch.apply_patch(original, ops)
    return result
