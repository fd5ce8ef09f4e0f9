"""Projections: keep of a cached object only the fields its readers read (the informers' `project=`).

A `Fields` spec is a nested map mirroring the object: `True` keeps a field whole, a nested `Fields` keeps
part of a map, and a `frozenset` of keys keeps only those entries of a string map (labels, annotations).
Anything not named is never stored. `FieldProjection(spec)` applies one; it is idempotent (projecting a
projected object changes nothing), so the informer may apply it once per list page and again when storing.

    project_node = FieldProjection({"metadata": {"name": True, "resourceVersion": True, "labels": True}})

The specs themselves sit next to the rules that read the fields (`placement.cached_fields`), so a rule
that starts reading a new field fails the projection tests until the spec names it.

At 15,000 nodes a full Node (status, images, conditions, managedFields) costs tens of kB in a Python
dict; its name and labels cost a few hundred bytes.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from placement.objects import Obj

Fields = Mapping[str, object]
"""Field name -> `True` (keep whole), a frozenset of keys (keep those entries) or a nested `Fields`."""


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
            kept[field] = current
        elif not isinstance(current, dict):
            continue  # a partial rule on a value that is not a map: nothing of it is read
        elif isinstance(rule, frozenset):
            kept[field] = {key: current[key] for key in rule if key in current}
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
