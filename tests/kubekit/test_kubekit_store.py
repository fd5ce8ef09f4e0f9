"""Object keys and the informer's Store: keys by namespace/name, the secondary index follows every change."""

from __future__ import annotations

from typing import Any

import pytest

from kubekit.informer import Store, without_managed_fields
from kubekit.keys import object_key
from placement.objects import owner_job_key
from tests.support.builders import make_pod


def pod(name: str, job: str, namespace: str = "ns") -> dict[str, Any]:
    built = make_pod(name, namespace).owned_by(job, f"uid-{job}").obj()
    built["metadata"]["managedFields"] = [{"manager": "kubectl"}]  # what the default projection drops
    return built


@pytest.mark.parametrize(
    ("obj", "key"),
    [
        ({"metadata": {"name": "p", "namespace": "team-a"}}, "team-a/p"),
        ({"metadata": {"name": "node-1"}}, "node-1"),  # cluster-scoped: the name alone
        ({"metadata": {"name": "node-1", "namespace": ""}}, "node-1"),
        ({}, ""),
    ],
)
def test_object_key(obj: dict[str, Any], key: str) -> None:
    assert object_key(obj) == key


def test_index_follows_upsert_move_and_delete() -> None:
    store = Store(index=owner_job_key)
    assert store.upsert(pod("a", "job-1")) is None
    store.upsert(pod("b", "job-1"))
    assert sorted(p["metadata"]["name"] for p in store.by_index("ns/job-1")) == ["a", "b"]
    old = store.upsert(pod("b", "job-2"))  # same pod, now indexed elsewhere
    assert old is not None
    assert owner_job_key(old) == "ns/job-1"
    assert [p["metadata"]["name"] for p in store.by_index("ns/job-1")] == ["a"]
    assert [p["metadata"]["name"] for p in store.by_index("ns/job-2")] == ["b"]
    assert store.delete("ns/a") is not None
    assert store.by_index("ns/job-1") == []
    assert sorted(store.index_values()) == ["ns/job-2"]
    assert store.keys() == {"ns/b"}
    assert len(store) == 1
    assert store.delete("ns/missing") is None


def test_a_store_without_index_keeps_objects_by_key() -> None:
    store = Store()
    store.upsert({"metadata": {"name": "node-1"}})
    assert store.get("node-1") == {"metadata": {"name": "node-1"}}
    assert store.index_values() == []


def version(name: str, uid: str, resource_version: str, node: str | None = None) -> dict[str, Any]:
    built = make_pod(name, "ns").uid(uid).obj()
    built["metadata"]["resourceVersion"] = resource_version
    if node is not None:
        built["spec"]["nodeName"] = node
    return built


@pytest.mark.parametrize(
    ("cached", "answer", "stored"),
    [
        (version("p", "u", "12", node="n1"), version("p", "u", "11"), False),  # its watch event overtook it
        (version("p", "u", "11"), version("p", "u", "12"), True),
        (version("p", "u", "12"), version("p", "u", "12"), True),
        (version("p", "old", "12"), version("p", "new", "5"), True),  # another pod of the same name
        (version("p", "u", "12"), version("p", "u", "opaque"), True),  # not comparable: the answer
        (None, version("p", "u", "3"), True),
    ],
)
def test_an_answer_to_a_write_never_replaces_a_newer_version(
    cached: dict[str, Any] | None, answer: dict[str, Any], stored: bool
) -> None:
    store = Store(index=owner_job_key)
    if cached is not None:
        store.upsert(cached)
    assert store.upsert_answer(answer) is stored
    assert store.get("ns/p") == (answer if stored else cached)


def test_default_projection_drops_managed_fields_only() -> None:
    projected = without_managed_fields(pod("a", "j"))
    assert "managedFields" not in projected["metadata"]
    assert projected["metadata"]["ownerReferences"][0]["name"] == "j"
