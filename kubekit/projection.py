"""Projections: keep of a cached object only the fields its readers read (the informers' `project=`).

A `Fields` spec is a nested map mirroring the object: `True` keeps a field whole, a nested `Fields` keeps
part of a map, and a `frozenset` of keys keeps only those entries of a string map (labels, annotations).
Anything not named is never stored. `FieldProjection(spec)` applies one; it is idempotent (projecting a
projected object changes nothing), so the informer may apply it once per list page and again when storing.

    project_node = FieldProjection({"metadata": {"name": True, "resourceVersion": True, "labels": True}})

The specs themselves sit next to the rules that read the fields (`placement.cached_fields`), so a rule
that starts reading a new field fails the projection tests until the spec names it.

Strings kept are interned (`sys.intern`): the label keys and most label values of 15,000 nodes are the
same few dozen strings. At that scale a whole Node costs about 7 kB in the webhook's cache, its projection
about 1 kB (measured: `python -m bench scale`, README "Scale").
"""

from __future__ import annotations

import sys
from collections.abc import Mapping
from typing import Any

from kubekit.objects import Obj

Fields = Mapping[str, object]
"""Field name -> `True` (keep whole), a frozenset of keys (keep those entries) or a nested `Fields`."""


def _shared(value: Any) -> Any:
    """Strings interned, and maps of strings with interned keys and values: label keys and most label
    values repeat across thousands of nodes, and a node's name repeats in its hostname label and its key."""
    if isinstance(value, str):
        return sys.intern(value)
    if isinstance(value, dict) and all(
        isinstance(key, str) and isinstance(item, str) for key, item in value.items()
    ):
        return {sys.intern(key): sys.intern(item) for key, item in value.items()}
    return value


def project(value: Any, spec: Fields) -> Obj:
    """The part of `value` (a map) that `spec` names; an empty map when `value` is not a map."""
    if not isinstance(value, dict):
        return {}
    kept: Obj = {}
    for field, rule in spec.items():
        if field not in value:
            continue
        current = value[field]
        if rule is True:
            kept[field] = _shared(current)
        elif not isinstance(current, dict):
            continue  # a partial rule on a value that is not a map: nothing of it is read
        elif isinstance(rule, frozenset):
            kept[field] = _shared({key: current[key] for key in rule if key in current})
        elif isinstance(rule, Mapping):
            kept[field] = project(current, rule)
    return kept


class FieldProjection:
    """A callable projection for `kubekit.informer.Informer(project=...)`."""

    def __init__(self, spec: Fields) -> None:
        self.spec = spec

    def __call__(self, obj: Obj) -> Obj:
        return project(obj, self.spec)

    def __repr__(self) -> str:
        return f"FieldProjection({self.spec!r})"
