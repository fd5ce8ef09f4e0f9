"""apimachinery messages: the `runtime.Unknown` envelope, ObjectMeta and friends, and the types with their own
JSON form (Time, Quantity, IntOrString, FieldsV1).

Field numbers: kubernetes/apimachinery `pkg/runtime/generated.proto`, `pkg/apis/meta/v1/generated.proto`,
`pkg/util/intstr/generated.proto`, `pkg/api/resource/generated.proto`; presence: the Go structs' json tags in
`pkg/apis/meta/v1/types.go`.
"""

from __future__ import annotations

from kubesim.apiserver.protobuf.schema import (
    BOOL,
    BYTES,
    INT32,
    INT64,
    STRING,
    Presence,
    field,
    mapping,
    message,
    repeated,
)

RUNTIME = "k8s.io.apimachinery.pkg.runtime"
RESOURCE = "k8s.io.apimachinery.pkg.api.resource"
INTSTR = "k8s.io.apimachinery.pkg.util.intstr"
META = "k8s.io.apimachinery.pkg.apis.meta.v1"

UNKNOWN = f"{RUNTIME}.Unknown"
TYPE_META = f"{RUNTIME}.TypeMeta"
QUANTITY = f"{RESOURCE}.Quantity"
INT_OR_STRING = f"{INTSTR}.IntOrString"
TIME = f"{META}.Time"
FIELDS_V1 = f"{META}.FieldsV1"
OBJECT_META = f"{META}.ObjectMeta"
OWNER_REFERENCE = f"{META}.OwnerReference"
MANAGED_FIELDS_ENTRY = f"{META}.ManagedFieldsEntry"
LABEL_SELECTOR = f"{META}.LabelSelector"
LABEL_SELECTOR_REQUIREMENT = f"{META}.LabelSelectorRequirement"
CONDITION = f"{META}.Condition"
DELETE_OPTIONS = f"{META}.DeleteOptions"
PRECONDITIONS = f"{META}.Preconditions"

OPTIONAL, ALWAYS, NULLABLE = Presence.OPTIONAL, Presence.ALWAYS, Presence.NULLABLE

MESSAGES = (
    message(RUNTIME, "TypeMeta", field("apiVersion", 1, STRING), field("kind", 2, STRING)),
    message(
        RUNTIME,
        "Unknown",
        field("typeMeta", 1, TYPE_META),
        field("raw", 2, BYTES),
        field("contentEncoding", 3, STRING),
        field("contentType", 4, STRING),
    ),
    message(RESOURCE, "Quantity", field("string", 1, STRING)),
    message(
        INTSTR, "IntOrString", field("type", 1, INT64), field("intVal", 2, INT32), field("strVal", 3, STRING)
    ),
    message(META, "Time", field("seconds", 1, INT64), field("nanos", 2, INT32)),
    message(META, "FieldsV1", field("Raw", 1, BYTES)),
    message(
        META,
        "ObjectMeta",
        field("name", 1, STRING),
        field("generateName", 2, STRING),
        field("namespace", 3, STRING),
        field("selfLink", 4, STRING),
        field("uid", 5, STRING),
        field("resourceVersion", 6, STRING),
        field("generation", 7, INT64),
        field("creationTimestamp", 8, TIME),
        field("deletionTimestamp", 9, TIME, OPTIONAL),
        field("deletionGracePeriodSeconds", 10, INT64, OPTIONAL),
        mapping("labels", 11, STRING),
        mapping("annotations", 12, STRING),
        repeated("ownerReferences", 13, OWNER_REFERENCE),
        repeated("finalizers", 14, STRING),
        repeated("managedFields", 17, MANAGED_FIELDS_ENTRY),
    ),
    message(
        META,
        "OwnerReference",
        field("kind", 1, STRING, ALWAYS),
        field("name", 3, STRING, ALWAYS),
        field("uid", 4, STRING, ALWAYS),
        field("apiVersion", 5, STRING, ALWAYS),
        field("controller", 6, BOOL, OPTIONAL),
        field("blockOwnerDeletion", 7, BOOL, OPTIONAL),
    ),
    message(
        META,
        "ManagedFieldsEntry",
        field("manager", 1, STRING),
        field("operation", 2, STRING),
        field("apiVersion", 3, STRING),
        field("time", 4, TIME, OPTIONAL),
        field("fieldsType", 6, STRING),
        field("fieldsV1", 7, FIELDS_V1, OPTIONAL),
        field("subresource", 8, STRING),
    ),
    message(
        META,
        "LabelSelector",
        mapping("matchLabels", 1, STRING),
        repeated("matchExpressions", 2, LABEL_SELECTOR_REQUIREMENT),
    ),
    message(
        META,
        "LabelSelectorRequirement",
        field("key", 1, STRING, ALWAYS),
        field("operator", 2, STRING, ALWAYS),
        repeated("values", 3, STRING),
    ),
    message(
        META,
        "Condition",
        field("type", 1, STRING, ALWAYS),
        field("status", 2, STRING, ALWAYS),
        field("observedGeneration", 3, INT64),
        field("lastTransitionTime", 4, TIME),
        field("reason", 5, STRING, ALWAYS),
        field("message", 6, STRING, ALWAYS),
    ),
    message(
        META,
        "DeleteOptions",
        field("gracePeriodSeconds", 1, INT64, OPTIONAL),
        field("preconditions", 2, PRECONDITIONS, OPTIONAL),
        field("orphanDependents", 3, BOOL, OPTIONAL),
        field("propagationPolicy", 4, STRING, OPTIONAL),
        repeated("dryRun", 5, STRING),
        field("ignoreStoreReadErrorWithClusterBreakingPotential", 6, BOOL, OPTIONAL),
    ),
    message(
        META,
        "Preconditions",
        field("uid", 1, STRING, OPTIONAL),
        field("resourceVersion", 2, STRING, OPTIONAL),
    ),
)
