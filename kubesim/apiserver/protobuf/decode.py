"""A Kubernetes protobuf body -> the JSON dict the same client would have sent as `application/json`.

The wire format (kubernetes/apimachinery `pkg/runtime/serializer/protobuf/protobuf.go`, `Serializer.Decode`):
the 4-byte magic `k8s\\0`, then a `runtime.Unknown` whose `typeMeta` names the apiVersion and kind and whose
`raw` holds the typed message (`k8s.io.api.core.v1.Namespace`, ...). The typed message is parsed by the
protobuf runtime against kubesim's declarations (`kubesim.apiserver.protobuf.schema`), then written out as
Go's `encoding/json` writes the upstream struct: field presence per `Presence`, `metav1.Time` as RFC 3339
seconds in UTC (or `null` when zero), `resource.Quantity` as its string, `intstr.IntOrString` as a number or a
string, `[]byte` as base64, `FieldsV1` as the JSON it carries.

A field kubesim does not declare is refused (`Unsupported`), never dropped: upstream would keep it.
"""

from __future__ import annotations

import base64
import json
from collections.abc import Callable
from datetime import datetime, timedelta
from functools import cache
from typing import Any

from google.protobuf.message import DecodeError
from google.protobuf.message import Message as ProtoMessage
from google.protobuf.unknown_fields import UnknownFieldSet

from kubesim.apiserver.protobuf import core, groups, meta
from kubesim.apiserver.protobuf.schema import BYTES, SCALARS, Field, Message, Presence, Schema

MAGIC = b"k8s\x00"
DELETE_OPTIONS_KIND = "DeleteOptions"

# (apiVersion, kind) -> the message kubesim decodes the body of; DeleteOptions comes under any group version.
ROOTS: dict[tuple[str, str], str] = {
    ("v1", "Namespace"): core.NAMESPACE,
    ("v1", "ConfigMap"): core.CONFIG_MAP,
    ("v1", "Secret"): core.SECRET,
    ("v1", "ServiceAccount"): core.SERVICE_ACCOUNT,
    ("v1", "Service"): core.SERVICE,
    ("batch/v1", "Job"): groups.JOB,
    ("batch/v1", "CronJob"): groups.CRON_JOB,
    ("apps/v1", "Deployment"): groups.DEPLOYMENT,
    ("scheduling.k8s.io/v1", "PriorityClass"): groups.PRIORITY_CLASS,
    ("rbac.authorization.k8s.io/v1", "Role"): groups.ROLE,
    ("rbac.authorization.k8s.io/v1", "ClusterRole"): groups.CLUSTER_ROLE,
    ("rbac.authorization.k8s.io/v1", "RoleBinding"): groups.ROLE_BINDING,
    ("rbac.authorization.k8s.io/v1", "ClusterRoleBinding"): groups.CLUSTER_ROLE_BINDING,
    ("policy/v1", "PodDisruptionBudget"): groups.POD_DISRUPTION_BUDGET,
}
DECODED_KINDS = tuple(kind for _, kind in ROOTS)

_INLINE, _ALWAYS, _NULLABLE, _OMITEMPTY = (
    Presence.INLINE,
    Presence.ALWAYS,
    Presence.NULLABLE,
    Presence.OMITEMPTY,
)
_EPOCH = datetime(1970, 1, 1)  # naive on purpose: times are formatted in UTC with an explicit "Z"


class Invalid(ValueError):
    """The body is not a well-formed Kubernetes protobuf message (a client error: 400)."""


class Unsupported(ValueError):
    """A well-formed body kubesim cannot represent: a kind or a field it does not decode (415)."""


def decodes(api_version: str, kind: str) -> bool:
    return (api_version, kind) in ROOTS or kind == DELETE_OPTIONS_KIND


@cache
def schema() -> Schema:
    return Schema(meta.MESSAGES + core.MESSAGES + groups.MESSAGES)


def decode_object(body: bytes) -> dict[str, Any]:
    if not body.startswith(MAGIC):
        raise Invalid(
            f"provided data does not appear to be a protobuf message, expected prefix {list(MAGIC)}"
        )
    if len(body) == len(MAGIC):
        raise Invalid("empty body")
    envelope = _parse(meta.UNKNOWN, body[len(MAGIC) :])
    api_version, kind = envelope.typeMeta.apiVersion, envelope.typeMeta.kind  # type: ignore[attr-defined]
    if not kind:
        raise Invalid(f"Object 'Kind' is missing in the protobuf envelope (apiVersion {api_version!r})")
    if not api_version:
        raise Invalid(f"Object 'apiVersion' is missing in the protobuf envelope (kind {kind!r})")
    root = meta.DELETE_OPTIONS if kind == DELETE_OPTIONS_KIND else ROOTS.get((api_version, kind))
    if root is None:
        raise Unsupported(
            f"kubesim decodes protobuf bodies of {', '.join(DECODED_KINDS)} and DeleteOptions only, "
            f"not {api_version}, Kind={kind}"
        )
    typed = _parse(root, envelope.raw)  # type: ignore[attr-defined]
    return {"kind": kind, "apiVersion": api_version, **_object(typed, schema().messages[root], "")}


def _parse(full_name: str, data: bytes) -> ProtoMessage:
    parsed = schema().message_class(full_name)()
    try:
        parsed.ParseFromString(data)
    except DecodeError as exc:
        raise Invalid(f"the request body is not a valid {full_name} protobuf message: {exc}") from exc
    return parsed


# --- protobuf -> Go's JSON -------------------------------------------------------------------------------


def _reject_unknown_fields(message: ProtoMessage, full_name: str, path: str) -> None:
    unknown = UnknownFieldSet(message)
    if not len(unknown):
        return
    number = unknown[0].field_number
    declared = schema().messages.get(full_name)
    name = dict(declared.not_decoded).get(number) if declared is not None else None
    where = f"{path}.{name}" if path and name else name or path or "the object"
    raise Unsupported(f"{where} (field {number} of {full_name}) is not decoded by kubesim from protobuf")


def _object(message: ProtoMessage, declared: Message, path: str) -> dict[str, Any]:
    """The fields on the wire (`ListFields`: present singles, non-empty lists and maps), then the ones Go
    writes although they are not on the wire."""
    _reject_unknown_fields(message, declared.full_name, path)
    out: dict[str, Any] = {}
    by_number = _fields_by_number(declared.full_name)
    for descriptor, raw in message.ListFields():
        f = by_number[descriptor.number]
        if f.presence is _INLINE:
            out.update(_object(raw, schema().messages[f.type], path))
            continue
        child = f"{path}.{f.name}" if path else f.name
        if f.label == "list":
            out[f.name] = [_value(v, f.type, f"{child}[{i}]") for i, v in enumerate(raw)]
        elif f.label == "map":
            out[f.name] = {key: _value(v, f.type, f"{child}[{key}]") for key, v in raw.items()}
        elif f.presence is not _OMITEMPTY or raw != _ZEROS[f.type]:
            out[f.name] = _value(raw, f.type, child)
    for f in _written_when_absent(declared.full_name):
        if f.presence is _INLINE and not message.HasField(f.name):
            out.update(_object(_zero_message(f.type), schema().messages[f.type], path))
        elif f.presence is _NULLABLE:
            out.setdefault(f.name, None)
        elif f.name not in out and f.presence is _ALWAYS:
            zero = _zero_message(f.type) if f.is_message else _ZEROS[f.type]
            out[f.name] = _value(zero, f.type, f"{path}.{f.name}" if path else f.name)
    return out


@cache
def _fields_by_number(full_name: str) -> dict[int, Field]:
    return {f.number: f for f in schema().messages[full_name].fields}


@cache
def _written_when_absent(full_name: str) -> tuple[Field, ...]:
    """Structs and values without `omitempty` (their zero), nil pointers and slices without it (`null`)."""
    written = (_ALWAYS, _NULLABLE, _INLINE)
    return tuple(f for f in schema().messages[full_name].fields if f.presence in written)


_ZEROS: dict[str, Any] = {"string": "", "int32": 0, "int64": 0, "bool": False, "bytes": b""}


def _zero_message(full_name: str) -> ProtoMessage:
    return schema().message_class(full_name)()


def _value(raw: Any, type_: str, path: str) -> Any:
    if type_ == BYTES:
        return base64.b64encode(raw).decode()
    if type_ in SCALARS:
        return raw
    special = _SPECIAL.get(type_)
    if special is not None:
        _reject_unknown_fields(raw, type_, path)
        return special(raw, path)
    return _object(raw, schema().messages[type_], path)


def _time(raw: Any, path: str) -> str | None:
    """metav1.Time: an empty message is the zero time (JSON null); nanos are dropped, as upstream does."""
    if not (raw.HasField("seconds") or raw.HasField("nanos")):
        return None
    try:
        when = _EPOCH + timedelta(seconds=raw.seconds)
    except OverflowError as exc:
        raise Invalid(f"{path}: time {raw.seconds}s after the Unix epoch is out of range") from exc
    return when.isoformat() + "Z"


def _quantity(raw: Any, path: str) -> str:
    """resource.Quantity travels as its canonical string; an empty message is the zero quantity."""
    return str(raw.string) if raw.HasField("string") else "0"


def _int_or_string(raw: Any, path: str) -> int | str:
    if raw.type == 0:
        return int(raw.intVal)
    if raw.type == 1:
        return str(raw.strVal)
    raise Invalid(f"{path}: impossible IntOrString.Type {raw.type}")


def _fields_v1(raw: Any, path: str) -> Any:
    if not raw.HasField("Raw"):
        return None
    try:
        return json.loads(raw.Raw)
    except ValueError as exc:
        raise Invalid(f"{path}: FieldsV1 does not carry JSON: {exc}") from exc


_SPECIAL: dict[str, Callable[[Any, str], Any]] = {
    meta.TIME: _time,
    meta.QUANTITY: _quantity,
    meta.INT_OR_STRING: _int_or_string,
    meta.FIELDS_V1: _fields_v1,
}
