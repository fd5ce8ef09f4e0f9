"""The official kubernetes Python client against kubesim over real HTTP."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from kubernetes import client

from kubesim.testing import KubesimServer
from tests.support.kube import as_body, error_status, labels_of, list_version, meta, name_of, watch_events
from tests.support.waiting import eventually

_names = (f"c{i}" for i in itertools.count())


def pod_body(name: str, **labels: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": labels or {"app": "client-test"}},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]},
    }


def job_body(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "completions": 2,
            "parallelism": 2,
            "completionMode": "Indexed",
            "template": {
                "spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "busybox:1.36"}]}
            },
        },
    }


def test_pod_crud(kube: client.ApiClient) -> None:
    core = client.CoreV1Api(kube)
    name = next(_names)
    created = core.create_namespaced_pod("default", as_body(pod_body(name)))
    assert meta(created).uid
    assert meta(core.read_namespaced_pod(name, "default")).resource_version == meta(created).resource_version
    listed = core.list_namespaced_pod(
        "default", label_selector="app=client-test", field_selector=f"metadata.name={name}"
    )
    assert [name_of(p) for p in listed.items] == [name]
    core.delete_namespaced_pod(name, "default")
    with pytest.raises(client.ApiException) as info:
        core.read_namespaced_pod(name, "default")
    assert info.value.status == 404
    assert error_status(info.value)["message"] == f'pods "{name}" not found'


PATCHES = [
    ("application/merge-patch+json", {"metadata": {"labels": {"patched": "merge"}}}, "merge"),
    ("application/strategic-merge-patch+json", {"metadata": {"labels": {"patched": "smp"}}}, "smp"),
    (
        "application/json-patch+json",
        [{"op": "add", "path": "/metadata/labels/patched", "value": "json"}],
        "json",
    ),
    ("application/apply-patch+yaml", None, "apply"),
]


@pytest.mark.parametrize(("content_type", "patch", "expected"), PATCHES)
def test_pod_patch_content_types(
    kube: client.ApiClient, content_type: str, patch: Any, expected: str
) -> None:
    core = client.CoreV1Api(kube)
    name = next(_names)
    core.create_namespaced_pod("default", as_body(pod_body(name)))
    if patch is None:
        patch = pod_body(name, app="client-test", patched="apply")
        patched = core.patch_namespaced_pod(
            name, "default", patch, field_manager="test", _content_type=content_type
        )
    else:
        patched = core.patch_namespaced_pod(name, "default", patch, _content_type=content_type)
    assert labels_of(patched)["patched"] == expected
    assert labels_of(core.read_namespaced_pod(name, "default"))["patched"] == expected


def test_server_side_apply_creates_when_missing(kube: client.ApiClient) -> None:
    core = client.CoreV1Api(kube)
    name = next(_names)
    applied = core.patch_namespaced_pod(
        name, "default", pod_body(name), field_manager="test", _content_type="application/apply-patch+yaml"
    )
    assert meta(applied).uid
    assert name_of(core.read_namespaced_pod(name, "default")) == name


def test_job_crud_and_elastic_resize(kube: client.ApiClient) -> None:
    batch = client.BatchV1Api(kube)
    name = next(_names)
    created = batch.create_namespaced_job("default", as_body(job_body(name)))
    assert created.spec is not None
    assert created.spec.selector is not None
    assert (created.spec.selector.match_labels or {})["batch.kubernetes.io/controller-uid"] == meta(
        created
    ).uid
    resized = batch.patch_namespaced_job(name, "default", {"spec": {"completions": 4, "parallelism": 4}})
    assert resized.spec is not None
    assert (resized.spec.completions, resized.spec.parallelism) == (4, 4)
    with pytest.raises(client.ApiException) as info:
        batch.patch_namespaced_job(name, "default", {"spec": {"completions": 5}})
    assert info.value.status == 422
    assert "spec.completions" in error_status(info.value)["message"]
    batch.delete_namespaced_job(name, "default")
    assert name not in [name_of(j) for j in batch.list_namespaced_job("default").items]


def test_nodes_list_get_patch(kube: client.ApiClient) -> None:
    core = client.CoreV1Api(kube)
    nodes = core.list_node().items
    assert len(nodes) == 4
    name = name_of(nodes[0])
    core.patch_node(name, {"metadata": {"labels": {"kubesim-test": "yes"}}})
    assert name_of(core.list_node(label_selector="kubesim-test=yes").items[0]) == name


def test_lease_update_with_stale_resource_version_conflicts(kube: client.ApiClient) -> None:
    coord = client.CoordinationV1Api(kube)
    name = next(_names)
    lease = coord.create_namespaced_lease(
        "default",
        as_body({"metadata": {"name": name}, "spec": {"holderIdentity": "a", "leaseDurationSeconds": 15}}),
    )
    assert lease.spec is not None
    lease.spec.holder_identity = "b"
    updated = coord.replace_namespaced_lease(name, "default", lease)
    assert updated.spec is not None
    assert updated.spec.holder_identity == "b"
    lease.spec.holder_identity = "c"
    with pytest.raises(client.ApiException) as info:
        coord.replace_namespaced_lease(name, "default", lease)
    assert info.value.status == 409
    coord.delete_namespaced_lease(name, "default")


def test_watch_streams_changes_from_a_list(kube: client.ApiClient) -> None:
    core = client.CoreV1Api(kube)
    name = next(_names)
    rv = list_version(core.list_namespaced_pod("default"))
    core.create_namespaced_pod("default", as_body(pod_body(name, watched="yes")))
    core.patch_namespaced_pod(name, "default", {"metadata": {"labels": {"step": "2"}}})
    core.delete_namespaced_pod(name, "default")
    events = []
    for event in watch_events(
        core.list_namespaced_pod,
        "default",
        label_selector="watched=yes",
        resource_version=rv,
        timeout_seconds=5,
    ):
        events.append((event["type"], event["object"].metadata.name))
        if len(events) == 3:
            break
    assert events == [("ADDED", name), ("MODIFIED", name), ("DELETED", name)]


def test_watch_from_expired_resource_version_gets_410_and_relist_recovers(
    api_only_sim: KubesimServer, kube: client.ApiClient
) -> None:
    core = client.CoreV1Api(kube)
    old_rv = list_version(core.list_namespaced_pod("default"))
    for _ in range(210):  # more than the fixture's watch history (200 events per resource)
        name = next(_names)
        core.create_namespaced_pod("default", as_body(pod_body(name, churn="yes")))
    with pytest.raises(client.ApiException) as info:
        for _ in watch_events(
            core.list_namespaced_pod, "default", resource_version=old_rv, timeout_seconds=2
        ):
            pass
    assert info.value.status == 410
    fresh = core.list_namespaced_pod("default", label_selector="churn=yes")
    assert len(fresh.items) == 210
    stream = watch_events(
        core.list_namespaced_pod,
        "default",
        resource_version=list_version(fresh),
        timeout_seconds=5,
    )
    core.delete_namespaced_pod(name, "default")
    first = next(iter(stream))
    assert (first["type"], first["object"].metadata.name) == ("DELETED", name)
    core.delete_collection_namespaced_pod("default", label_selector="churn=yes")
    assert core.list_namespaced_pod("default", label_selector="churn=yes").items == []


def test_bookmarks_are_sent_when_allowed(kube: client.ApiClient) -> None:
    import urllib.request

    host = kube.configuration.host
    rv = list_version(client.CoreV1Api(kube).list_namespaced_pod("default"))
    query = f"watch=1&allowWatchBookmarks=true&timeoutSeconds=1&resourceVersion={rv}"
    url = f"{host}/api/v1/namespaces/default/pods?{query}"
    with urllib.request.urlopen(url, timeout=10) as reply:
        lines = [json.loads(line) for line in reply.read().splitlines() if line.strip()]
    assert lines
    assert {line["type"] for line in lines} == {"BOOKMARK"}
    assert int(lines[-1]["object"]["metadata"]["resourceVersion"]) >= int(rv)


def test_status_body_for_bad_requests(kube: client.ApiClient) -> None:
    core = client.CoreV1Api(kube)
    with pytest.raises(client.ApiException) as info:
        core.create_namespaced_pod(
            "default", as_body({"metadata": {"name": "Bad_Name"}, "spec": {"containers": []}})
        )
    body = error_status(info.value)
    assert info.value.status == 422
    assert body["kind"] == "Status"
    assert body["reason"] == "Invalid"
    assert {c["field"] for c in body["details"]["causes"]} == {"metadata.name", "spec.containers"}


def test_a_client_closing_its_watch_releases_the_watcher(api_only_sim: KubesimServer) -> None:
    import httpx

    async def count(api: Any) -> int:
        return sum(len(rs.watchers) for rs in api.store.resources.values())

    before = api_only_sim.call(count)
    with (
        httpx.Client(base_url=api_only_sim.url, timeout=5) as http,
        http.stream("GET", "/api/v1/namespaces/default/pods?watch=true") as response,
    ):
        assert response.status_code == 200
        assert api_only_sim.call(count) == before + 1
    eventually(lambda: api_only_sim.call(count) == before, "the closed watch's watcher removed", 5)
