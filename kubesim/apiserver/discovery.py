"""Discovery documents: /version, /api, /apis, per group-version resource lists, and minimal OpenAPI.

The OpenAPI documents declare, per resource, the operations with the `fieldValidation` query parameter, so
kubectl (1.27+) detects server-side field validation and sends `fieldValidation=Strict` instead of
validating client-side against full schemas kubesim does not carry.
"""

from __future__ import annotations

import hashlib
import json
from typing import Any

from kubesim.apiserver.resources import ALL_VERBS, BY_GROUP_VERSION, SERVED_TYPES, ResourceType

KUBERNETES_VERSION = {
    "major": "1",
    "minor": "31",
    "gitVersion": "v1.31.0",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2024-08-13T00:00:00Z",
    "goVersion": "go1.22.5",
    "compiler": "gc",
    "platform": "linux/amd64",
}

SUBRESOURCE_VERBS = {"status": ["get", "patch", "update"], "binding": ["create"]}


def api_versions(server_address: str) -> dict[str, Any]:
    return {
        "kind": "APIVersions",
        "versions": ["v1"],
        "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": server_address}],
    }


def _group_entries() -> dict[str, list[str]]:
    groups: dict[str, list[str]] = {}
    for rt in SERVED_TYPES:
        if rt.group and rt.version not in groups.setdefault(rt.group, []):
            groups[rt.group].append(rt.version)
    return groups


def api_group_list() -> dict[str, Any]:
    groups = []
    for name, versions in _group_entries().items():
        entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
        groups.append({"name": name, "versions": entries, "preferredVersion": entries[0]})
    return {"kind": "APIGroupList", "apiVersion": "v1", "groups": groups}


def api_group(name: str) -> dict[str, Any] | None:
    versions = _group_entries().get(name)
    if not versions:
        return None
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {
        "kind": "APIGroup",
        "apiVersion": "v1",
        "name": name,
        "versions": entries,
        "preferredVersion": entries[0],
    }


def _resource_entry(rt: ResourceType) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "name": rt.plural,
        "singularName": rt.singular_name,
        "namespaced": rt.namespaced,
        "kind": rt.kind,
        "verbs": list(ALL_VERBS),
        "storageVersionHash": hashlib.sha256(rt.api_version.encode() + rt.kind.encode()).hexdigest()[:12],
    }
    if rt.short_names:
        entry["shortNames"] = list(rt.short_names)
    if rt.plural in ("pods", "jobs"):
        entry["categories"] = ["all"]
    return entry


def api_resource_list(group_version: str) -> dict[str, Any] | None:
    types = BY_GROUP_VERSION.get(group_version)
    if not types:
        return None
    resources = []
    for rt in types:
        resources.append(_resource_entry(rt))
        for sub in rt.subresources:
            resources.append(
                {
                    "name": f"{rt.plural}/{sub}",
                    "singularName": "",
                    "namespaced": rt.namespaced,
                    "kind": "Binding" if sub == "binding" else rt.kind,
                    "verbs": SUBRESOURCE_VERBS[sub],
                }
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": group_version,
        "resources": resources,
    }


# --- OpenAPI -------------------------------------------------------------------------------------------

_QUERY_PARAMS = [
    {"name": name, "in": "query", "schema": {"type": "string"}, "uniqueItems": True}
    for name in ("dryRun", "fieldManager", "fieldValidation", "pretty")
]


def _gvk(rt: ResourceType) -> list[dict[str, str]]:
    return [{"group": rt.group, "version": rt.version, "kind": rt.kind}]


def _schema_name(rt: ResourceType) -> str:
    group = rt.group or "core"
    return f"io.k8s.kubesim.{group}.{rt.version}.{rt.kind}"


def _paths(rt: ResourceType) -> dict[str, Any]:
    base = "/api/v1" if not rt.group else f"/apis/{rt.group}/{rt.version}"
    prefix = f"{base}/namespaces/{{namespace}}/{rt.plural}" if rt.namespaced else f"{base}/{rt.plural}"
    ref = {"$ref": f"#/components/schemas/{_schema_name(rt)}"}
    body = {"content": {"application/json": {"schema": ref}}}
    ok = {"200": {"description": "OK", "content": {"application/json": {"schema": ref}}}}

    def op(verb: str, action: str) -> dict[str, Any]:
        return {
            "operationId": f"{verb}{rt.kind}",
            "parameters": _QUERY_PARAMS,
            "requestBody": body,
            "responses": ok,
            "x-kubernetes-action": action,
            "x-kubernetes-group-version-kind": _gvk(rt)[0],
        }

    return {
        prefix: {"post": op("create", "post"), "get": {"responses": ok, "x-kubernetes-action": "list"}},
        f"{prefix}/{{name}}": {
            "put": op("replace", "put"),
            "patch": op("patch", "patch"),
            "get": {"responses": ok, "x-kubernetes-action": "get"},
            "delete": {"responses": ok, "x-kubernetes-action": "delete"},
        },
    }


def _schema(rt: ResourceType) -> dict[str, Any]:
    return {
        "type": "object",
        "description": f"{rt.kind} (kubesim: fields are not described; validation happens on the server)",
        "x-kubernetes-group-version-kind": _gvk(rt),
        "x-kubernetes-preserve-unknown-fields": True,
        "properties": {
            "apiVersion": {"type": "string"},
            "kind": {"type": "string"},
            "metadata": {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
        },
    }


def _gv_path(group_version: str) -> str:
    return f"api/{group_version}" if "/" not in group_version else f"apis/{group_version}"


def openapi_v3_document(group_version: str) -> dict[str, Any] | None:
    types = BY_GROUP_VERSION.get(group_version)
    if not types:
        return None
    paths: dict[str, Any] = {}
    for rt in types:
        paths.update(_paths(rt))
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes (kubesim)", "version": KUBERNETES_VERSION["gitVersion"]},
        "paths": paths,
        "components": {"schemas": {_schema_name(rt): _schema(rt) for rt in types}},
    }


def _hash(group_version: str) -> str:
    doc = openapi_v3_document(group_version)
    return hashlib.sha512(json.dumps(doc, sort_keys=True).encode()).hexdigest()[:64].upper()


def openapi_v3_root() -> dict[str, Any]:
    return {
        "paths": {
            _gv_path(gv): {"serverRelativeURL": f"/openapi/v3/{_gv_path(gv)}?hash={_hash(gv)}"}
            for gv in BY_GROUP_VERSION
        }
    }


def openapi_v2_document() -> dict[str, Any]:
    definitions: dict[str, Any] = {}
    paths: dict[str, Any] = {}
    for rt in SERVED_TYPES:
        schema = _schema(rt)
        definitions[_schema_name(rt)] = {
            k: v for k, v in schema.items() if k != "x-kubernetes-preserve-unknown-fields"
        }
        for path, ops in _paths(rt).items():
            paths[path] = {
                method: {
                    "parameters": [
                        {"name": p["name"], "in": "query", "type": "string", "uniqueItems": True}
                        for p in _QUERY_PARAMS
                    ],
                    "responses": {"200": {"description": "OK"}},
                    **{k: v for k, v in op.items() if k.startswith("x-")},
                }
                for method, op in ops.items()
            }
    return {
        "swagger": "2.0",
        "info": {"title": "Kubernetes (kubesim)", "version": KUBERNETES_VERSION["gitVersion"]},
        "paths": paths,
        "definitions": definitions,
    }


def _proto_field(number: int, payload: bytes) -> bytes:
    """One length-delimited protobuf field (wire type 2); payloads here are far below 128 bytes."""
    if len(payload) >= 128:
        raise ValueError("payload too long for the one-byte length this encoder writes")
    return bytes([number << 3 | 2, len(payload)]) + payload


def openapi_v2_protobuf() -> bytes:
    """A minimal gnostic `openapi_v2.Document` (swagger, info) for kubectl <= 1.28, which fetches the v2
    document as protobuf only. With no definitions it skips client-side schema validation of every kind
    and falls back to its compiled-in strategic-merge metadata, exactly as for a type the server omits."""
    info = _proto_field(1, b"Kubernetes (kubesim)") + _proto_field(
        2, KUBERNETES_VERSION["gitVersion"].encode()
    )
    return _proto_field(1, b"2.0") + _proto_field(2, info)
