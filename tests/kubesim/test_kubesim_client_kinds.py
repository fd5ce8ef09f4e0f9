"""create/get/list/watch/patch (all four content types)/delete through the typed official client, per kind."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from kubernetes import client

from tests.support.kube import watch_events

_ids = itertools.count()


@dataclass(frozen=True)
class Kind:
    name: str
    api: Callable[[client.ApiClient], Any]
    suffix: str
    namespaced: bool
    body: Callable[[str], dict[str, Any]]

    def call(self, kube: client.ApiClient, verb: str, *args: Any, **kwargs: Any) -> Any:
        api = self.api(kube)
        if self.namespaced:
            method = getattr(api, f"{verb}_namespaced_{self.suffix}")
            if verb in ("create", "list", "delete_collection"):
                return method("default", *args, **kwargs)
            return method(args[0], "default", *args[1:], **kwargs)
        return getattr(api, f"{verb}_{self.suffix}")(*args, **kwargs)


def container() -> list[dict[str, str]]:
    return [{"name": "c", "image": "busybox:1.36"}]


def meta(name: str) -> dict[str, Any]:
    return {"name": name, "labels": {"kind-test": "yes"}}


POD_SPEC = {"containers": container()}
JOB_SPEC = {"template": {"spec": {"restartPolicy": "Never", "containers": container()}}}
KINDS = [
    Kind("pods", client.CoreV1Api, "pod", True,
         lambda n: {"apiVersion": "v1", "kind": "Pod", "metadata": meta(n), "spec": POD_SPEC}),
    Kind("jobs", client.BatchV1Api, "job", True,
         lambda n: {"apiVersion": "batch/v1", "kind": "Job", "metadata": meta(n), "spec": JOB_SPEC}),
    Kind("nodes", client.CoreV1Api, "node", False,
         lambda n: {"apiVersion": "v1", "kind": "Node", "metadata": meta(n)}),
    Kind("leases", client.CoordinationV1Api, "lease", True,
         lambda n: {"apiVersion": "coordination.k8s.io/v1", "kind": "Lease", "metadata": meta(n),
                    "spec": {"holderIdentity": "a"}}),
]  # fmt: skip


def patch_for(content_type: str, kind: Kind, name: str) -> Any:
    if content_type == "application/json-patch+json":
        return [{"op": "add", "path": "/metadata/labels/patched", "value": "json"}]
    if content_type == "application/apply-patch+yaml":
        body = kind.body(name)
        body["metadata"]["labels"]["patched"] = "apply"
        return body
    return {"metadata": {"labels": {"patched": content_type.split("/")[1].split("-", maxsplit=1)[0]}}}


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_crud_watch_and_every_patch_type(kube: client.ApiClient, kind: Kind) -> None:
    name = f"kind-{next(_ids)}"
    created = kind.call(kube, "create", kind.body(name))
    assert created.metadata.name == name
    assert kind.call(kube, "read", name).metadata.uid == created.metadata.uid
    listed = kind.call(kube, "list", label_selector="kind-test=yes")
    assert name in [item.metadata.name for item in listed.items]

    expected = {
        "application/merge-patch+json": "merge",
        "application/strategic-merge-patch+json": "strategic",
        "application/json-patch+json": "json",
        "application/apply-patch+yaml": "apply",
    }
    for content_type, label in expected.items():
        extra = {"field_manager": "kind-test"} if "apply" in content_type else {}
        patched = kind.call(
            kube, "patch", name, patch_for(content_type, kind, name), _content_type=content_type, **extra
        )
        assert patched.metadata.labels["patched"] == label, content_type

    list_fn = getattr(
        kind.api(kube), f"list_namespaced_{kind.suffix}" if kind.namespaced else f"list_{kind.suffix}"
    )
    args = ("default",) if kind.namespaced else ()
    stream = watch_events(
        list_fn, *args, resource_version=listed.metadata.resource_version,
        field_selector=f"metadata.name={name}", timeout_seconds=5,
    )  # fmt: skip
    kind.call(kube, "delete", name)
    types = [event["type"] for event in itertools.islice(stream, 5)]
    assert types == ["MODIFIED"] * 4 + ["DELETED"]
    with pytest.raises(client.ApiException) as info:
        kind.call(kube, "read", name)
    assert info.value.status == 404
