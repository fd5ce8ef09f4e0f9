"""Label selectors (=, ==, !=, in, notin, exists, !) and field selectors, parsed once and matched fast."""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from kubesim.errors import bad_request

Labels = Mapping[str, str]

_SET_EXPR = re.compile(r"^\s*(!?)\s*([A-Za-z0-9_./-]+)\s*(?:(notin|in)\s*\(([^)]*)\))?\s*$")
_EQ_EXPR = re.compile(r"^\s*([A-Za-z0-9_./-]+)\s*(==|!=|=)\s*([A-Za-z0-9_.-]*)\s*$")


@dataclass(frozen=True)
class Requirement:
    key: str
    operator: str  # "in", "notin", "exists", "!"
    values: frozenset[str] = frozenset()

    def matches(self, labels: Labels) -> bool:
        present = self.key in labels
        if self.operator == "exists":
            return present
        if self.operator == "!":
            return not present
        if self.operator == "in":
            return present and labels[self.key] in self.values
        return not present or labels[self.key] not in self.values


@dataclass(frozen=True)
class LabelSelector:
    requirements: tuple[Requirement, ...] = ()

    def matches(self, labels: Labels | None) -> bool:
        labels = labels or {}
        return all(r.matches(labels) for r in self.requirements)

    @property
    def empty(self) -> bool:
        return not self.requirements


def _split_top_level(text: str) -> list[str]:
    """Split on commas that are not inside parentheses."""
    parts: list[str] = []
    depth = 0
    current: list[str] = []
    for char in text:
        if char == "(":
            depth += 1
        elif char == ")":
            depth -= 1
        if char == "," and depth == 0:
            parts.append("".join(current))
            current = []
        else:
            current.append(char)
    parts.append("".join(current))
    return [p for p in parts if p.strip()]


def parse_label_selector(text: str | None) -> LabelSelector:
    if not text or not text.strip():
        return LabelSelector()
    requirements: list[Requirement] = []
    for part in _split_top_level(text):
        eq = _EQ_EXPR.match(part)
        if eq:
            key, op, value = eq.groups()
            requirements.append(Requirement(key, "notin" if op == "!=" else "in", frozenset({value})))
            continue
        st = _SET_EXPR.match(part)
        if st is None:
            raise bad_request(f'unable to parse requirement: invalid label selector: "{part.strip()}"')
        bang, key, op, values = st.groups()
        if op:
            if bang:
                raise bad_request(f'unable to parse requirement: "{part.strip()}"')
            requirements.append(
                Requirement(key, op, frozenset(v.strip() for v in values.split(",") if v.strip()))
            )
        else:
            requirements.append(Requirement(key, "!" if bang else "exists"))
    return LabelSelector(tuple(requirements))


def selector_from_dict(selector: Mapping[str, Any] | None) -> LabelSelector:
    """A metav1.LabelSelector (matchLabels + matchExpressions). None matches nothing, {} everything."""
    if selector is None:
        return LabelSelector((Requirement("", "in", frozenset()),))
    requirements = [
        Requirement(k, "in", frozenset({str(v)})) for k, v in (selector.get("matchLabels") or {}).items()
    ]
    for expr in selector.get("matchExpressions") or []:
        op = str(expr.get("operator", ""))
        key = str(expr.get("key", ""))
        values = frozenset(str(v) for v in expr.get("values") or [])
        mapped = {"In": "in", "NotIn": "notin", "Exists": "exists", "DoesNotExist": "!"}.get(op)
        if mapped is None:
            raise bad_request(f'"{op}" is not a valid label selector operator')
        requirements.append(Requirement(key, mapped, values))
    return LabelSelector(tuple(requirements))


# --- field selectors ---------------------------------------------------------------------------------


def _involved_object(field: str) -> Callable[[Mapping[str, Any]], str]:
    return lambda o: str((o.get("involvedObject") or {}).get(field) or "")


FIELD_GETTERS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "metadata.name": lambda o: str(o.get("metadata", {}).get("name", "")),
    "metadata.namespace": lambda o: str(o.get("metadata", {}).get("namespace", "")),
    "spec.nodeName": lambda o: str((o.get("spec") or {}).get("nodeName") or ""),
    "status.phase": lambda o: str((o.get("status") or {}).get("phase") or ""),
    "spec.schedulerName": lambda o: str((o.get("spec") or {}).get("schedulerName") or ""),
    **{
        f"involvedObject.{field}": _involved_object(field)
        for field in ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
    },
    "reason": lambda o: str(o.get("reason") or ""),
    "reportingComponent": lambda o: str(o.get("reportingComponent") or ""),
    "source": lambda o: str((o.get("source") or {}).get("component") or o.get("reportingComponent") or ""),
    "type": lambda o: str(o.get("type") or ""),
}
"""Event's labels are k/k `pkg/registry/core/event/strategy.go` `ToSelectableFields` (`source`: the legacy
source's component, else the reporting controller); they are accepted on every resource here."""


@dataclass(frozen=True)
class FieldRequirement:
    field: str
    value: str
    equal: bool

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return (FIELD_GETTERS[self.field](obj) == self.value) == self.equal


@dataclass(frozen=True)
class FieldSelector:
    requirements: tuple[FieldRequirement, ...] = ()

    def matches(self, obj: Mapping[str, Any]) -> bool:
        return all(r.matches(obj) for r in self.requirements)

    def exact(self, field: str) -> str | None:
        """The value an `field=value` requirement pins, if any (lets the store skip a full scan)."""
        for r in self.requirements:
            if r.field == field and r.equal:
                return r.value
        return None


def parse_field_selector(text: str | None) -> FieldSelector:
    if not text or not text.strip():
        return FieldSelector()
    requirements: list[FieldRequirement] = []
    for part in text.split(","):
        if not part.strip():
            continue
        match = re.match(r"^\s*([A-Za-z0-9_.]+)\s*(==|!=|=)\s*(.*?)\s*$", part)
        if match is None:
            raise bad_request(f"invalid selector: '{text}'; can't understand '{part}'")
        field, op, value = match.groups()
        if field not in FIELD_GETTERS:
            raise bad_request(f"field label not supported: {field}")
        requirements.append(FieldRequirement(field, value, op != "!="))
    return FieldSelector(tuple(requirements))
