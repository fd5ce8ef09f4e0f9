"""A resource served in a second group-version: stored once, converted on the way in and out.

kube-apiserver stores Events once (core/v1 in etcd) and serves them also as events.k8s.io/v1: every request
body, patch, field selector and answer of the second version is converted (k/k
`pkg/apis/events/v1/conversion.go` `Convert_v1_Event_To_core_Event` / `Convert_core_Event_To_v1_Event`;
the field labels in `AddFieldLabelConversionsForEvent` of the same package). The two versions differ only
by top-level field names, so a conversion here is a renaming of top-level fields (and of patch paths).

| events.k8s.io/v1 | core/v1 (stored) |
|---|---|
| `regarding` | `involvedObject` |
| `note` | `message` |
| `reportingController` | `reportingComponent` |
| `deprecatedSource`, `deprecatedCount` | `source`, `count` |
| `deprecatedFirstTimestamp`, `deprecatedLastTimestamp` | `firstTimestamp`, `lastTimestamp` |

Field selectors of events.k8s.io/v1 take `regarding.*` (not `involvedObject.*`: "field label not
supported"), `reportingController`, `reason`, `type`, `source`, `metadata.name` and `metadata.namespace`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from kubesim.apiserver.resources import EVENTS_V1, ResourceType
from kubesim.errors import bad_request
from kubesim.interface import PatchType

Obj = dict[str, Any]

EVENT_FIELDS = (
    ("regarding", "involvedObject"),
    ("note", "message"),
    ("reportingController", "reportingComponent"),
    ("deprecatedSource", "source"),
    ("deprecatedCount", "count"),
    ("deprecatedFirstTimestamp", "firstTimestamp"),
    ("deprecatedLastTimestamp", "lastTimestamp"),
)
EVENT_REFERENCE_FIELDS = ("kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath")
EVENT_FIELD_LABELS: Mapping[str, str] = {
    **{f"regarding.{field}": f"involvedObject.{field}" for field in EVENT_REFERENCE_FIELDS},
    "reportingController": "reportingComponent",
    **{label: label for label in ("reason", "type", "source", "metadata.namespace", "metadata.name")},
}


@dataclass(frozen=True)
class Conversion:
    served: ResourceType
    stored_api_version: str
    renamed: tuple[tuple[str, str], ...]
    """(served field, stored field), at the top level."""
    field_labels: Mapping[str, str]
    """Served field label -> stored field label; any other label is refused."""

    def to_stored(self, obj: Obj) -> Obj:
        stored = self._rename(obj, {served: stored for served, stored in self.renamed})
        if "apiVersion" in stored:
            stored["apiVersion"] = self.stored_api_version
        return stored

    def to_served(self, obj: Obj) -> Obj:
        served = self._rename(obj, {stored: served for served, stored in self.renamed})
        if "apiVersion" in served:
            served["apiVersion"] = self.served.api_version
        return served

    def patch_to_stored(self, patch: Any, patch_type: PatchType) -> Any:
        """The same change, addressed to the stored fields (a JSON patch's paths renamed)."""
        if patch_type != "json":
            return self.to_stored(patch) if isinstance(patch, dict) else patch
        if not isinstance(patch, list):
            return patch
        names = dict(self.renamed)
        return [self._json_operation(operation, names) for operation in patch]

    def field_selector(self, text: str | None) -> str | None:
        """The selector in stored labels; a label this version does not serve is refused (400)."""
        if not text or not text.strip():
            return text
        parts = []
        for part in text.split(","):
            if not part.strip():
                continue
            label, operator, value = _split_requirement(part)
            stored = self.field_labels.get(label)
            if stored is None:
                raise bad_request(f"field label not supported: {label}")
            parts.append(f"{stored}{operator}{value}")
        return ",".join(parts)

    @staticmethod
    def _rename(obj: Obj, names: Mapping[str, str]) -> Obj:
        return {names.get(key, key): value for key, value in obj.items()}

    @staticmethod
    def _json_operation(operation: Any, names: Mapping[str, str]) -> Any:
        if not isinstance(operation, dict):
            return operation
        renamed = dict(operation)
        for pointer in ("path", "from"):
            value = renamed.get(pointer)
            if isinstance(value, str) and value.startswith("/"):
                first, _, rest = value[1:].partition("/")
                renamed[pointer] = "/" + names.get(first, first) + (f"/{rest}" if rest else "")
        return renamed


def _split_requirement(part: str) -> tuple[str, str, str]:
    for operator in ("!=", "==", "="):
        label, found, value = part.partition(operator)
        if found:
            return label.strip(), operator, value.strip()
    raise bad_request(f"invalid selector: can't understand '{part}'")


CONVERSIONS: Mapping[ResourceType, Conversion] = {
    EVENTS_V1: Conversion(EVENTS_V1, "v1", EVENT_FIELDS, EVENT_FIELD_LABELS),
}


def conversion_of(rt: ResourceType) -> Conversion | None:
    """The conversion of a resource served in a version other than its stored one; None for the rest."""
    return CONVERSIONS.get(rt)
