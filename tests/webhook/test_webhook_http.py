"""The real app in-process over ASGI (`tests.support.asgi.AsgiClient`), wired to a fake API server over real
HTTP; every patch applied."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from placement.constants import (
    DEFAULT_FOLLOWER_SHARDS,
    JOB_KEY_LABEL,
    LEADER_SCHEDULED_GATE,
    PIN_SHARD_LABEL,
    RESIZE_LABEL,
    ROLE_LABEL,
    TARGET_COMPLETIONS_ANNOTATION,
    TARGET_PARALLELISM_ANNOTATION,
    Strategy,
)
from placement.objects import pin_shard
from placement.patch import apply
from tests.support.asgi import AsgiClient
from tests.support.fake_api import FakeKubeApi
from tests.support.waiting import eventually
from tests.webhook.webhook_support import (
    POOL,
    Running,
    fixture_review,
    jobset_of_fixture,
    leader_from_fixture,
    node_obj,
    settings_for,
)
from webhook.app import create_app
from webhook.handlers import Admission, Handled
from webhook.metrics import Metrics
from webhook.review import AdmissionRequest, decode_patch
from webhook.server import build
from webhook.settings import MAX_BODY_BYTES, WebhookSettings

REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def _object(review: dict[str, Any]) -> dict[str, Any]:
    obj: dict[str, Any] = review["request"]["object"]
    return obj


def _check_echo(review: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    assert answer["apiVersion"] == "admission.k8s.io/v1"
    assert answer["kind"] == "AdmissionReview"
    assert answer["response"]["uid"] == review["request"]["uid"]
    response: dict[str, Any] = answer["response"]
    return response


def _patched(review: dict[str, Any], answer: dict[str, Any]) -> dict[str, Any]:
    response = _check_echo(review, answer)
    assert response["allowed"] is True
    assert response["patchType"] == "JSONPatch"
    return apply(_object(review), decode_patch(answer))  # type: ignore[arg-type]


def _seed_bound_leader(running: Running, pool: str = "pool-a") -> None:
    running.api.put("nodes", node_obj("node-1", pool))
    running.api.put("pods", leader_from_fixture("node-1"))
    eventually(
        lambda: (
            len(running.webhook.directory.pods.store) == 1 and len(running.webhook.directory.nodes.store) == 1
        ),
        "the leader and its node cached",
    )


@pytest.mark.parametrize("fixture", ["jobset-child-job.json", "indexed-job.json"])
def test_elastic_jobs_are_shrunk(running: Running, fixture: str) -> None:
    running.api.put("jobsets", jobset_of_fixture())
    review = fixture_review(fixture)
    job = _patched(review, running.post("/mutate-jobs", review))
    target = str(_object(review)["spec"]["completions"])
    assert (job["spec"]["completions"], job["spec"]["parallelism"]) == (1, 1)
    assert job["metadata"]["annotations"][TARGET_COMPLETIONS_ANNOTATION] == target
    assert job["metadata"]["annotations"][TARGET_PARALLELISM_ANNOTATION] == target
    assert job["metadata"]["labels"][RESIZE_LABEL] == "pending"
    # Its follower shard, on the Job (the follower policy binding's params) and its pods (its objectSelector).
    meta = _object(review)["metadata"]
    shard = pin_shard(review["request"]["namespace"], meta["name"], DEFAULT_FOLLOWER_SHARDS)
    assert job["metadata"]["labels"][PIN_SHARD_LABEL] == shard
    assert job["spec"]["template"]["metadata"]["labels"][PIN_SHARD_LABEL] == shard
    # The Job webhook is never re-invoked (reinvocationPolicy: Never): a Job arriving with the keys comes
    # from a client, and loses them.
    again = copy.deepcopy(review)
    again["request"]["object"] = job
    readmitted = _patched(again, running.post("/mutate-jobs", again))
    assert RESIZE_LABEL not in readmitted["metadata"]["labels"]
    assert TARGET_COMPLETIONS_ANNOTATION not in readmitted["metadata"]["annotations"]
    assert readmitted["spec"]["completions"] == 1


@pytest.mark.parametrize("shards", [1, 3])
def test_the_follower_shards_setting_reaches_the_job_mutation(fake_api: FakeKubeApi, shards: int) -> None:
    review = fixture_review("indexed-job.json")
    meta = _object(review)["metadata"]
    webhook = build(settings_for(fake_api.url, follower_shards=shards))
    with AsgiClient(webhook.app) as client:
        eventually(lambda: client.get("/readyz").status_code == 200, "the webhook ready")
        job = _patched(review, Running(client, webhook, fake_api).post("/mutate-jobs", review))
    shard = pin_shard(review["request"]["namespace"], meta["name"], shards)
    assert int(shard) < shards
    assert job["metadata"]["labels"][PIN_SHARD_LABEL] == shard
    assert job["spec"]["template"]["metadata"]["labels"][PIN_SHARD_LABEL] == shard


def test_nonindexed_job_is_placed_with_affinity_and_a_warning(running: Running) -> None:
    review = fixture_review("nonindexed-job.json")
    response = _check_echo(review, running.post("/mutate-jobs", review))
    assert response["allowed"] is True
    assert "the Job is NonIndexed, so no pod is its leader" in response["warnings"][0]
    job = _patched(review, running.post("/mutate-jobs", review))
    # the size is untouched; the pods are told the topology key and that each carries the affinity terms
    assert job["spec"] == {**_object(review)["spec"], "template": job["spec"]["template"]}
    assert job["spec"]["template"]["metadata"]["annotations"] == {
        "exclusive-placement.io/topology": "topology.kubernetes.io/zone",
        "exclusive-placement.io/strategy": "affinity",
    }


def test_leader_pod_gets_labels_and_affinity(running: Running) -> None:
    review = fixture_review("leader-pod.json")
    pod = _patched(review, running.post("/mutate-pods", review))
    labels = pod["metadata"]["labels"]
    assert labels[ROLE_LABEL] == "leader"
    assert labels[JOB_KEY_LABEL] == labels["jobset.sigs.k8s.io/job-key"]
    assert pod["spec"]["affinity"]["podAffinity"][REQUIRED][0]["topologyKey"] == POOL
    assert pod["spec"]["affinity"]["podAntiAffinity"][REQUIRED][0]["namespaceSelector"] == {}
    validated = copy.deepcopy(review)
    validated["request"]["object"] = pod
    assert running.post("/validate-pods", validated)["response"]["allowed"] is True


@pytest.mark.parametrize("fixture", ["leader-pod.json", "follower-pod.json"])
def test_a_job_pod_another_user_creates_is_denied_on_both_passes(running: Running, fixture: str) -> None:
    """Only the Job controller creates a Job's pods (the fixtures' userInfo): a pod that claims a Job
    but comes from anyone else is orphaned by the Job controller, and its job-key label would hold its
    pool (issue 30, row 6)."""
    review = fixture_review(fixture)
    review["request"]["userInfo"] = {"username": "system:serviceaccount:team-a:tenant", "groups": []}
    for path in ("/mutate-pods", "/validate-pods"):
        response = _check_echo(review, running.post(path, review))
        assert response["allowed"] is False
        assert (
            "system:serviceaccount:team-a:tenant is not the Job controller" in response["status"]["message"]
        )
        assert "patch" not in response


def test_follower_pinned_from_cache_without_api_calls(running: Running) -> None:
    _seed_bound_leader(running)
    review = fixture_review("follower-pod.json")
    calls_before = running.api.api_calls()
    pod = _patched(review, running.post("/mutate-pods", review))
    assert pod["spec"]["nodeSelector"] == {POOL: "pool-a"}
    assert pod["metadata"]["labels"][ROLE_LABEL] == "follower"
    validated = copy.deepcopy(review)
    validated["request"]["object"] = pod
    assert running.post("/validate-pods", validated)["response"]["allowed"] is True
    assert running.api.api_calls() == calls_before
    metrics = running.client.get("/metrics").text
    assert 'exclusive_placement_leader_cache_total{result="hit"} 2.0' in metrics


def test_follower_of_unscheduled_leader_is_gated_and_an_ungated_one_rejected_with_the_reason(
    running: Running,
) -> None:
    """The mutation (one call per pod) creates an elastic follower whose leader it does not see bound behind
    the leader-scheduled gate, for the resizer to pin and release; /validate-pods, which still serves the
    check, denies the same pod without the gate, with the reason."""
    running.api.put("pods", leader_from_fixture(None))
    eventually(lambda: len(running.webhook.directory.pods.store) == 1, "the leader cached")
    review = fixture_review("follower-pod.json")
    pod = _patched(review, running.post("/mutate-pods", review))
    assert pod["spec"]["schedulingGates"] == [{"name": LEADER_SCHEDULED_GATE}]
    assert POOL not in (pod["spec"].get("nodeSelector") or {})
    response = running.post("/validate-pods", review)["response"]
    assert response["allowed"] is False
    assert response["status"]["code"] == 403
    assert "trainer-workers-0-0-x7k2p is not yet scheduled" in response["status"]["message"]
    assert "patch" not in response


def test_follower_whose_leader_node_vanished_is_rejected(running: Running) -> None:
    running.api.put("pods", leader_from_fixture("node-gone"))
    eventually(lambda: len(running.webhook.directory.pods.store) == 1, "the leader cached")
    review = fixture_review("follower-pod.json")
    response = running.post("/validate-pods", review)["response"]
    assert response["allowed"] is False
    assert "node node-gone, which no longer exists" in response["status"]["message"]


def test_non_exclusive_pod_is_allowed_without_patch(running: Running) -> None:
    review = fixture_review("non-exclusive-pod.json")
    for endpoint in ("/mutate-pods", "/validate-pods"):
        response = _check_echo(review, running.post(endpoint, review))
        assert response == {"uid": review["request"]["uid"], "allowed": True}


def test_non_create_operations_are_out_of_scope(running: Running) -> None:
    review = fixture_review("follower-pod.json")
    review["request"]["operation"] = "UPDATE"
    assert running.post("/validate-pods", review)["response"] == {
        "uid": review["request"]["uid"],
        "allowed": True,
    }


@pytest.mark.parametrize(
    ("fixture", "needle"),
    [("malformed-no-request.json", "no request"), ("malformed-not-json.json", "not JSON")],
)
def test_malformed_reviews_are_http_400(running: Running, fixture: str, needle: str) -> None:
    from tests.webhook.webhook_support import FIXTURES

    response = running.client.post(
        "/mutate-pods",
        content=(FIXTURES / fixture).read_bytes(),
        headers={"Content-Type": "application/json"},
    )
    assert response.status_code == 400
    assert needle in response.json()["error"]


def test_wrong_content_type_is_415(running: Running) -> None:
    response = running.client.post("/validate-pods", content=b"{}", headers={"Content-Type": "text/plain"})
    assert response.status_code == 415


def test_oversized_body_is_413(running: Running) -> None:
    body = b'{"pad": "' + b"x" * MAX_BODY_BYTES + b'"}'
    response = running.client.post("/mutate-pods", content=body, headers={"Content-Type": "application/json"})
    assert response.status_code == 413


class BrokenAdmission(Admission):
    """A handler with a bug: what the contract must still answer with the request's uid."""

    async def mutate_pods(self, request: AdmissionRequest) -> Handled:
        raise RuntimeError("injected: a bug in a handler")


def test_unexpected_error_keeps_uid_and_is_counted(running: Running) -> None:
    webhook = running.webhook
    broken = BrokenAdmission(Strategy.ELASTIC, webhook.directory, webhook.jobsets)
    metrics = Metrics()
    review = fixture_review("leader-pod.json")
    with AsgiClient(create_app(broken, webhook.directory, metrics, tls_loaded=lambda: True)) as client:
        answer = client.post("/mutate-pods", json=review)
        assert answer.status_code == 200
        response = _check_echo(review, answer.json())
        assert response["allowed"] is False
        assert response["status"]["code"] == 500
        assert "injected: a bug in a handler" in response["status"]["message"]
        assert 'exclusive_placement_errors_total{endpoint="mutate-pods"} 1.0' in client.get("/metrics").text


@pytest.mark.parametrize(
    ("path", "value", "why"),
    [
        (("spec",), "not-an-object", "request.object.spec must be an object"),
        (("metadata", "labels"), ["a"], "request.object.metadata.labels must map strings to strings"),
        (("metadata", "annotations"), {"a": ["b"]}, "metadata.annotations must map strings to strings"),
    ],
)
def test_an_object_the_api_server_could_not_have_sent_is_a_bad_request(
    running: Running, path: tuple[str, ...], value: object, why: str
) -> None:
    review = fixture_review("leader-pod.json")
    parent = review["request"]["object"]
    for step in path[:-1]:
        parent = parent[step]
    parent[path[-1]] = value
    answer = running.client.post("/mutate-pods", json=review)
    assert answer.status_code == 400
    assert why in answer.json()["error"]


def test_unknown_strategy_is_denied_naming_valid_values(running: Running) -> None:
    review = fixture_review("indexed-job.json")
    review["request"]["object"]["metadata"]["annotations"]["exclusive-placement.io/strategy"] = "fastest"
    response = running.post("/mutate-jobs", review)["response"]
    assert response["allowed"] is False
    assert "valid values: elastic, gate, scheduling-gate, affinity" in response["status"]["message"]


def test_health_endpoints(running: Running) -> None:
    assert running.client.get("/livez").text == "ok"
    assert running.client.get("/readyz").json() == {
        "ready": True,
        "certs": True,
        "caches": True,
        "admissions": True,
    }


def test_not_ready_until_caches_sync() -> None:
    # Nothing listens on port 9 (discard): the informers can never list.
    webhook = build(
        WebhookSettings(insecure_dev=True, server="http://127.0.0.1:9", request_timeout_seconds=1)
    )
    with AsgiClient(webhook.app) as client:
        assert client.get("/livez").status_code == 200
        ready = client.get("/readyz")
        assert ready.status_code == 503
        assert ready.json()["caches"] is False


def test_admission_log_lines_carry_uid_and_job(running: Running, caplog: pytest.LogCaptureFixture) -> None:
    _seed_bound_leader(running)
    review = fixture_review("follower-pod.json")
    with caplog.at_level("INFO", logger="webhook.handlers"):
        running.post("/mutate-pods", review)
    record = next(r for r in caplog.records if r.name == "webhook.handlers")
    assert record.getMessage() == "patched with 4 operations"
    assert record.__dict__["uid"] == review["request"]["uid"]
    assert record.__dict__["job"] == "team-a/trainer-workers-0"
    assert record.__dict__["object"] == "trainer-workers-0-1-"
    assert record.__dict__["reason"] == "follower-pinned"
