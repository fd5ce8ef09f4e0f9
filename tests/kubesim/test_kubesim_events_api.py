"""Events in both versions kube-apiserver serves them: stored once as core/v1, served also as
events.k8s.io/v1 (k/k pkg/apis/events/v1/conversion.go), with the field selectors each version takes
(`kubectl describe`'s `involvedObject.*`, client-go's events.k8s.io `regarding.*`)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import httpx
import pytest

from kubesim.testing import KubesimServer

Obj = dict[str, Any]
CORE = "/api/v1/namespaces/team/events"
EVENTS_V1 = "/apis/events.k8s.io/v1/namespaces/team/events"
BOTH = ["train-3.1", "train-3.2"]
STRATEGIC = {"Content-Type": "application/strategic-merge-patch+json"}


def event_v1(name: str, job: str, reason: str = "Resized", uid: str = "job-uid") -> Obj:
    """An Event as client-go's events.k8s.io recorder creates it."""
    return {
        "apiVersion": "events.k8s.io/v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": "team"},
        "eventTime": "2026-05-01T10:00:00.123456Z",
        "reportingController": "exclusive-placement.io/resizer",
        "reportingInstance": "exclusive-placement.io/resizer-host",
        "action": "Resize",
        "reason": reason,
        "regarding": {"apiVersion": "batch/v1", "kind": "Job", "namespace": "team", "name": job, "uid": uid},
        "note": f"{job} resized",
        "type": "Normal",
    }


@pytest.fixture(scope="module")
def sim() -> Iterator[KubesimServer]:
    with KubesimServer(nodes=1, pools=1, controllers=False) as server:
        httpx.post(
            f"{server.url}/api/v1/namespaces",
            json={"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team"}},
        ).raise_for_status()
        yield server


@pytest.fixture(scope="module")
def http(sim: KubesimServer) -> Iterator[httpx.Client]:
    with httpx.Client(base_url=sim.url, timeout=10) as client:
        yield client


def created(http: httpx.Client, event: Obj) -> Obj:
    response = http.post(EVENTS_V1, json=event)
    assert response.status_code == 201, response.text
    answer: Obj = response.json()
    return answer


def names(listed: Obj) -> list[str]:
    return [item["metadata"]["name"] for item in listed["items"]]


def test_an_events_v1_event_is_stored_as_core_v1_and_read_back_as_sent(http: httpx.Client) -> None:
    answer = created(http, event_v1("train-0.1", "train-0"))
    core = http.get(f"{CORE}/train-0.1").json()
    assert (core["apiVersion"], core["message"], core["involvedObject"]["name"]) == (
        "v1",
        "train-0 resized",
        "train-0",
    )
    assert core["reportingComponent"] == "exclusive-placement.io/resizer"
    assert not {"note", "regarding", "reportingController"} & set(core)
    served = http.get(f"{EVENTS_V1}/train-0.1").json()
    sent = event_v1("train-0.1", "train-0")
    assert {key: served[key] for key in sent if key != "metadata"} == {
        key: value for key, value in sent.items() if key != "metadata"
    }
    assert answer == served


def test_a_series_patch_and_a_json_patch_address_the_served_fields(http: httpx.Client) -> None:
    created(http, event_v1("train-1.1", "train-1"))
    series = {"series": {"count": 2, "lastObservedTime": "2026-05-01T10:00:05.000000Z"}}
    patched = http.patch(f"{EVENTS_V1}/train-1.1", json=series, headers=STRATEGIC).json()
    assert patched["series"] == series["series"]
    replaced = http.patch(
        f"{EVENTS_V1}/train-1.1",
        json=[{"op": "replace", "path": "/note", "value": "again"}],
        headers={"Content-Type": "application/json-patch+json"},
    ).json()
    assert replaced["note"] == "again"
    assert http.get(f"{CORE}/train-1.1").json()["message"] == "again"


def test_a_patch_of_a_missing_event_is_404(http: httpx.Client) -> None:
    response = http.patch(f"{EVENTS_V1}/nothing.1", json={"series": {"count": 2}}, headers=STRATEGIC)
    assert response.status_code == 404


def test_kubectl_describes_field_selector_finds_the_events_of_one_object(http: httpx.Client) -> None:
    created(http, event_v1("train-2.1", "train-2", uid="uid-2"))
    created(http, event_v1("train-2.2", "train-2", uid="old-uid"))  # an earlier Job of the same name
    created(http, event_v1("train-22.1", "train-22"))
    selector = ",".join(
        f"involvedObject.{field}={value}"
        for field, value in (("name", "train-2"), ("namespace", "team"), ("kind", "Job"), ("uid", "uid-2"))
    )
    listed = http.get(CORE, params={"fieldSelector": selector, "limit": "500"}).json()
    assert names(listed) == ["train-2.1"]


@pytest.mark.parametrize(
    ("selector", "expected"),
    [
        ("regarding.name=train-3", BOTH),
        ("regarding.name=train-3,reason=FollowersReleased", ["train-3.2"]),
        ("regarding.kind=Job,regarding.namespace=team,regarding.name=train-3,regarding.uid=job-uid", BOTH),
        ("regarding.name=train-3,reportingController=exclusive-placement.io/resizer,type=Normal", BOTH),
        ("regarding.name=train-3,reportingController!=exclusive-placement.io/resizer", []),
        ("regarding.name=train-3,source=exclusive-placement.io/resizer", BOTH),
        ("metadata.name=train-3.2", ["train-3.2"]),
    ],
)  # fmt: skip
def test_events_v1_takes_the_regarding_labels(http: httpx.Client, selector: str, expected: list[str]) -> None:
    for name, reason in (("train-3.1", "Resized"), ("train-3.2", "FollowersReleased")):
        if http.get(f"{EVENTS_V1}/{name}").status_code == 404:
            created(http, event_v1(name, "train-3", reason))
    listed = http.get(EVENTS_V1, params={"fieldSelector": selector}).json()
    assert (listed["kind"], listed["apiVersion"]) == ("EventList", "events.k8s.io/v1")
    assert names(listed) == expected
    assert all("regarding" in item for item in listed["items"])


@pytest.mark.parametrize(
    ("path", "label"),
    [(EVENTS_V1, "involvedObject.name"), (EVENTS_V1, "reportingComponent"), (CORE, "regarding.name")],
)
def test_each_version_refuses_the_other_versions_labels(http: httpx.Client, path: str, label: str) -> None:
    response = http.get(path, params={"fieldSelector": f"{label}=x"})
    assert response.status_code == 400
    assert response.json()["message"] == f"field label not supported: {label}"


def test_a_watch_of_events_v1_streams_served_objects(http: httpx.Client) -> None:
    listed = http.get(EVENTS_V1).json()
    params = {
        "watch": "true",
        "resourceVersion": listed["metadata"]["resourceVersion"],
        "fieldSelector": "regarding.name=train-4",
        "timeoutSeconds": "5",
    }
    with http.stream("GET", EVENTS_V1, params=params) as stream:
        created(http, event_v1("train-9.1", "train-9"))
        created(http, event_v1("train-4.1", "train-4"))
        event = json.loads(next(stream.iter_lines()))
    assert (event["type"], event["object"]["metadata"]["name"]) == ("ADDED", "train-4.1")
    assert (event["object"]["apiVersion"], event["object"]["note"]) == ("events.k8s.io/v1", "train-4 resized")


def test_discovery_lists_events_in_both_groups(http: httpx.Client) -> None:
    groups = {group["name"] for group in http.get("/apis").json()["groups"]}
    assert "events.k8s.io" in groups
    resources = http.get("/apis/events.k8s.io/v1").json()["resources"]
    assert [(r["name"], r["kind"], r["namespaced"]) for r in resources] == [("events", "Event", True)]
    assert "events" in {r["name"] for r in http.get("/api/v1").json()["resources"]}
