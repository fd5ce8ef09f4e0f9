"""The webhook with JobSet installed, over ASGI against the fake API server: the owning JobSet's startup
order (read once per JobSet), the takeover of JobSet's annotation, JobSet's node-selector mode, and the
follower checks JobSet's own webhook makes (no owner, several leaders)."""

from __future__ import annotations

from typing import Any

import pytest

from placement.constants import (
    ALL_OR_NOTHING_ANNOTATION,
    ALL_OR_NOTHING_GATE,
    GANG_QUEUED_AT_ANNOTATION,
    GANG_SIZE_ANNOTATION,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    JOBSET_JOB_KEY_LABEL,
    JOBSET_NODE_SELECTOR_ANNOTATION,
    LEADER_SCHEDULED_GATE,
    RESIZE_LABEL,
    STRATEGY_ANNOTATION,
    TOPOLOGY_ANNOTATION,
)
from placement.objects import job_key
from placement.patch import apply
from tests.support.asgi import AsgiClient
from tests.support.fake_api import FakeKubeApi
from tests.support.metrics import sample
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
from webhook.review import decode_patch
from webhook.server import build


def admit(running: Running, endpoint: str, review: dict[str, Any]) -> tuple[dict[str, Any], dict[str, Any]]:
    """(response, the object with the patch applied)."""
    answer = running.post(endpoint, review)
    obj = review["request"]["object"]
    patched = apply(obj, decode_patch(answer)) if "patch" in answer["response"] else obj  # type: ignore[arg-type]
    return answer["response"], patched


def child_job_review(name: str = "trainer-workers-0") -> dict[str, Any]:
    """The fixture's child Job renamed, with the job-key JobSet would give it."""
    review = fixture_review("jobset-child-job.json")
    job = review["request"]["object"]
    job["metadata"]["name"] = name
    for labels in (job["metadata"]["labels"], job["spec"]["template"]["metadata"]["labels"]):
        labels[JOBSET_JOB_KEY_LABEL] = job_key(review["request"]["namespace"], name)
    return review


def metric(running: Running, result: str) -> float:
    return sample(running.webhook.metrics.registry, "exclusive_placement_jobset_lookups_total", result=result)


# --- the owning JobSet's startup order ------------------------------------------------------------------


def test_a_jobset_is_read_once_for_all_its_child_jobs(running: Running) -> None:
    running.api.put("jobsets", jobset_of_fixture())
    for name in ("trainer-workers-0", "trainer-workers-1"):
        response, job = admit(running, "/mutate-jobs", child_job_review(name))
        assert response["allowed"] is True
        assert (job["spec"]["completions"], job["metadata"]["labels"][RESIZE_LABEL]) == (1, "pending")
    assert running.api.requests["get"] == 1
    assert (metric(running, "live"), metric(running, "memory")) == (1, 1)


@pytest.mark.parametrize(
    ("spec", "needle"),
    [
        ({"startupPolicy": {"startupPolicyOrder": "InOrder"}}, "startupPolicy InOrder"),
        (
            {
                "replicatedJobs": [
                    {"name": "workers", "replicas": 2},
                    {"name": "driver", "dependsOn": [{"name": "workers", "status": "Ready"}]},
                ]
            },
            "'workers' is a dependsOn (status Ready)",
        ),
    ],
    ids=["InOrder", "dependsOn Ready"],
)
def test_a_child_job_whose_readiness_starts_others_keeps_its_size(
    running: Running, spec: dict[str, Any], needle: str
) -> None:
    running.api.put("jobsets", jobset_of_fixture(spec))
    review = child_job_review()
    response, job = admit(running, "/mutate-jobs", review)
    assert job["spec"]["completions"] == review["request"]["object"]["spec"]["completions"]
    assert job["spec"]["template"]["metadata"]["annotations"][STRATEGY_ANNOTATION] == "gate"
    (warning,) = response["warnings"]
    assert needle in warning
    assert "using gate" in warning


def test_an_unreadable_jobset_means_no_shrink_and_is_not_remembered(running: Running) -> None:
    response, job = admit(running, "/mutate-jobs", child_job_review())
    assert job["spec"]["completions"] == 4
    assert "could not be read (404 NotFound" in response["warnings"][0]
    assert metric(running, "not_found") == 1
    running.api.put("jobsets", jobset_of_fixture())  # created meanwhile: read again, and shrunk
    _, job = admit(running, "/mutate-jobs", child_job_review())
    assert job["spec"]["completions"] == 1


def test_a_jobset_of_another_uid_is_not_the_owner(running: Running) -> None:
    recreated = jobset_of_fixture()
    recreated["metadata"]["uid"] = "a-newer-jobset"
    running.api.put("jobsets", recreated)
    response, job = admit(running, "/mutate-jobs", child_job_review())
    assert job["spec"]["completions"] == 4
    assert "the Job is owned by uid" in response["warnings"][0]


# --- taking JobSet's annotation over ---------------------------------------------------------------------


@pytest.mark.parametrize("strategy", ["elastic", "gate", "scheduling-gate", "affinity"])
def test_the_child_jobs_pod_template_loses_jobsets_annotation(running: Running, strategy: str) -> None:
    running.api.put("jobsets", jobset_of_fixture())
    review = child_job_review()
    review["request"]["object"]["spec"]["template"]["metadata"]["annotations"][STRATEGY_ANNOTATION] = strategy
    _, job = admit(running, "/mutate-jobs", review)
    annotations = job["spec"]["template"]["metadata"]["annotations"]
    assert JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION not in annotations
    assert annotations[TOPOLOGY_ANNOTATION] == POOL


def test_the_takeover_can_be_turned_off(fake_api: FakeKubeApi) -> None:
    fake_api.put("jobsets", jobset_of_fixture())
    webhook = build(settings_for(fake_api.url, jobset_takeover=False))
    with AsgiClient(webhook.app) as client:
        eventually(lambda: client.get("/readyz").status_code == 200, "the webhook ready")
        review = child_job_review()
        answer = client.post("/mutate-jobs", json=review).json()
        job = apply(review["request"]["object"], decode_patch(answer))
    annotations = job["spec"]["template"]["metadata"]["annotations"]
    assert annotations[JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION] == POOL
    assert TOPOLOGY_ANNOTATION not in annotations
    assert job["spec"]["completions"] == 1


# --- all-or-nothing -------------------------------------------------------------------------------------


def all_or_nothing_jobset(annotation: str | None) -> dict[str, Any]:
    jobset = jobset_of_fixture()
    jobset["metadata"]["annotations"] = {JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: POOL}
    if annotation is not None:
        jobset["metadata"]["annotations"][ALL_OR_NOTHING_ANNOTATION] = annotation
    jobset["metadata"]["creationTimestamp"] = "2026-05-01T10:00:00Z"
    return jobset


@pytest.mark.parametrize(
    ("annotation", "default", "expected"),
    [("true", False, True), (None, True, True), ("false", True, False), (None, False, False)],
    ids=["annotated", "default on", "opted out", "default off"],
)
def test_an_all_or_nothing_jobset_gates_the_leaders_of_its_jobs(
    fake_api: FakeKubeApi, annotation: str | None, default: bool, expected: bool
) -> None:
    fake_api.put("jobsets", all_or_nothing_jobset(annotation))
    webhook = build(settings_for(fake_api.url, all_or_nothing=default))
    with AsgiClient(webhook.app) as client:
        eventually(lambda: client.get("/readyz").status_code == 200, "the webhook ready")
        jobs = []
        for name in ("trainer-workers-0", "trainer-workers-1"):
            review = child_job_review(name)
            review["request"]["object"]["spec"]["template"]["metadata"]["annotations"][
                STRATEGY_ANNOTATION
            ] = "gate"
            jobs.append(
                apply(
                    review["request"]["object"], decode_patch(client.post("/mutate-jobs", json=review).json())
                )
            )
        leader = fixture_review("leader-pod.json")
        pod = leader["request"]["object"]
        pod["metadata"]["labels"].update(jobs[0]["metadata"]["labels"])
        pod["metadata"]["annotations"].update(jobs[0]["spec"]["template"]["metadata"]["annotations"])
        answer = client.post("/mutate-pods", json=leader).json()
    assert fake_api.requests["get"] == 1  # one read of the JobSet for both Jobs, whatever their strategy
    template = jobs[1]["spec"]["template"]["metadata"]["annotations"]
    if expected:
        assert (template[ALL_OR_NOTHING_ANNOTATION], template[GANG_SIZE_ANNOTATION]) == ("true", "2")
        assert template[GANG_QUEUED_AT_ANNOTATION] == "2026-05-01T10:00:00Z"
    else:
        assert ALL_OR_NOTHING_ANNOTATION not in template
    gated = apply(pod, decode_patch(answer))["spec"].get("schedulingGates") or []
    assert ({"name": ALL_OR_NOTHING_GATE} in gated) is expected


# --- pods: JobSet's node-selector mode, no owner, two leaders ---------------------------------------------


def test_node_selector_mode_pods_are_left_alone(running: Running) -> None:
    for fixture in ("leader-pod.json", "follower-pod.json"):
        review = fixture_review(fixture)
        review["request"]["object"]["metadata"]["annotations"][JOBSET_NODE_SELECTOR_ANNOTATION] = "true"
        for endpoint in ("/mutate-pods", "/validate-pods"):
            response, _ = admit(running, endpoint, review)
            assert response["allowed"] is True
            assert "patch" not in response


def test_a_follower_without_a_job_is_denied(running: Running) -> None:
    review = fixture_review("follower-pod.json")
    meta = review["request"]["object"]["metadata"]
    del meta["ownerReferences"]
    meta["labels"] = {}
    for endpoint in ("/mutate-pods", "/validate-pods"):
        response, _ = admit(running, endpoint, review)
        assert response["allowed"] is False
        assert "has no owning Job" in response["status"]["message"]


def test_two_leaders_in_different_domains_gate_the_follower_and_deny_it_ungated_as_transient(
    running: Running,
) -> None:
    running.api.put("nodes", node_obj("node-1", "pool-a"))
    running.api.put("nodes", node_obj("node-2", "pool-b"))
    running.api.put("pods", leader_from_fixture("node-1"))
    duplicate = leader_from_fixture("node-2")
    duplicate["metadata"]["name"] += "-dup"
    running.api.put("pods", duplicate)
    eventually(
        lambda: (
            len(running.webhook.directory.pods.store) == 2 and len(running.webhook.directory.nodes.store) == 2
        ),
        "both leaders and their nodes cached",
    )
    review = fixture_review("follower-pod.json")
    response, pod = admit(running, "/mutate-pods", review)
    assert POOL not in (pod["spec"].get("nodeSelector") or {})
    assert pod["spec"]["schedulingGates"] == [{"name": LEADER_SCHEDULED_GATE}]  # the resizer waits too
    response, _ = admit(running, "/validate-pods", review)
    assert response["allowed"] is False
    message = response["status"]["message"]
    assert "two live leader pods of this Job are bound in different domains" in message
    assert "expected and transient" in message
