"""Mutate a deep copy, then diff: the only way this project builds admission JSONPatches.

- `deep_copy(obj)`: a deep copy of a JSON-shaped object (through the C JSON codec: several times faster
  than `copy.deepcopy` on pods, which only hold JSON types).
- `diff(original, mutated)`: RFC 6902 operations turning `original` into `mutated`. Dicts are compared
  key by key (equal subtrees cost one C-level `==`); a changed list or scalar is one `replace`, a new key
  one `add` of the whole value (so there is never an `add` under a missing parent), a dropped key one
  `remove`. Written here rather than `jsonpatch.make_patch`, which copies every value it emits and cost
  more than the rest of an admission together (see docs/webhook.md); `jsonpatch` applies and checks
  these patches in the tests.
- `apply(original, ops)`: the inverse (via `jsonpatch`), for tests and tools.
"""

from __future__ import annotations

import json
from typing import Any

import jsonpatch

JsonPatch = list[dict[str, Any]]


def deep_copy(obj: dict[str, Any]) -> dict[str, Any]:
    copied: dict[str, Any] = json.loads(json.dumps(obj))
    return copied


def escape(token: str) -> str:
    """A JSON-pointer reference token: `~` → `~0`, `/` → `~1` (in that order)."""
    return token.replace("~", "~0").replace("/", "~1")


def _diff_dicts(before: dict[str, Any], after: dict[str, Any], path: str, ops: JsonPatch) -> None:
    for key, old in before.items():
        where = f"{path}/{escape(key)}"
        if key not in after:
            ops.append({"op": "remove", "path": where})
            continue
        new = after[key]
        if old == new:
            continue
        if isinstance(old, dict) and isinstance(new, dict):
            _diff_dicts(old, new, where, ops)
        else:
            ops.append({"op": "replace", "path": where, "value": new})
    for key, new in after.items():
        if key not in before:
            ops.append({"op": "add", "path": f"{path}/{escape(key)}", "value": new})


def diff(original: dict[str, Any], mutated: dict[str, Any]) -> JsonPatch:
    """RFC 6902 operations turning `original` into `mutated` (empty when they are equal)."""
    ops: JsonPatch = []
    if original != mutated:
        _diff_dicts(original, mutated, "", ops)
    return ops


def apply(original: dict[str, Any], ops: JsonPatch) -> dict[str, Any]:
    result: dict[str, Any] = jsonpatch.apply_patch(original, ops)
    return result
