"""`application/vnd.kubernetes.protobuf` request bodies: the decoder (Go's JSON rules, the envelope, what it
refuses) and the HTTP answers (201 / 400 / 415, nothing stored on error). The real-kubectl side is in
test_kubesim_kubectl_protobuf.py."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
from google.protobuf.json_format import ParseDict

from kubesim.apiserver.protobuf import meta
from kubesim.apiserver.protobuf.decode import MAGIC, ROOTS, Invalid, Unsupported, decode_object, schema
from kubesim.apiserver.protobuf.schema import STRING, Presence, field, mapping, message
from kubesim.testing import KubesimServer

PROTOBUF = "application/vnd.kubernetes.protobuf"
JOBSETS = "/apis/jobset.x-k8s.io/v1alpha2/namespaces/default/jobsets"


def typed(api_version: str, kind: str, fields: dict[str, Any]) -> bytes:
    """The typed message of (api_version, kind) built from `fields` (proto field names, proto JSON values)."""
    return ParseDict(fields, schema().message_class(ROOTS[(api_version, kind)])()).SerializeToString()


def envelope(api_version: str, kind: str, raw: bytes) -> bytes:
    unknown = schema().message_class(meta.UNKNOWN)()
    unknown.typeMeta.apiVersion = api_version  # type: ignore[attr-defined]
    unknown.typeMeta.kind = kind  # type: ignore[attr-defined]
    unknown.raw = raw  # type: ignore[attr-defined]
    return MAGIC + unknown.SerializeToString()


def body(api_version: str, kind: str, fields: dict[str, Any]) -> bytes:
    return envelope(api_version, kind, typed(api_version, kind, fields))


def at(obj: Any, path: str) -> Any:
    for key in path.split("."):
        obj = obj[int(key)] if isinstance(obj, list) else obj[key]
    return obj


_MISSING = object()
CREATED = "metadata.creationTimestamp"
TARGET_PORT = "spec.ports.0.targetPort"
CONTAINER = "spec.template.spec.containers.0"


def in_job(container: dict[str, Any]) -> dict[str, Any]:
    """A Job message whose only container is `container` (named "c")."""
    return {"spec": {"template": {"spec": {"containers": [{"name": "c", **container}]}}}}


def env_from(source: dict[str, Any]) -> dict[str, Any]:
    return in_job({"env": [{"name": "E", "valueFrom": source}]})


# (kind, the proto message, a JSON path, what Go's encoding/json writes there; _MISSING: left out)
GO_JSON_CASES = [
    # metav1.Time: RFC 3339 seconds in UTC; nanos dropped; the zero (empty) time is null
    (
        "v1/Namespace",
        {"metadata": {"creationTimestamp": {"seconds": 1700000000}}},
        CREATED,
        "2023-11-14T22:13:20Z",
    ),
    (
        "v1/Namespace",
        {"metadata": {"creationTimestamp": {"seconds": 5, "nanos": 7}}},
        CREATED,
        "1970-01-01T00:00:05Z",
    ),
    ("v1/Namespace", {"metadata": {"creationTimestamp": {"seconds": 0}}}, CREATED, "1970-01-01T00:00:00Z"),
    ("v1/Namespace", {"metadata": {}}, CREATED, None),
    ("v1/Namespace", {"metadata": {"deletionTimestamp": {}}}, "metadata.deletionTimestamp", None),
    ("v1/Namespace", {"metadata": {}}, "metadata.deletionTimestamp", _MISSING),
    # omitempty values are left out when zero even though Go writes them on the wire
    ("v1/Namespace", {"metadata": {"name": "x", "namespace": ""}}, "metadata.namespace", _MISSING),
    ("v1/Namespace", {"metadata": {"generation": "0"}}, "metadata.generation", _MISSING),
    ("v1/Namespace", {"metadata": {"generation": "3"}}, "metadata.generation", 3),
    # structs are always written, empty or not
    ("v1/Namespace", {}, "spec", {}),
    ("v1/Namespace", {}, "status", {}),
    # pointers are written exactly when sent, a pointer to zero included
    ("apps/v1/Deployment", {"spec": {"replicas": 0}}, "spec.replicas", 0),
    ("apps/v1/Deployment", {"spec": {}}, "spec.replicas", _MISSING),
    # a pointer without omitempty is null when absent; a slice without omitempty likewise
    ("apps/v1/Deployment", {"spec": {}}, "spec.selector", None),
    ("apps/v1/Deployment", {"spec": {}}, "spec.template.spec.containers", None),
    ("rbac.authorization.k8s.io/v1/ClusterRole", {}, "rules", None),
    # values without omitempty are written as their zero
    ("v1/Service", {"spec": {"ports": [{"name": "http"}]}}, "spec.ports.0.port", 0),
    ("policy/v1/PodDisruptionBudget", {}, "status.expectedPods", 0),
    # intstr.IntOrString: a number or a string; a struct, so written (as 0) even when absent
    ("v1/Service", {"spec": {"ports": [{"targetPort": {"intVal": 8080}}]}}, TARGET_PORT, 8080),
    (
        "v1/Service",
        {"spec": {"ports": [{"targetPort": {"type": "1", "strVal": "http"}}]}},
        TARGET_PORT,
        "http",
    ),
    ("v1/Service", {"spec": {"ports": [{}]}}, TARGET_PORT, 0),
    (
        "policy/v1/PodDisruptionBudget",
        {"spec": {"minAvailable": {"type": "1", "strVal": "50%"}}},
        "spec.minAvailable",
        "50%",
    ),
    # []byte as base64; maps of strings and of bytes
    ("v1/Secret", {"data": {"token": "AAEC/w=="}}, "data", {"token": "AAEC/w=="}),
    ("v1/ConfigMap", {"data": {"a": "b"}, "binaryData": {"bin": "/w=="}}, "binaryData.bin", "/w=="),
    ("v1/ConfigMap", {"data": {}}, "data", _MISSING),
    # resource.Quantity: its string; the zero quantity is "0"
    (
        "batch/v1/Job",
        in_job({"resources": {"limits": {"cpu": {"string": "500m"}}}}),
        f"{CONTAINER}.resources",
        {"limits": {"cpu": "500m"}},
    ),
    (
        "batch/v1/Job",
        env_from({"resourceFieldRef": {"resource": "limits.cpu"}}),
        f"{CONTAINER}.env.0.valueFrom.resourceFieldRef",
        {"resource": "limits.cpu", "divisor": "0"},
    ),
    # an embedded struct (json:",inline") writes its fields into the enclosing object
    (
        "batch/v1/Job",
        env_from({"configMapKeyRef": {"localObjectReference": {"name": "cm"}, "key": "mode"}}),
        f"{CONTAINER}.env.0.valueFrom.configMapKeyRef",
        {"name": "cm", "key": "mode"},
    ),
    # FieldsV1 carries JSON
    (
        "v1/ConfigMap",
        {
            "metadata": {
                "managedFields": [
                    {"manager": "m", "fieldsType": "FieldsV1", "fieldsV1": {"Raw": "eyJmOmRhdGEiOnt9fQ=="}}
                ]
            }
        },
        "metadata.managedFields.0.fieldsV1",
        {"f:data": {}},
    ),
]


def _kind(spec: str) -> tuple[str, str]:
    api_version, kind = spec.rsplit("/", 1)
    return api_version, kind


@pytest.mark.parametrize(("kind", "fields", "path", "expected"), GO_JSON_CASES)
def test_decoded_object_follows_go_json_rules(
    kind: str, fields: dict[str, Any], path: str, expected: Any
) -> None:
    api_version, kind_name = _kind(kind)
    decoded = decode_object(body(api_version, kind_name, fields))
    assert (decoded["apiVersion"], decoded["kind"]) == (api_version, kind_name)
    parent, _, leaf = path.rpartition(".")
    container = at(decoded, parent) if parent else decoded
    assert container.get(leaf, _MISSING) == expected


def test_a_whole_namespace_as_kubectl_sends_it() -> None:
    # kubectl 1.33 `create namespace team-a`: every ObjectMeta value written, zero or not (see the hex dump of
    # `-v=9`); the JSON it would have sent is {"metadata": {"name": ..., "creationTimestamp": null}, ...}.
    fields = {
        "metadata": {
            "name": "team-a",
            "generateName": "",
            "namespace": "",
            "selfLink": "",
            "uid": "",
            "resourceVersion": "",
            "generation": "0",
            "creationTimestamp": {},
        },
        "spec": {},
        "status": {"phase": ""},
    }
    assert decode_object(body("v1", "Namespace", fields)) == {
        "kind": "Namespace",
        "apiVersion": "v1",
        "metadata": {"name": "team-a", "creationTimestamp": None},
        "spec": {},
        "status": {},
    }


def test_delete_options_decode_under_any_group_version() -> None:
    raw = ParseDict(
        {"gracePeriodSeconds": "0", "preconditions": {"uid": "u-1"}, "propagationPolicy": "Foreground"},
        schema().message_class(meta.DELETE_OPTIONS)(),
    ).SerializeToString()
    assert decode_object(envelope("batch/v1", "DeleteOptions", raw)) == {
        "kind": "DeleteOptions",
        "apiVersion": "batch/v1",
        "gracePeriodSeconds": 0,
        "preconditions": {"uid": "u-1"},
        "propagationPolicy": "Foreground",
    }


def _length_delimited(number: int, value: bytes) -> bytes:
    """One length-delimited protobuf field, written by hand (numbers below 16, values below 128 bytes)."""
    return bytes([number << 3 | 2, len(value)]) + value


def _job_with_a_volume() -> bytes:
    """Job.spec(2).template(6).spec(2).volumes(1): a field kubesim leaves out on purpose."""
    pod_spec = _length_delimited(1, b"")
    return _length_delimited(2, _length_delimited(6, _length_delimited(2, pod_spec)))


def _valid_namespace() -> bytes:
    return body("v1", "Namespace", {"metadata": {"name": "team-a"}})


@pytest.mark.parametrize(
    ("data", "error", "message"),
    [
        (
            b'{"kind": "Namespace"}',
            Invalid,
            "not appear to be a protobuf message, expected prefix [107, 56, 115, 0]",
        ),
        (MAGIC, Invalid, "empty body"),
        (_valid_namespace()[:-3], Invalid, "is not a valid k8s.io.apimachinery.pkg.runtime.Unknown protobuf"),
        (
            envelope("v1", "Namespace", b"\x0a\x05\x0a\x03ab"),
            Invalid,
            "is not a valid k8s.io.api.core.v1.Namespace protobuf message",
        ),
        (envelope("v1", "", b""), Invalid, "Object 'Kind' is missing"),
        (envelope("", "Namespace", b""), Invalid, "Object 'apiVersion' is missing"),
        (
            body("v1", "Service", {"spec": {"ports": [{"targetPort": {"type": "2"}}]}}),
            Invalid,
            "spec.ports[0].targetPort: impossible IntOrString.Type 2",
        ),
        (
            body("v1", "ConfigMap", {"metadata": {"managedFields": [{"fieldsV1": {"Raw": "bm90IGpzb24="}}]}}),
            Invalid,
            "metadata.managedFields[0].fieldsV1: FieldsV1 does not carry JSON",
        ),
        (envelope("v1", "Pod", b""), Unsupported, "and DeleteOptions only, not v1, Kind=Pod"),
        (
            envelope("v1", "Namespace", _length_delimited(9, b"x")),
            Unsupported,
            "the object (field 9 of k8s.io.api.core.v1.Namespace) is not decoded by kubesim from protobuf",
        ),
        (
            envelope("batch/v1", "Job", _job_with_a_volume()),
            Unsupported,
            "spec.template.spec.volumes (field 1 of k8s.io.api.core.v1.PodSpec)",
        ),
    ],
    ids=[
        "json",
        "magic-only",
        "truncated",
        "bad-typed",
        "no-kind",
        "no-version",
        "intstr-type",
        "fieldsv1",
        "pod",
        "unknown-field",
        "undecoded-field",
    ],
)
def test_bad_bodies_are_refused_with_a_clear_reason(
    data: bytes, error: type[Exception], message: str
) -> None:
    with pytest.raises(error) as raised:
        decode_object(data)
    assert message in str(raised.value)


def test_schema_declarations_are_checked() -> None:
    with pytest.raises(ValueError, match="duplicate field numbers"):
        message("p", "M", field("a", 1, STRING), field("b", 1, STRING))
    with pytest.raises(ValueError, match="duplicate field numbers"):
        message("p", "M", field("a", 1, STRING), not_decoded={1: "b"})
    with pytest.raises(ValueError, match="Go never omits a struct"):
        field("t", 1, meta.TIME, Presence.OMITEMPTY)
    with pytest.raises(ValueError, match="either OMITEMPTY or NULLABLE"):
        mapping("m", 1, STRING, Presence.ALWAYS)


# --- over HTTP --------------------------------------------------------------------------------------------


@pytest.fixture
def http(api_only_sim: KubesimServer) -> httpx.Client:
    return httpx.Client(base_url=api_only_sim.url, timeout=10)


def _names(http: httpx.Client, path: str) -> list[str]:
    return [item["metadata"]["name"] for item in http.get(path).json()["items"]]


def test_protobuf_create_update_and_delete_over_http(http: httpx.Client) -> None:
    headers = {"Content-Type": PROTOBUF, "Accept": f"{PROTOBUF},application/json"}
    created = http.post("/api/v1/namespaces", content=_valid_namespace(), headers=headers)
    assert created.status_code == 201, created.text
    assert created.headers["content-type"] == "application/json"
    assert created.json()["metadata"]["name"] == "team-a"

    config_map = {"metadata": {"name": "cfg"}, "data": {"mode": "fast"}}
    config_maps = "/api/v1/namespaces/team-a/configmaps"
    sent = http.post(config_maps, content=body("v1", "ConfigMap", config_map), headers=headers)
    assert sent.status_code == 201, sent.text
    config_map["data"] = {"mode": "slow"}
    updated = http.put(f"{config_maps}/cfg", content=body("v1", "ConfigMap", config_map), headers=headers)
    assert updated.status_code == 200, updated.text
    assert updated.json()["data"] == {"mode": "slow"}

    options = schema().message_class(meta.DELETE_OPTIONS)()
    options.preconditions.uid = "not-its-uid"  # type: ignore[attr-defined]
    delete_options = envelope("v1", "DeleteOptions", options.SerializeToString())
    refused = http.request("DELETE", f"{config_maps}/cfg", headers=headers, content=delete_options)
    assert refused.status_code == 409
    assert "UID in precondition: not-its-uid" in refused.json()["message"]


@pytest.mark.parametrize(
    ("path", "data", "content_type", "status", "message"),
    [
        ("/api/v1/namespaces", b"\x00k8s", PROTOBUF, 400, "does not appear to be a protobuf message"),
        ("/api/v1/namespaces", _valid_namespace()[:-3], PROTOBUF, 400, "is not a valid"),
        (
            "/api/v1/namespaces",
            envelope("v1", "Namespace", _length_delimited(9, b"x")),
            PROTOBUF,
            415,
            "accepted media types include: application/json, application/yaml (the object (field 9 of ",
        ),
        (
            "/api/v1/namespaces/default/pods",
            envelope("v1", "Pod", b""),
            PROTOBUF,
            415,
            "application/json, application/yaml (kubesim decodes protobuf bodies only of the kinds it",
        ),
        (
            JOBSETS,
            envelope("v1", "Namespace", b""),
            PROTOBUF,
            415,
            "accepted media types include: application/json, application/yaml (",
        ),
        (
            "/api/v1/namespaces",
            b'{"metadata": {"name": "cbor"}}',
            "application/cbor",
            415,
            f"include: application/json, application/yaml, {PROTOBUF} (got 'application/cbor')",
        ),
        ("/api/v1/namespaces", b"{not json", "application/json", 400, "the request body is not valid JSON"),
    ],
    ids=["bad-magic", "truncated", "unknown-field", "pod", "custom-resource", "cbor", "bad-json"],
)
def test_refused_bodies_store_nothing(
    http: httpx.Client, path: str, data: bytes, content_type: str, status: int, message: str
) -> None:
    before = _names(http, "/api/v1/namespaces")
    answer = http.post(path, content=data, headers={"Content-Type": content_type})
    assert answer.status_code == status, answer.text
    assert answer.json()["reason"] == ("BadRequest" if status == 400 else "UnsupportedMediaType")
    assert message in answer.json()["message"]
    assert _names(http, "/api/v1/namespaces") == before


def test_json_and_yaml_bodies_with_media_type_parameters_and_without_a_content_type(
    http: httpx.Client,
) -> None:
    sent = [
        (b'{"metadata": {"name": "with-charset"}}', {"Content-Type": "application/json; charset=utf-8"}),
        (b"metadata: {name: as-yaml}", {"Content-Type": "application/yaml"}),
        (b'{"metadata": {"name": "no-content-type"}}', {}),
    ]
    for data, headers in sent:
        answer = http.post("/api/v1/namespaces", content=data, headers=headers)
        assert answer.status_code == 201, answer.text
    assert {"with-charset", "as-yaml", "no-content-type"} <= set(_names(http, "/api/v1/namespaces"))
