"""The small language kubesim's protobuf message declarations are written in, and the descriptor pool built
from them.

A `Message` names an upstream proto message (package and message name as in upstream's `generated.proto`)
and declares the fields kubesim decodes, each with its upstream field number and, in `Presence`, how Go's
`encoding/json` writes it, so a decoded object is the JSON dict the client would have sent as JSON. Fields
left out of a declaration are unknown to the protobuf runtime: `kubesim.apiserver.protobuf.decode` rejects a
body that carries one instead of dropping it.
"""

from __future__ import annotations

import enum
from collections.abc import Iterable
from dataclasses import dataclass
from dataclasses import field as dataclass_field
from typing import Literal

from google.protobuf import descriptor_pb2, descriptor_pool, message_factory
from google.protobuf.message import Message as ProtoMessage


class Presence(enum.Enum):
    """How Go's `encoding/json` writes a field of the upstream Go struct."""

    OMITEMPTY = "omitempty"
    """A value (not a pointer) tagged `omitempty`: left out when zero or empty."""
    ALWAYS = "always"
    """A value without `omitempty`, or any struct (`omitempty` never drops a struct): always written, as the
    zero value when the field is not on the wire."""
    OPTIONAL = "optional"
    """A pointer tagged `omitempty`: written exactly when it is on the wire (a pointer to zero included)."""
    NULLABLE = "nullable"
    """A pointer, slice or map without `omitempty`: `null` when absent or empty."""
    INLINE = "inline"
    """An embedded struct (`json:",inline"`): its fields are written into the enclosing object."""


STRING = "string"
INT32 = "int32"
INT64 = "int64"
BOOL = "bool"
BYTES = "bytes"
SCALARS = frozenset({STRING, INT32, INT64, BOOL, BYTES})

_SCALAR_TYPES = {
    STRING: descriptor_pb2.FieldDescriptorProto.TYPE_STRING,
    INT32: descriptor_pb2.FieldDescriptorProto.TYPE_INT32,
    INT64: descriptor_pb2.FieldDescriptorProto.TYPE_INT64,
    BOOL: descriptor_pb2.FieldDescriptorProto.TYPE_BOOL,
    BYTES: descriptor_pb2.FieldDescriptorProto.TYPE_BYTES,
}
Label = Literal["single", "list", "map"]


@dataclass(frozen=True)
class Field:
    name: str
    """The proto field name, which upstream keeps equal to the JSON name."""
    number: int
    type: str
    """A scalar (`STRING`, `INT32`, ...) or a message's full name; for a map, the value type (keys are
    strings)."""
    presence: Presence
    label: Label = "single"

    is_message: bool = dataclass_field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "is_message", self.type not in SCALARS)


@dataclass(frozen=True)
class Message:
    package: str
    name: str
    fields: tuple[Field, ...]
    not_decoded: tuple[tuple[int, str], ...] = ()
    """Upstream fields left out on purpose, (number, name): named in the error when a body carries one."""
    full_name: str = dataclass_field(init=False)

    def __post_init__(self) -> None:
        object.__setattr__(self, "full_name", f"{self.package}.{self.name}")


def message(package: str, name: str, *fields: Field, not_decoded: dict[int, str] | None = None) -> Message:
    numbers = [f.number for f in fields] + list(not_decoded or {})
    if len(set(numbers)) != len(numbers):
        raise ValueError(f"{package}.{name}: duplicate field numbers {sorted(numbers)}")
    return Message(package, name, fields, tuple(sorted((not_decoded or {}).items())))


def field(name: str, number: int, type_: str, presence: Presence | None = None) -> Field:
    """One scalar or message field; by default `OMITEMPTY` for a scalar and `ALWAYS` for a struct."""
    if presence is None:
        presence = Presence.OMITEMPTY if type_ in SCALARS else Presence.ALWAYS
    if type_ not in SCALARS and presence is Presence.OMITEMPTY:
        raise ValueError(f"{name}: Go never omits a struct, declare it ALWAYS (or OPTIONAL for a pointer)")
    if type_ in SCALARS and presence is Presence.INLINE:
        raise ValueError(f"{name}: only a struct can be inlined")
    return Field(name, number, type_, presence)


def repeated(name: str, number: int, type_: str, presence: Presence = Presence.OMITEMPTY) -> Field:
    _check_collection(name, presence)
    return Field(name, number, type_, presence, "list")


def mapping(name: str, number: int, value_type: str, presence: Presence = Presence.OMITEMPTY) -> Field:
    """`map<string, value_type>`."""
    _check_collection(name, presence)
    return Field(name, number, value_type, presence, "map")


def _check_collection(name: str, presence: Presence) -> None:
    if presence not in (Presence.OMITEMPTY, Presence.NULLABLE):
        raise ValueError(f"{name}: a slice or map is either OMITEMPTY or NULLABLE")


# --- the descriptor pool ---------------------------------------------------------------------------------


def _entry_name(field_name: str) -> str:
    """protoc's name for the implicit message of a map field: `nodeSelector` -> `NodeSelectorEntry`."""
    return field_name[0].upper() + field_name[1:] + "Entry"


def _type_of(proto: descriptor_pb2.FieldDescriptorProto, type_: str) -> None:
    if type_ in SCALARS:
        proto.type = _SCALAR_TYPES[type_]
    else:
        proto.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
        proto.type_name = "." + type_


def _add_message(file: descriptor_pb2.FileDescriptorProto, declared: Message) -> None:
    proto = file.message_type.add(name=declared.name)
    for f in declared.fields:
        added = proto.field.add(name=f.name, number=f.number)
        if f.label == "single":
            added.label = descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
            _type_of(added, f.type)
            continue
        added.label = descriptor_pb2.FieldDescriptorProto.LABEL_REPEATED
        if f.label == "list":
            _type_of(added, f.type)
            continue
        entry = proto.nested_type.add(name=_entry_name(f.name))
        entry.options.map_entry = True
        key = entry.field.add(name="key", number=1, label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL)
        _type_of(key, STRING)
        value = entry.field.add(
            name="value", number=2, label=descriptor_pb2.FieldDescriptorProto.LABEL_OPTIONAL
        )
        _type_of(value, f.type)
        added.type = descriptor_pb2.FieldDescriptorProto.TYPE_MESSAGE
        added.type_name = f".{declared.full_name}.{_entry_name(f.name)}"


def build_pool(messages: Iterable[Message]) -> descriptor_pool.DescriptorPool:
    """One proto2 file per package, each depending on the files before it (packages are given in
    dependency order: a message refers only to its own package and to packages declared earlier)."""
    by_package: dict[str, list[Message]] = {}
    for declared in messages:
        by_package.setdefault(declared.package, []).append(declared)
    pool = descriptor_pool.DescriptorPool()
    earlier: list[str] = []
    for package, declared_messages in by_package.items():
        file = descriptor_pb2.FileDescriptorProto(
            name=f"kubesim/{package.replace('.', '/')}.proto", package=package, syntax="proto2"
        )
        file.dependency.extend(earlier)
        for declared in declared_messages:
            _add_message(file, declared)
        pool.Add(file)
        earlier.append(file.name)
    return pool


class Schema:
    """The declared messages, their runtime classes and their declarations by full name."""

    def __init__(self, messages: Iterable[Message]) -> None:
        self.messages = {m.full_name: m for m in messages}
        self._pool = build_pool(self.messages.values())
        self._classes: dict[str, type[ProtoMessage]] = {}

    def message_class(self, full_name: str) -> type[ProtoMessage]:
        found = self._classes.get(full_name)
        if found is None:
            found = message_factory.GetMessageClass(self._pool.FindMessageTypeByName(full_name))
            self._classes[full_name] = found
        return found
