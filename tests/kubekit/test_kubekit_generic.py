"""The tools' generic client (`kubekit.generic`): any kind by name, on the binaries' transport, against an
in-memory object store over plain HTTP; its behaviour on the real API server is the kube tier's
(tests/kube/test_kube_demo.py, test_kube_faults.py, test_kube_rbac.py)."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

import pytest

from kubekit.client import KubeError
from kubekit.credentials import Credentials, kubeconfig_credentials
from kubekit.generic import GenericClient
from kubekit.objects import Obj
from kubekit.resources import ResourceType, UnservedKind

WIDGETS = ResourceType("apis/example.com/v1", "widgets", True)
PLURALS = {"namespaces", "nodes", "configmaps", "jobs", "widgets", "gadgets"}
DISCOVERY = {"/apis/example.com/v1": [{"name": "gadgets", "kind": "Gadget", "namespaced": False}]}
"""What the store serves besides its objects: the resource list of example.com/v1 (no widgets listed:
the client must find `Widget` in its own table, `Gadget` here)."""


class ObjectStore:
    """Objects by path, resourceVersions, the events of every write, and every request's headers (their
    names in lower case); answers
    TokenRequests, SubjectAccessReviews (allowed for `reader`) and `/readyz` as kube-apiserver does."""

    def __init__(self) -> None:
        self.objects: dict[str, dict[str, Obj]] = {}
        self.events: list[tuple[int, str, str, Obj]] = []
        self.requests: list[tuple[str, str, dict[str, str]]] = []
        self.propagations: list[str] = []
        self.version = 0
        self.lock = threading.Lock()
        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _handler(self))
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}"

    def write(self, collection: str, obj: Obj, event: str) -> Obj:
        with self.lock:
            self.version += 1
            stored = {**obj, "metadata": {**obj["metadata"], "resourceVersion": str(self.version)}}
            self.objects.setdefault(collection, {})[obj["metadata"]["name"]] = stored
            self.events.append((self.version, collection, event, stored))
            return stored


def _status(code: int, reason: str, message: str) -> tuple[int, Any]:
    return code, {"kind": "Status", "status": "Failure", "reason": reason, "message": message, "code": code}


def _answer(store: ObjectStore, method: str, path: str, query: dict[str, str], body: Any) -> tuple[int, Any]:
    if path.endswith("/token"):
        return 201, {
            "status": {"token": f"token-of-{path.split('/')[-2]}-{body['spec']['expirationSeconds']}"}
        }
    if path.endswith("/subjectaccessreviews"):
        allowed = (
            body["spec"]["user"].endswith(":reader") and body["spec"]["resourceAttributes"]["verb"] == "get"
        )
        return 201, {**body, "status": {"allowed": allowed}}
    if path in DISCOVERY:
        return 200, {"resources": DISCOVERY[path]}
    segments = path.rsplit("/", 1)
    if segments[1] in PLURALS:
        return _collection(store, method, path, query, body)
    if segments[0].rsplit("/", 1)[-1] in PLURALS:
        return _item(store, method, segments[0], segments[1], query, body)
    return _status(404, "NotFound", f"the server could not find the requested resource ({path})")


def _collection(
    store: ObjectStore, method: str, path: str, query: dict[str, str], body: Any
) -> tuple[int, Any]:
    items = store.objects.get(path, {})
    if method == "POST":
        if body["metadata"]["name"] in items:
            return _status(409, "AlreadyExists", f"{body['metadata']['name']} already exists")
        return 201, store.write(path, body, "ADDED")
    wanted = (
        dict(pair.split("=") for pair in query["labelSelector"].split(","))
        if "labelSelector" in query
        else {}
    )
    listed = [o for o in items.values() if wanted.items() <= (o["metadata"].get("labels") or {}).items()]
    return 200, {"items": listed, "metadata": {"resourceVersion": str(store.version)}}


def _item(
    store: ObjectStore, method: str, collection: str, name: str, query: dict[str, str], body: Any
) -> tuple[int, Any]:
    current = store.objects.get(collection, {}).get(name)
    if current is None:
        return _status(404, "NotFound", f"{collection.rsplit('/', 1)[1]} {name!r} not found")
    if method == "GET":
        return 200, current
    if method == "DELETE":
        del store.objects[collection][name]
        store.propagations.append(body["propagationPolicy"])
        return 200, {"kind": "Status", "status": "Success", "propagation": body["propagationPolicy"]}
    if method == "PUT":
        if body["metadata"].get("resourceVersion") != current["metadata"]["resourceVersion"]:
            return _status(409, "Conflict", "the object has been modified")
        return 200, store.write(collection, body, "MODIFIED")
    merged = {**current, **body, "metadata": {**current["metadata"], **body.get("metadata", {})}}
    return (
        (200, merged) if query.get("dryRun") == "All" else (200, store.write(collection, merged, "MODIFIED"))
    )


def _handler(store: ObjectStore) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        protocol_version = "HTTP/1.1"

        def log_message(self, *_: object) -> None:
            pass

        def _serve(self) -> None:
            url = urlparse(self.path)
            query = {key: values[0] for key, values in parse_qs(url.query).items()}
            length = int(self.headers.get("Content-Length") or 0)
            body = json.loads(self.rfile.read(length)) if length else None
            store.requests.append((self.command, self.path, {k.lower(): v for k, v in self.headers.items()}))
            if url.path == "/readyz":
                return self._send(200, b"ok", "text/plain")
            if query.get("watch") == "true":
                return self._watch(url.path, int(query["resourceVersion"]))
            code, answer = _answer(store, self.command, url.path, query, body)
            return self._send(code, json.dumps(answer).encode(), "application/json")

        def _send(self, code: int, data: bytes, content_type: str) -> None:
            self.send_response(code)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _watch(self, collection: str, since: int) -> None:
            """Every event after `since`, one JSON line each, then the server ends the watch."""
            self.send_response(200)
            self.send_header("Content-Type", "application/json")
            self.send_header("Connection", "close")
            self.end_headers()
            for version, where, kind, obj in list(store.events):
                if version > since and where == collection:
                    self.wfile.write(json.dumps({"type": kind, "object": obj}).encode() + b"\n")
            self.close_connection = True

        do_GET = do_POST = do_PUT = do_PATCH = do_DELETE = _serve

    return Handler


@pytest.fixture
def store() -> Iterator[ObjectStore]:
    served = ObjectStore()
    yield served
    served.server.shutdown()
    served.server.server_close()


@pytest.fixture
def client(store: ObjectStore) -> Iterator[GenericClient]:
    with GenericClient.connect(store.url, timeout=5.0, kinds={"Widget": WIDGETS}) as connected:
        yield connected


def config_map(name: str, **labels: str) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}}


def test_objects_are_created_read_listed_patched_and_deleted_by_kind(client: GenericClient) -> None:
    created = client.create(config_map("a", team="x"), namespace="ns")
    client.create(config_map("b", team="y"), namespace="ns")
    assert created["metadata"]["resourceVersion"] == "1"
    assert client.get("ConfigMap", "a", namespace="ns")["metadata"]["labels"] == {"team": "x"}
    assert [
        o["metadata"]["name"] for o in client.list("ConfigMap", namespace="ns", label_selector="team=y")
    ] == ["b"]
    patched = client.patch("ConfigMap", "a", {"data": {"k": "v"}}, namespace="ns")
    assert patched["data"] == {"k": "v"}
    client.delete("ConfigMap", "a", namespace="ns")
    client.delete("ConfigMap", "a", namespace="ns")  # already gone: not an error
    assert [o["metadata"]["name"] for o in client.list("ConfigMap", namespace="ns")] == ["b"]


def test_a_deletion_says_how_dependents_go(client: GenericClient, store: ObjectStore) -> None:
    client.create(config_map("a"), namespace="ns")
    client.create(config_map("b"), namespace="ns")
    client.delete("ConfigMap", "a", namespace="ns")
    client.delete("ConfigMap", "b", namespace="ns", propagation="Foreground")
    assert store.propagations == ["Background", "Foreground"]
    with pytest.raises(ValueError, match="propagation must be one of Background, Foreground, Orphan"):
        client.delete("ConfigMap", "b", namespace="ns", propagation="foreground")
    assert len(store.propagations) == 2  # refused before any request


def test_a_namespaced_object_without_a_namespace_goes_to_default(
    client: GenericClient, store: ObjectStore
) -> None:
    client.create(config_map("a"))
    assert list(store.objects) == ["/api/v1/namespaces/default/configmaps"]


def test_create_or_replace_replaces_what_exists_at_its_version(client: GenericClient) -> None:
    client.create(config_map("a", generation="1"), namespace="ns")
    replaced = client.create_or_replace(config_map("a", generation="2"), namespace="ns")
    assert replaced["metadata"]["labels"] == {"generation": "2"}
    assert client.get("ConfigMap", "a", namespace="ns")["metadata"]["resourceVersion"] == "2"


def test_a_dry_run_patch_is_answered_and_not_stored(client: GenericClient) -> None:
    client.create(config_map("a"), namespace="ns")
    answered = client.patch("ConfigMap", "a", {"data": {"k": "v"}}, namespace="ns", dry_run=True)
    assert answered["data"] == {"k": "v"}
    assert "data" not in client.get("ConfigMap", "a", namespace="ns")


def test_an_error_answer_is_a_kube_error_with_the_status_and_the_servers_words(client: GenericClient) -> None:
    with pytest.raises(KubeError) as missing:
        client.get("ConfigMap", "nope", namespace="ns")
    assert (missing.value.status, missing.value.reason) == (404, "NotFound")
    assert missing.value.message == "configmaps 'nope' not found"
    client.create(config_map("a"), namespace="ns")
    with pytest.raises(KubeError) as conflict:
        client.create(config_map("a"), namespace="ns")
    assert (conflict.value.status, conflict.value.reason) == (409, "AlreadyExists")


def test_nothing_listening_is_a_connection_level_kube_error(store: ObjectStore) -> None:
    url = store.url
    store.server.shutdown()
    store.server.server_close()
    with GenericClient.connect(url, timeout=2.0) as client, pytest.raises(KubeError) as refused:
        client.list("Node")
    assert refused.value.status is None
    assert refused.value.retryable


def test_a_kind_outside_the_table_is_named_unless_discovery_serves_it(
    client: GenericClient, store: ObjectStore
) -> None:
    with pytest.raises(ValueError, match="'Gadget' is not in the client's table"):
        client.get("Gadget", "g")
    gadget = {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}}
    assert client.served_type("example.com/v1", "Gadget") == ResourceType(
        "apis/example.com/v1", "gadgets", False
    )
    client.create(gadget, namespace="ignored")  # cluster-scoped, as discovery says
    assert "/apis/example.com/v1/gadgets" in store.objects
    with pytest.raises(UnservedKind, match=r"^the API server serves no kind Potato in example\.com/v1$"):
        client.served_type("example.com/v1", "Potato")
    with pytest.raises(UnservedKind, match=r"^the API server does not serve other\.io/v2 \(kind Gadget\)$"):
        client.served_type("other.io/v2", "Gadget")


def test_a_declared_custom_kind_is_addressed_by_name(client: GenericClient, store: ObjectStore) -> None:
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    client.create(widget, namespace="ns")
    assert client.get("Widget", "w", namespace="ns")["kind"] == "Widget"
    assert not [path for _, path, _ in store.requests if path == "/apis/example.com/v1"], "no discovery"


def test_a_watch_yields_every_event_after_the_listed_version(client: GenericClient) -> None:
    client.create(config_map("before"), namespace="ns")
    _, version = client.list_with_version("ConfigMap", namespace="ns")
    client.create(config_map("a"), namespace="ns")
    client.patch("ConfigMap", "a", {"data": {"k": "v"}}, namespace="ns")
    events = [
        (kind, obj["metadata"]["name"])
        for kind, obj in client.watch("ConfigMap", namespace="ns", resource_version=version)
    ]
    assert events == [("ADDED", "a"), ("MODIFIED", "a")]


def test_a_watch_the_caller_stops_leaves_the_client_usable(client: GenericClient) -> None:
    client.create(config_map("a"), namespace="ns")
    client.create(config_map("b"), namespace="ns")
    for kind, _ in client.watch("ConfigMap", namespace="ns", resource_version="0"):
        assert kind == "ADDED"
        break
    assert len(client.list("ConfigMap", namespace="ns")) == 2


def test_impersonation_tokens_and_access_reviews(client: GenericClient, store: ObjectStore) -> None:
    client.create(config_map("a"), namespace="ns", as_user="system:serviceaccount:kube-system:job-controller")
    assert store.requests[-1][2]["impersonate-user"] == "system:serviceaccount:kube-system:job-controller"
    assert client.request_token("ns", "tenant", seconds=600) == "token-of-tenant-600"
    assert client.service_account_may("ns", "reader", "get", "pods")
    assert not client.service_account_may("ns", "reader", "delete", "pods")


def test_a_text_endpoint_is_read_as_text(client: GenericClient) -> None:
    assert client.text("/readyz") == "ok"
    with pytest.raises(KubeError) as missing:
        client.text("/nowhere")
    assert missing.value.status == 404


def test_a_kubeconfigs_token_is_sent_and_its_credentials_read(tmp_path: Path, store: ObjectStore) -> None:
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: c, cluster: {{server: '{store.url}'}}}}]\n"
        "users: [{name: u, user: {token: secret}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    with GenericClient.from_kubeconfig(path) as client:
        assert client.server == store.url
        client.list("Node")
    assert store.requests[-1][2]["authorization"] == "Bearer secret"
    assert store.requests[-1][2]["user-agent"] == "devstack"


def test_kubeconfig_credentials_are_the_files_and_the_token_it_names(tmp_path: Path) -> None:
    for name in ("ca.crt", "admin.crt", "admin.key"):
        (tmp_path / name).write_text("not parsed until a TLS connection")
    path = tmp_path / "kubeconfig"
    path.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        "clusters: [{name: c, cluster: {server: 'https://127.0.0.1:6443', "
        f"certificate-authority: {tmp_path}/ca.crt}}}}]\n"
        f"users: [{{name: u, user: {{client-certificate: {tmp_path}/admin.crt, "
        f"client-key: {tmp_path}/admin.key}}}}]\n"
        "contexts: [{name: c, context: {cluster: c, user: u}}]\n"
    )
    server, credentials = kubeconfig_credentials(path)
    assert server == "https://127.0.0.1:6443"
    assert credentials.ca_file == tmp_path / "ca.crt"
    assert credentials.client_cert == (tmp_path / "admin.crt", tmp_path / "admin.key")
    assert credentials.token is None


def test_a_token_credential_is_sent_as_a_bearer_token(tmp_path: Path, store: ObjectStore) -> None:
    """A ServiceAccount's token (TokenRequest), as the kube tier's tenants connect; the CA is only read
    by a TLS connection."""
    credentials = Credentials(ca_file=tmp_path / "ca.crt", token="tenant-token")
    with GenericClient.connect(store.url, credentials=credentials) as client:
        client.list("Node")
    assert store.requests[-1][2]["authorization"] == "Bearer tenant-token"
