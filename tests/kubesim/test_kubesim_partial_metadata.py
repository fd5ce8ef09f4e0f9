"""Metadata-only lists, gets and watches (`PartialObjectMetadata`), negotiated through `Accept` as client-go's
metadata client asks (kubernetes/apiserver handlers/response.go, `transformObject`)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import httpx
import pytest

from kubesim.apiserver.partial import requested
from kubesim.testing import KubesimServer

LIST = "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"
ONE = "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1,application/json"


@pytest.mark.parametrize(
    ("accept", "expected"),
    [
        (LIST, ("PartialObjectMetadataList", "v1")),
        (ONE, ("PartialObjectMetadata", "v1")),
        ("application/json", None),
        ("", None),
        ("application/json,application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1", None),
        (
            "application/vnd.kubernetes.protobuf;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1," + LIST,
            ("PartialObjectMetadataList", "v1"),
        ),
        (
            "application/json; as=PartialObjectMetadata; g=meta.k8s.io; v=v1beta1",
            ("PartialObjectMetadata", "v1beta1"),
        ),
        ("application/json;as=PartialObjectMetadata;g=other.io;v=v1,application/json", None),
        ("application/json;as=Table;g=meta.k8s.io;v=v1", None),
    ],
    ids=[
        "list",
        "one",
        "plain",
        "none",
        "plain-first",
        "protobuf-skipped",
        "v1beta1",
        "other-group",
        "table",
    ],
)
def test_the_first_usable_json_range_decides(accept: str, expected: tuple[str, str] | None) -> None:
    assert requested(accept) == expected


@pytest.fixture(scope="module")
def sim() -> Iterator[KubesimServer]:
    with KubesimServer(nodes=5, pools=1, controllers=False) as server:
        yield server


def test_a_list_is_metadata_only_and_pages_as_usual(sim: KubesimServer) -> None:
    whole = httpx.get(f"{sim.url}/api/v1/nodes").json()
    names, token = [], ""
    while True:
        params = {"limit": "2", **({"continue": token} if token else {})}
        page = httpx.get(f"{sim.url}/api/v1/nodes", params=params, headers={"Accept": LIST}).json()
        assert (page["kind"], page["apiVersion"]) == ("PartialObjectMetadataList", "meta.k8s.io/v1")
        assert page["metadata"]["resourceVersion"]
        for item in page["items"]:
            assert set(item) == {"kind", "apiVersion", "metadata"}
            assert (item["kind"], item["apiVersion"]) == ("PartialObjectMetadata", "meta.k8s.io/v1")
        names += [item["metadata"]["name"] for item in page["items"]]
        token = page["metadata"].get("continue", "")
        if not token:
            break
    assert names == [item["metadata"]["name"] for item in whole["items"]]
    assert whole["kind"] == "NodeList"
    assert "status" in whole["items"][0]


def test_get_is_metadata_only_and_the_wrong_kind_is_not_acceptable(sim: KubesimServer) -> None:
    name = httpx.get(f"{sim.url}/api/v1/nodes").json()["items"][0]["metadata"]["name"]
    one = httpx.get(f"{sim.url}/api/v1/nodes/{name}", headers={"Accept": ONE}).json()
    assert one["kind"] == "PartialObjectMetadata"
    assert one["metadata"]["labels"]
    wrong_list = httpx.get(f"{sim.url}/api/v1/nodes", headers={"Accept": ONE})
    wrong_one = httpx.get(f"{sim.url}/api/v1/nodes/{name}", headers={"Accept": LIST})
    for response in (wrong_list, wrong_one):
        assert response.status_code == 406
        assert response.json()["reason"] == "NotAcceptable"


def test_watch_events_carry_partial_object_metadata(sim: KubesimServer) -> None:
    listed = httpx.get(f"{sim.url}/api/v1/nodes", headers={"Accept": LIST}).json()
    name = listed["items"][0]["metadata"]["name"]
    params = {
        "watch": "true",
        "resourceVersion": listed["metadata"]["resourceVersion"],
        "timeoutSeconds": "5",
    }
    with (
        httpx.Client(base_url=sim.url, timeout=10) as client,
        client.stream("GET", "/api/v1/nodes", params=params, headers={"Accept": ONE}) as stream,
    ):
        client.patch(
            f"/api/v1/nodes/{name}",
            json={"metadata": {"labels": {"watched": "yes"}}},
            headers={"Content-Type": "application/merge-patch+json"},
        ).raise_for_status()
        event = json.loads(next(stream.iter_lines()))
    assert event["type"] == "MODIFIED"
    assert set(event["object"]) == {"kind", "apiVersion", "metadata"}
    assert event["object"]["kind"] == "PartialObjectMetadata"
    assert event["object"]["metadata"]["labels"]["watched"] == "yes"
