"""Mutate a deep copy, then diff: the only way this project builds admission JSONPatches.

- `deep_copy(obj)`: a deep copy of a JSON-shaped object: new dicts and lists, the immutable scalars shared.
  Two to three times faster than `copy.deepcopy` or a round trip through the C JSON codec on pods (both pay
  per call and per value for what JSON types never need: the memo, the text).
- `working_copy(obj)`: `deep_copy` but for the metadata's `managedFields`, shared: what an admission mutates
  and diffs.
- `diff(original, mutated)`: RFC 6902 operations turning `original` into `mutated`. Dicts are compared
  key by key (equal subtrees cost one C-level `==`); a changed list or scalar is one `replace`, a new key
  one `add` of the whole value (so there is never an `add` under a missing parent), a dropped key one
  `remove`. Written here rather than `jsonpatch.make_patch`, which copies every value it emits and cost
  more than the rest of an admission together (see docs/webhook.md); `jsonpatch` applies and checks
  these patches in the tests.
- `apply(original, ops)`: the inverse (via `jsonpatch`), for tests and tools.
"""

from __future__ import annotations

from typing import Any

import jsonpatch

JsonPatch = list[dict[str, Any]]


def deep_copy(obj: dict[str, Any]) -> dict[str, Any]:
    copied: dict[str, Any] = _copy(obj)
    return copied


def working_copy(obj: dict[str, Any]) -> dict[str, Any]:
    """A deep copy of an object to mutate and diff, its `metadata.managedFields` shared with `obj`. The field
    manager's record is often the larger half of an object the API server sends (a JobSet child Job: ~300
    of its ~400 JSON objects), no admission rewrites it, and a shared list diffs as equal at once."""
    copied: dict[str, Any] = {}
    for key, value in obj.items():
        if key == "metadata" and isinstance(value, dict):
            copied[key] = {
                name: item if name == "managedFields" else _copy(item) for name, item in value.items()
            }
        else:
            copied[key] = _copy(value)
    return copied


_NESTED = (dict, list, tuple)


def _copy(value: Any) -> Any:
    # Scalars are shared without a call each: most values of an object are strings.
    if isinstance(value, dict):
        return {key: _copy(item) if isinstance(item, _NESTED) else item for key, item in value.items()}
    if isinstance(value, list | tuple):  # a tuple becomes a list, as through JSON
        return [_copy(item) if isinstance(item, _NESTED) else item for item in value]
    return value


def escape(token: str) -> str:
    """A JSON-pointer reference token: `~` → `~0`, `/` → `~1` (in that order)."""
    return token.replace("~", "~0").replace("/", "~1")


def _diff_dicts(before: dict[str, Any], after: dict[str, Any], path: str, ops: JsonPatch) -> None:
    for key, old in before.items():
        if key not in after:
            ops.append({"op": "remove", "path": f"{path}/{escape(key)}"})
            continue
        new = after[key]
        if old == new:
            continue
        where = f"{path}/{escape(key)}"
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
