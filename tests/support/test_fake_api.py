"""The fake API server's own semantics, through the real client (`kubekit.client.Kube`): what the unit
tests that use it rely on, checked once here."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import urllib3

from devstack.controlplane.audit import AuditLog
from kubekit.client import Kube, KubeError, Timeouts
from kubekit.objects import Obj
from tests.support.builders import make_job, make_pod
from tests.support.fake_api import DROP, Call, FakeKubeApi
from tests.support.fixtures import kube_of

NS = "team"


@pytest.fixture
def api() -> Iterator[FakeKubeApi]:
    with FakeKubeApi() as served:
        yield served


@pytest.fixture
def kube(api: FakeKubeApi) -> Iterator[Kube]:
    client = kube_of(api, Timeouts(read=5, watch_server_seconds=5))
    yield client
    client.close()


def pod(name: str = "p") -> Obj:
    return make_pod(name, NS).uid(f"{name}-uid").obj()


def events_of(kube: Kube, version: str) -> list[tuple[str, str]]:
    stream = kube.watch("pods", namespace=NS, label_selector=None, resource_version=version)
    try:
        return [(e["type"], e["object"].get("metadata", {}).get("resourceVersion", "")) for e in stream]
    finally:
        stream.close()


def test_a_stale_resource_version_precondition_is_a_409(api: FakeKubeApi, kube: Kube) -> None:
    job = api.put("jobs", make_job("j", NS).indexed(1).obj())
    patched = kube.patch_job(NS, "j", {"metadata": {"resourceVersion": job["metadata"]["resourceVersion"]}})
    with pytest.raises(KubeError) as stale:
        kube.patch_job(NS, "j", {"metadata": {"resourceVersion": job["metadata"]["resourceVersion"]}})
    assert stale.value.status == 409
    assert (
        api.stored("jobs", NS, "j")["metadata"]["resourceVersion"] == patched["metadata"]["resourceVersion"]
    )


def test_a_failed_json_patch_test_is_a_422_and_changes_nothing(api: FakeKubeApi, kube: Kube) -> None:
    api.put("jobs", make_job("j", NS).indexed(1).obj())
    with pytest.raises(KubeError) as refused:
        kube.json_patch_job(NS, "j", [{"op": "test", "path": "/spec/completions", "value": 7}])
    assert refused.value.status == 422
    grown = kube.json_patch_job(
        NS,
        "j",
        [
            {"op": "test", "path": "/spec/completions", "value": 1},
            {"op": "replace", "path": "/spec/completions", "value": 8},
        ],
    )
    assert (grown["spec"]["completions"], grown["metadata"]["generation"]) == (8, 2)


def test_a_status_patch_merges_conditions_by_type_and_changes_only_the_status(
    api: FakeKubeApi, kube: Kube
) -> None:
    api.put("pods", pod())
    condition = {"type": "DisruptionTarget", "status": "True"}
    kube.patch_pod_status(NS, "p", {"status": {"conditions": [condition]}, "spec": {"nodeName": "x"}})
    kube.patch_pod_status(NS, "p", {"status": {"conditions": [{"type": "Ready", "status": "False"}]}})
    stored = api.stored("pods", NS, "p")
    assert [c["type"] for c in stored["status"]["conditions"]] == ["DisruptionTarget", "Ready"]
    assert "nodeName" not in stored["spec"]
    assert api.count("patch", "pods/status") == 2


def test_deletes_check_the_uid_and_graceful_ones_leave_the_pod_terminating(
    api: FakeKubeApi, kube: Kube
) -> None:
    api.put("pods", pod("a"))
    api.put("pods", pod("b"))
    with pytest.raises(KubeError) as other:
        kube.delete_pod(NS, "a", "another-uid")
    assert other.value.status == 409
    kube.delete_pod(NS, "a", "a-uid")
    assert api.find("pods", NS, "a") is None
    api.graceful_deletes = True
    kube.delete_pod(NS, "b", "b-uid")
    kube.delete_pod(NS, "b", "b-uid")
    assert api.stored("pods", NS, "b")["metadata"]["deletionTimestamp"]
    assert [p["metadata"]["name"] for p in api.deleted] == ["a", "b"]


def test_injected_failures_hit_the_requests_they_name(api: FakeKubeApi, kube: Kube) -> None:
    api.put("pods", pod())
    api.fail_next(429, verb="patch")
    api.fail_next(DROP, verb="get")
    with pytest.raises(KubeError) as dropped:
        kube.get_pod(NS, "p")
    assert dropped.value.status is None
    with pytest.raises(KubeError) as throttled:
        kube.patch_pod(NS, "p", [])
    assert throttled.value.status == 429
    kube.get_pod(NS, "p")
    assert [(c.verb, c.what, c.code) for c in api.calls] == [
        ("get", "pods/p", 0),
        ("patch", "pods/p", 429),
        ("get", "pods/p", 200),
    ]


def test_a_held_request_is_answered_once_released(api: FakeKubeApi, kube: Kube) -> None:
    api.put("pods", pod())
    hold = api.hold_next("get", "pods")
    answered = threading.Event()

    def read() -> None:
        kube.get_pod(NS, "p")
        answered.set()

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    assert hold.arrived.wait(10), "the request never reached the fake"
    assert not answered.is_set()
    hold.release()
    reader.join(10)
    assert answered.is_set()


def test_a_dry_run_is_answered_and_not_stored(api: FakeKubeApi, kube: Kube) -> None:
    api.put("pods", pod())
    answered = kube.transport.request(
        "PATCH",
        f"/api/v1/namespaces/{NS}/pods/p",
        body={"metadata": {"labels": {"k": "v"}}},
        query={"dryRun": "All"},
        content_type="application/merge-patch+json",
    )
    assert answered["metadata"]["labels"]["k"] == "v"
    assert "k" not in (api.stored("pods", NS, "p")["metadata"].get("labels") or {})


def test_ending_watches_bookmarks_and_compaction(api: FakeKubeApi, kube: Kube) -> None:
    first = api.put("pods", pod("a"))["metadata"]["resourceVersion"]
    second = api.put("pods", pod("b"))["metadata"]["resourceVersion"]
    mark = str(api.bookmark())
    api.end_watches(after=2, times=1)
    assert events_of(kube, "1") == [("ADDED", first), ("ADDED", second)]
    api.end_watches(after=None, times=1)
    assert events_of(kube, second) == [("BOOKMARK", mark)]
    api.compact()
    api.end_watches(after=None, times=1)
    assert events_of(kube, mark) == [("ERROR", "")]


def test_a_watch_broken_mid_stream_raises_in_the_reader(api: FakeKubeApi, kube: Kube) -> None:
    api.put("pods", pod("a"))
    api.end_watches(after=1, times=1, abruptly=True)
    stream = kube.watch("pods", namespace=NS, label_selector=None, resource_version="1")
    seen: list[str] = []
    with pytest.raises(urllib3.exceptions.ProtocolError):
        seen.extend(event["type"] for event in stream)
    assert seen == ["ADDED"]


def test_another_client_can_act_between_a_write_and_its_answer(api: FakeKubeApi, kube: Kube) -> None:
    api.put("pods", pod())

    def bind(_call: Call, obj: Obj) -> None:
        api.put("pods", {**obj, "spec": {"nodeName": "node-1"}})

    api.before_answering = bind
    answer = kube.patch_pod(NS, "p", [{"op": "add", "path": "/metadata/labels", "value": {"k": "v"}}])
    assert "nodeName" not in answer["spec"]
    assert api.stored("pods", NS, "p")["spec"]["nodeName"] == "node-1"


def test_creates_and_updates_answer_409_as_kube_apiserver_does(api: FakeKubeApi, kube: Kube) -> None:
    lease = {"metadata": {"name": "l"}, "spec": {"holderIdentity": "a"}}
    created = kube.create_lease(NS, lease)
    with pytest.raises(KubeError) as exists:
        kube.create_lease(NS, lease)
    assert (exists.value.status, exists.value.reason) == (409, "AlreadyExists")
    kube.replace_lease(NS, "l", {**created, "spec": {"holderIdentity": "b"}})
    with pytest.raises(KubeError) as stale:
        kube.replace_lease(NS, "l", {**created, "spec": {"holderIdentity": "c"}})
    assert (stale.value.status, stale.value.reason) == (409, "Conflict")
    assert api.stored("leases", NS, "l")["spec"]["holderIdentity"] == "b"


def test_a_request_is_in_the_audit_log_once_answered(api: FakeKubeApi, kube: Kube, tmp_path: Path) -> None:
    api.audit_log = tmp_path / "audit.log"
    api.put("pods", pod())
    kube.get_pod(NS, "p")
    (logged,) = AuditLog(api.audit_log).requests()
    assert (logged.verb, logged.resource, logged.namespace, logged.name, logged.code) == (
        "get",
        "pods",
        NS,
        "p",
        200,
    )
    assert logged.audit_id == api.calls[-1].headers["audit-id"]


def test_metrics_pages_are_served_in_turn_the_last_one_again(api: FakeKubeApi, kube: Kube) -> None:
    api.serve_metrics(["first\n", "second\n"])
    assert [kube.transport.text("/metrics") for _ in range(3)] == ["first\n", "second\n", "second\n"]
