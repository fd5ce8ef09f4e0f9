"""The AdmissionReview fixtures of the README's curl session (tests/fixtures/admission), created for real.

Each fixture's object is posted twice in a row on the same cluster state: to the webhook directly, as the
curl session does, and through kube-apiserver, as a client would create it. The real API server must take
the object (the fixtures are valid objects), reach the same decision, and store what the webhook's patch
wrote. A pod fixture whose review's user is the Job controller is created as the Job controller: the webhook
denies an exclusive pod of a Job that anyone else creates, and on the policy path the Job controller's pods
are the policies'.
JobSet's own
webhooks act on the JobSet pods too (the pod fixtures carry JobSet's annotation, as
pods of Jobs admitted without the takeover do), so what the webhook adds must be found in the stored
object, next to what JobSet adds. Every node is tainted, so the leader stays unscheduled and the follower's
answer (gated by the webhook, then denied by JobSet's webhook) does not change between the two posts.
"""

from __future__ import annotations

import base64
import copy
import json
import ssl
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import jsonpatch
import pytest

from devstack.stack import Stack
from devstack.webhooks import POD_ADMISSION_PATHS
from kubekit.client import KubeError
from placement.admission import DEFAULT_JOB_CONTROLLER_USERNAMES
from placement.constants import LEADER_SCHEDULED_GATE, ROLE_LABEL
from tests.kube.conftest import stack_on_each_path
from tests.kube.kube_support import create_namespace
from tests.kube.workloads import set_taint

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-fixtures")]


@pytest.fixture(scope="module", params=POD_ADMISSION_PATHS)
def kube_stack(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    yield from stack_on_each_path(request, tmp_path_factory)


FIXTURES = Path(__file__).resolve().parents[1] / "fixtures" / "admission"
OBJECT_FIXTURES = (
    "jobset-child-job.json",
    "indexed-job.json",
    "nonindexed-job.json",
    "leader-pod.json",
    "follower-pod.json",
    "non-exclusive-pod.json",
)
JOBSET_VALIDATING_POD_WEBHOOK = "vpod.kb.io"
HOLD = {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}
Obj = dict[str, Any]


def review(name: str) -> Obj:
    data: Obj = json.loads((FIXTURES / name).read_text())
    return data


def endpoints(kind: str) -> tuple[str, ...]:
    return ("/mutate-pods", "/validate-pods") if kind == "Pod" else ("/mutate-jobs",)


def curl_decision(stack: Stack, fixture: Obj) -> tuple[bool, str, Obj]:
    """What the webhook answers when the fixture is posted to it directly: (allowed, message, object as
    the webhook's patches leave it)."""
    obj = copy.deepcopy(fixture["request"]["object"])
    trust = ssl.create_default_context(cafile=str(stack.ca_file))
    with httpx.Client(base_url=stack.webhook_url, verify=trust, timeout=10) as client:
        for path in endpoints(obj["kind"]):
            body = copy.deepcopy(fixture)
            body["request"]["object"] = obj
            response = client.post(path, json=body).json()["response"]
            if not response["allowed"]:
                return False, str(response.get("status", {}).get("message", "")), obj
            if "patch" in response:
                obj = jsonpatch.apply_patch(obj, json.loads(base64.b64decode(response["patch"])))
    return True, "", obj


def contains(actual: Any, expected: Any) -> bool:
    """`expected` is found in `actual`: every key of a dict, every element of a list, equal scalars."""
    if isinstance(expected, dict):
        return isinstance(actual, dict) and all(
            k in actual and contains(actual[k], v) for k, v in expected.items()
        )
    if isinstance(expected, list):
        return isinstance(actual, list) and all(any(contains(a, e) for a in actual) for e in expected)
    return bool(actual == expected)


def written_by_webhook(before: Obj, after: Obj) -> Obj:
    """The parts of `after` the webhook's patches added or changed (metadata and spec)."""
    written: Obj = {}
    for key in ("metadata", "spec"):
        diff = {k: v for k, v in after.get(key, {}).items() if before.get(key, {}).get(k) != v}
        if key == "metadata":
            for field in ("labels", "annotations"):
                old, new = before[key].get(field) or {}, after[key].get(field) or {}
                changed = {k: v for k, v in new.items() if old.get(k) != v}
                if changed:
                    diff[field] = changed
        if diff:
            written[key] = diff
    return written


def creator(fixture: Obj) -> str | None:
    """Whom a fixture is created as through kube-apiserver: the Job controller for the pods its review says
    it creates (the webhook denies a Job's pod anyone else creates), else the admin (the fixtures' other
    users have no RBAC on this cluster, and the webhook judges no other object by its creator)."""
    username = str(fixture["request"]["userInfo"]["username"])
    return username if username in DEFAULT_JOB_CONTROLLER_USERNAMES else None


def api_server_decision(stack: Stack, obj: Obj, as_user: str | None) -> tuple[bool, str, Obj]:
    """(created, the refusal's message, the stored object) when `obj` is created through kube-apiserver."""
    try:
        return True, "", stack.client.create(copy.deepcopy(obj), as_user=as_user)
    except KubeError as err:
        if err.status != 403:
            raise
        return False, str(err), {}


@pytest.fixture(scope="module")
def held(kube_stack: Stack) -> Iterator[str]:
    """The fixtures' namespace, with every node tainted: no pod is scheduled while the fixtures run."""
    namespace = review(OBJECT_FIXTURES[0])["request"]["namespace"]
    create_namespace(kube_stack, namespace)
    nodes = [node["metadata"]["name"] for node in kube_stack.client.list("Node")]
    set_taint(kube_stack, nodes, HOLD)
    yield namespace
    set_taint(kube_stack, nodes, None)


EXPECTED_DECISIONS = {"non-exclusive-pod.json": True}
"""The decisions the README's curl session shows; the others are whatever the webhook says, alike."""


@pytest.mark.parametrize("name", OBJECT_FIXTURES)
def test_a_fixture_is_decided_alike_by_curl_and_by_the_real_api_server(
    kube_stack: Stack, held: str, name: str
) -> None:
    fixture = review(name)
    allowed, message, patched = curl_decision(kube_stack, fixture)
    original = fixture["request"]["object"]
    created, refusal, stored = api_server_decision(kube_stack, original, creator(fixture))
    if name == "follower-pod.json":
        # The webhook gates the follower whose leader it does not see bound (the resizer would release
        # it); JobSet's own pod webhook, acting on a pod that carries JobSet's annotation (no takeover for a
        # pod created directly), then denies it: the follower is never created unpinned and ungated.
        assert allowed, message
        assert patched["spec"]["schedulingGates"] == [{"name": LEADER_SCHEDULED_GATE}]
        assert not created
        assert JOBSET_VALIDATING_POD_WEBHOOK in refusal, refusal
        return
    assert created == allowed, (
        f"{name}: webhook allowed={allowed} ({message}); API server: {refusal or 'created'}"
    )
    if name in EXPECTED_DECISIONS:
        assert allowed == EXPECTED_DECISIONS[name]
    policies = (
        original["kind"] == "Pod" and creator(fixture) and kube_stack.options.pod_admission_path == "policy"
    )
    if created and policies:
        # The Job controller's pods are the policies' on this path: they write their own key (the Job's
        # uid) where the webhook writes JobSet's hash; test_kube_pod_policies compares what both write.
        assert stored["metadata"]["labels"][ROLE_LABEL] == patched["metadata"]["labels"][ROLE_LABEL]
    elif created:
        expected = written_by_webhook(original, patched)
        assert contains(stored, expected), f"{name}: stored {stored} lacks the webhook's {expected}"
    else:  # the API server reports the first denial: ours, or JobSet's for a pod that carries its annotation
        assert message in refusal or JOBSET_VALIDATING_POD_WEBHOOK in refusal, f"{name}: {refusal}"
