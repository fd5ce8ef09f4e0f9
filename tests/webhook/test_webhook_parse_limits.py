"""The webhook parses bounded work (issue 30, attack 5): reviews far beyond any real pod are refused early.

A review with more JSON objects and arrays than `MAX_REVIEW_CONTAINERS` gets a 413 before it is decoded; a
pod spec (a Pod's, a Job's template, a JobSet's templates) whose scheduling constraints exceed the term,
list, string or total limits gets a denial naming the field, before the rest of the review is walked. Real
pods, the largest of the fixtures, pass.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from tests.webhook.webhook_support import Running, fixture_review
from webhook.body import UID_SEARCH_BYTES, leading_uid
from webhook.limits import (
    MAX_LIST_ITEMS,
    MAX_REVIEW_CONTAINERS,
    MAX_SCHEDULING_NODES,
    MAX_SCHEDULING_TERMS,
    MAX_SELECTOR_EXPRESSIONS,
    MAX_STRING_BYTES,
    OverLimit,
    check_pod_spec,
)
from webhook.review import BadReview, ReviewOverLimit, parse_review

Obj = dict[str, Any]
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
PREFERRED = "preferredDuringSchedulingIgnoredDuringExecution"


def node_terms(terms: list[Obj]) -> Obj:
    return {"affinity": {"nodeAffinity": {REQUIRED: {"nodeSelectorTerms": terms}}}}


def expression(values: int = 1, key: str = "pool") -> Obj:
    return {"key": key, "operator": "In", "values": [f"v{i}" for i in range(values)]}


def pod_term(expressions: int = 1) -> Obj:
    return {
        "labelSelector": {"matchExpressions": [expression() for _ in range(expressions)]},
        "topologyKey": "pool",
    }


REAL = {
    "nodeSelector": {"cloud.google.com/gke-nodepool": "pool-a"},
    "schedulingGates": [{"name": "exclusive-placement.io/leader-scheduled"}],
    "topologySpreadConstraints": [
        {"maxSkew": 1, "topologyKey": "zone", "whenUnsatisfiable": "DoNotSchedule"}
    ],
    "affinity": {
        "nodeAffinity": {
            REQUIRED: {"nodeSelectorTerms": [{"matchExpressions": [expression(3)]}]},
            PREFERRED: [{"weight": 1, "preference": {"matchExpressions": [expression()]}}],
        },
        "podAffinity": {REQUIRED: [pod_term()]},
        "podAntiAffinity": {
            REQUIRED: [pod_term(3)],
            PREFERRED: [{"weight": 1, "podAffinityTerm": pod_term()}],
        },
    },
}

OVER: list[tuple[str, Obj, str]] = [
    ("nodeSelectorTerms", node_terms([{}] * (MAX_SCHEDULING_TERMS + 1)), "nodeSelectorTerms has 101 entries"),
    (
        "matchExpressions",
        node_terms([{"matchExpressions": [expression()] * (MAX_SELECTOR_EXPRESSIONS + 1)}]),
        "matchExpressions has 101 entries",
    ),
    (
        "values",
        node_terms([{"matchExpressions": [expression(MAX_LIST_ITEMS + 1)]}]),
        "values has 1001 entries",
    ),
    (
        "pod anti-affinity terms",
        {"affinity": {"podAntiAffinity": {REQUIRED: [pod_term()] * (MAX_SCHEDULING_TERMS + 1)}}},
        f"podAntiAffinity.{REQUIRED} has 101 entries",
    ),
    (
        "a long key",
        node_terms([{"matchExpressions": [expression(key="k" * (MAX_STRING_BYTES + 1))]}]),
        "a string of 4097 characters",
    ),
    (
        "nodeSelector entries",
        {"nodeSelector": {f"k{i}": "v" for i in range(MAX_SELECTOR_EXPRESSIONS + 1)}},
        "nodeSelector has 101 entries",
    ),
    (
        "values altogether",
        node_terms([{"matchExpressions": [expression(1000)] * 11}]),
        f"more than {MAX_SCHEDULING_NODES} values",
    ),
]


def test_a_real_pod_spec_is_within_the_limits() -> None:
    check_pod_spec(REAL, "spec")


@pytest.mark.parametrize(("what", "spec", "message"), OVER, ids=[case[0] for case in OVER])
def test_a_pod_spec_beyond_a_limit_is_refused_naming_it(what: str, spec: Obj, message: str) -> None:
    with pytest.raises(OverLimit, match=message):
        check_pod_spec(spec, "spec")


def review_with(kind_fixture: str, place: Callable[[Obj], Obj], spec: Obj) -> bytes:
    """A fixture review whose pod spec (found by `place`) also carries `spec`'s fields."""
    review = copy.deepcopy(fixture_review(kind_fixture))
    place(review["request"]["object"]).update(spec)
    return json.dumps(review).encode()


ABUSIVE = node_terms([{}] * (MAX_SCHEDULING_TERMS + 1))
PLACES: list[tuple[str, str, Callable[[Obj], Obj]]] = [
    ("a pod", "leader-pod.json", lambda obj: obj["spec"]),
    ("a Job's template", "indexed-job.json", lambda obj: obj["spec"]["template"]["spec"]),
]


@pytest.mark.parametrize(("what", "fixture", "place"), PLACES, ids=[place[0] for place in PLACES])
def test_parse_review_refuses_an_abusive_pod_spec_with_the_uid(
    what: str, fixture: str, place: Callable[[Obj], Obj]
) -> None:
    body = review_with(fixture, place, ABUSIVE)
    with pytest.raises(ReviewOverLimit, match="nodeSelectorTerms has 101 entries") as refused:
        parse_review(body)
    assert refused.value.uid == fixture_review(fixture)["request"]["uid"]
    assert parse_review(review_with(fixture, place, REAL))["request"]["uid"] == refused.value.uid


def test_a_jobsets_templates_are_checked_too() -> None:
    template = {"spec": {"template": {"spec": {"containers": [{"name": "c"}], **ABUSIVE}}}}
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": "u-1",
            "kind": {"group": "jobset.x-k8s.io", "version": "v1alpha2", "kind": "JobSet"},
            "operation": "UPDATE",
            "object": {"metadata": {"name": "js"}, "spec": {"replicatedJobs": [{"template": {"spec": {}}}]}},
            "oldObject": {"metadata": {"name": "js"}, "spec": {"replicatedJobs": [{"template": template}]}},
        },
    }
    with pytest.raises(ReviewOverLimit, match=r"replicatedJobs\[0\].template.spec.template.spec"):
        parse_review(json.dumps(review).encode())


def test_the_webhook_denies_an_abusive_pod_and_still_admits_the_next(running: Running) -> None:
    for endpoint in ("/mutate-pods", "/validate-pods"):
        body = review_with("leader-pod.json", lambda obj: obj["spec"], ABUSIVE)
        response = running.client.post(endpoint, content=body, headers={"Content-Type": "application/json"})
        assert response.status_code == 200
        answer = response.json()["response"]
        assert answer["allowed"] is False
        assert "nodeSelectorTerms has 101 entries" in answer["status"]["message"]
        assert running.post(endpoint, fixture_review("leader-pod.json"))["response"]["allowed"] is True


def flooded(review: Obj) -> bytes:
    """`review` with one more JSON object than the webhook parses, in its pod spec."""
    review["request"]["object"]["spec"]["x"] = "FILL"
    fill = b"[" + b",".join([b"{}"] * MAX_REVIEW_CONTAINERS) + b"]"
    return json.dumps(review).encode().replace(b'"FILL"', fill)


def test_a_review_of_too_many_json_objects_is_denied_before_it_is_decoded(running: Running) -> None:
    review = fixture_review("leader-pod.json")
    response = running.client.post(
        "/mutate-pods", content=flooded(review), headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 200
    answer = response.json()["response"]
    assert (answer["uid"], answer["allowed"], answer["status"]["code"]) == (
        review["request"]["uid"],
        False,
        413,
    )
    assert f"more than the {MAX_REVIEW_CONTAINERS}" in answer["status"]["message"]


def test_without_a_uid_in_its_first_bytes_it_gets_a_413(running: Running) -> None:
    review = fixture_review("leader-pod.json")
    review["request"] = {"padding": "p" * UID_SEARCH_BYTES, **review["request"]}
    response = running.client.post(
        "/mutate-pods", content=flooded(review), headers={"Content-Type": "application/json"}
    )
    assert response.status_code == 413
    assert f"more than the {MAX_REVIEW_CONTAINERS}" in response.json()["error"]


def test_the_uid_is_read_off_the_first_bytes() -> None:
    body = json.dumps(fixture_review("leader-pod.json")).encode()
    assert leading_uid(body) == fixture_review("leader-pod.json")["request"]["uid"]
    assert leading_uid(b'{"kind":"AdmissionReview"}') is None


def _review_nesting(levels: int, *, wide: int) -> bytes:
    """A pod review whose deepest JSON container is `levels` deep (the review itself is level 1), with
    `wide` more shallow objects beside it, so that the body counts more containers than the depth limit."""
    review = fixture_review("leader-pod.json")
    review["request"]["object"]["metadata"]["managedFields"] = [{"fieldsV1": {}} for _ in range(wide)]
    review["request"]["object"]["spec"]["x"] = "NEST"
    nested = levels - 4  # the review, its request, the pod and its spec hold the first four levels
    return json.dumps(review).encode().replace(b'"NEST"', b"[" * nested + b"]" * nested)


@pytest.mark.parametrize("wide", [0, 200])
def test_a_review_nested_to_the_depth_limit_parses_one_level_more_does_not(wide: int) -> None:
    parse_review(_review_nesting(100, wide=wide))
    with pytest.raises(BadReview, match="deeper than 100 levels"):
        parse_review(_review_nesting(101, wide=wide))
