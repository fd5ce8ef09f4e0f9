"""The tools' generic client (`kubekit.generic`): any kind by name, on the binaries' transport, against the
fake API server over plain HTTP; its behaviour on the real API server is the kube tier's
(tests/kube/test_kube_demo.py, test_kube_faults.py, test_kube_rbac.py)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from kubekit.client import KubeError
from kubekit.credentials import Credentials, kubeconfig_credentials
from kubekit.generic import GenericClient
from kubekit.objects import Obj
from kubekit.resources import ResourceType, UnservedKind
from tests.support.fake_api import FakeKubeApi, Served

WIDGETS = ResourceType("apis/example.com/v1", "widgets", True)
READER = "system:serviceaccount:ns:reader"


@pytest.fixture
def store(fake_api: FakeKubeApi) -> FakeKubeApi:
    """The fake API server, serving example.com/v1's widgets (not listed by discovery: the client must
    find `Widget` in its own table) and gadgets (cluster-scoped, listed); `reader` may get."""
    fake_api.serve(Served("example.com/v1", "widgets", "Widget"), discovered=False)
    fake_api.serve(Served("example.com/v1", "gadgets", "Gadget", namespaced=False))
    fake_api.grants.add((READER, "get"))
    return fake_api


@pytest.fixture
def client(store: FakeKubeApi) -> Iterator[GenericClient]:
    with GenericClient.connect(store.url, timeout=5.0, kinds={"Widget": WIDGETS}) as connected:
        yield connected


def propagations(store: FakeKubeApi) -> list[str]:
    """How each delete request said dependents go."""
    return [call.body["propagationPolicy"] for call in store.calls_of("delete")]


def config_map(name: str, **labels: str) -> Obj:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name, "labels": labels}}


def test_objects_are_created_read_listed_patched_and_deleted_by_kind(
    client: GenericClient, store: FakeKubeApi
) -> None:
    created = client.create(config_map("a", team="x"), namespace="ns")
    client.create(config_map("b", team="y"), namespace="ns")
    assert (
        created["metadata"]["resourceVersion"]
        == store.stored("configmaps", "ns", "a")["metadata"]["resourceVersion"]
    )
    assert client.get("ConfigMap", "a", namespace="ns")["metadata"]["labels"] == {"team": "x"}
    assert [
        o["metadata"]["name"] for o in client.list("ConfigMap", namespace="ns", label_selector="team=y")
    ] == ["b"]
    patched = client.patch("ConfigMap", "a", {"data": {"k": "v"}}, namespace="ns")
    assert patched["data"] == {"k": "v"}
    client.delete("ConfigMap", "a", namespace="ns")
    client.delete("ConfigMap", "a", namespace="ns")  # already gone: not an error
    assert [o["metadata"]["name"] for o in client.list("ConfigMap", namespace="ns")] == ["b"]


def test_a_deletion_says_how_dependents_go(client: GenericClient, store: FakeKubeApi) -> None:
    client.create(config_map("a"), namespace="ns")
    client.create(config_map("b"), namespace="ns")
    client.delete("ConfigMap", "a", namespace="ns")
    client.delete("ConfigMap", "b", namespace="ns", propagation="Foreground")
    assert propagations(store) == ["Background", "Foreground"]
    with pytest.raises(ValueError, match="propagation must be one of Background, Foreground, Orphan"):
        client.delete("ConfigMap", "b", namespace="ns", propagation="foreground")
    assert len(propagations(store)) == 2  # refused before any request


def test_a_namespaced_object_without_a_namespace_goes_to_default(
    client: GenericClient, store: FakeKubeApi
) -> None:
    client.create(config_map("a"))
    assert [(call.resource, call.namespace) for call in store.calls_of("create")] == [
        ("configmaps", "default")
    ]
    assert [obj["metadata"]["namespace"] for obj in store.objects("configmaps")] == ["default"]


def test_create_or_replace_replaces_what_exists_at_its_version(
    client: GenericClient, store: FakeKubeApi
) -> None:
    created = client.create(config_map("a", generation="1"), namespace="ns")
    replaced = client.create_or_replace(config_map("a", generation="2"), namespace="ns")
    assert replaced["metadata"]["labels"] == {"generation": "2"}
    assert (
        client.get("ConfigMap", "a", namespace="ns")["metadata"]["resourceVersion"]
        != created["metadata"]["resourceVersion"]
    )
    assert [call.code for call in store.calls_of("update")] == [200]  # at its version: no conflict


def test_a_dry_run_patch_is_answered_and_not_stored(client: GenericClient) -> None:
    client.create(config_map("a"), namespace="ns")
    answered = client.patch("ConfigMap", "a", {"data": {"k": "v"}}, namespace="ns", dry_run=True)
    assert answered["data"] == {"k": "v"}
    assert "data" not in client.get("ConfigMap", "a", namespace="ns")


def test_an_error_answer_is_a_kube_error_with_the_status_and_the_servers_words(client: GenericClient) -> None:
    with pytest.raises(KubeError) as missing:
        client.get("ConfigMap", "nope", namespace="ns")
    assert (missing.value.status, missing.value.reason) == (404, "NotFound")
    assert (missing.value.not_found, missing.value.conflict) == (True, False)
    assert missing.value.message == 'configmaps "nope" not found'
    client.create(config_map("a"), namespace="ns")
    with pytest.raises(KubeError) as conflict:
        client.create(config_map("a"), namespace="ns")
    assert (conflict.value.status, conflict.value.reason) == (409, "AlreadyExists")
    assert (conflict.value.not_found, conflict.value.conflict) == (False, True)


def test_nothing_listening_is_a_connection_level_kube_error() -> None:
    with FakeKubeApi() as stopped:
        url = stopped.url
    with GenericClient.connect(url, timeout=2.0) as client, pytest.raises(KubeError) as refused:
        client.list("Node")
    assert refused.value.status is None
    assert refused.value.retryable


def test_a_kind_outside_the_table_is_named_unless_discovery_serves_it(
    client: GenericClient, store: FakeKubeApi
) -> None:
    with pytest.raises(ValueError, match="'Gadget' is not in the client's table"):
        client.get("Gadget", "g")
    gadget = {"apiVersion": "example.com/v1", "kind": "Gadget", "metadata": {"name": "g"}}
    assert client.served_type("example.com/v1", "Gadget") == ResourceType(
        "apis/example.com/v1", "gadgets", False
    )
    client.create(gadget, namespace="ignored")  # cluster-scoped, as discovery says
    assert [
        (obj["metadata"]["name"], obj["metadata"].get("namespace")) for obj in store.objects("gadgets")
    ] == [("g", None)]
    with pytest.raises(UnservedKind, match=r"^the API server serves no kind Potato in example\.com/v1$"):
        client.served_type("example.com/v1", "Potato")
    with pytest.raises(UnservedKind, match=r"^the API server does not serve other\.io/v2 \(kind Gadget\)$"):
        client.served_type("other.io/v2", "Gadget")


def test_a_declared_custom_kind_is_addressed_by_name(client: GenericClient, store: FakeKubeApi) -> None:
    widget = {"apiVersion": "example.com/v1", "kind": "Widget", "metadata": {"name": "w"}}
    client.create(widget, namespace="ns")
    assert client.get("Widget", "w", namespace="ns")["kind"] == "Widget"
    assert "/apis/example.com/v1" not in store.paths, "no discovery"


def test_a_watch_yields_every_event_after_the_listed_version(
    client: GenericClient, store: FakeKubeApi
) -> None:
    store.end_watches()  # once caught up, as a watch whose timeout is up
    client.create(config_map("before"), namespace="ns")
    _, version = client.list_with_version("ConfigMap", namespace="ns")
    client.create(config_map("a"), namespace="ns")
    client.patch("ConfigMap", "a", {"data": {"k": "v"}}, namespace="ns")
    events = [
        (kind, obj["metadata"]["name"])
        for kind, obj in client.watch("ConfigMap", namespace="ns", resource_version=version)
    ]
    assert events == [("ADDED", "a"), ("MODIFIED", "a")]


def test_a_watch_the_caller_stops_leaves_the_client_usable(client: GenericClient, store: FakeKubeApi) -> None:
    store.end_watches()
    client.create(config_map("a"), namespace="ns")
    client.create(config_map("b"), namespace="ns")
    for kind, _ in client.watch("ConfigMap", namespace="ns", resource_version="0"):
        assert kind == "ADDED"
        break
    assert len(client.list("ConfigMap", namespace="ns")) == 2


def test_impersonation_tokens_and_access_reviews(client: GenericClient, store: FakeKubeApi) -> None:
    client.create(config_map("a"), namespace="ns", as_user="system:serviceaccount:kube-system:job-controller")
    assert store.calls[-1].headers["impersonate-user"] == "system:serviceaccount:kube-system:job-controller"
    assert client.request_token("ns", "tenant", seconds=600) == "token-of-tenant-600"
    assert client.service_account_may("ns", "reader", "get", "pods")
    assert not client.service_account_may("ns", "reader", "delete", "pods")


def test_a_text_endpoint_is_read_as_text(client: GenericClient) -> None:
    assert client.text("/readyz") == "ok"
    with pytest.raises(KubeError) as missing:
        client.text("/nowhere")
    assert missing.value.status == 404


def test_a_kubeconfigs_token_is_sent_and_its_credentials_read(tmp_path: Path, store: FakeKubeApi) -> None:
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
    assert store.calls[-1].headers["authorization"] == "Bearer secret"
    assert store.calls[-1].headers["user-agent"] == "devstack"


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


def test_a_token_credential_is_sent_as_a_bearer_token(tmp_path: Path, store: FakeKubeApi) -> None:
    """A ServiceAccount's token (TokenRequest), as the kube tier's tenants connect; the CA is only read
    by a TLS connection."""
    credentials = Credentials(ca_file=tmp_path / "ca.crt", token="tenant-token")
    with GenericClient.connect(store.url, credentials=credentials) as client:
        client.list("Node")
    assert store.calls[-1].headers["authorization"] == "Bearer tenant-token"
