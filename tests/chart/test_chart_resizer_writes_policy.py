"""The policies bounding what the resizer's ServiceAccount may write (SECURITY.md, "A compromised resizer").

Their CEL is evaluated by a CEL interpreter on the requests the resizer's own code makes (the patches of
`placement.resize` and `placement.gang`, applied to real-shaped objects) and on the attacks of issue 30 (a
container image, `status.podIP`); the real API server runs them in tests/kube/test_kube_resizer_rights.py.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from placement.constants import (
    ALL_OR_NOTHING_GATE,
    DISRUPTION_TARGET_CONDITION,
    GKE_NODEPOOL_LABEL,
    LEADER_DOMAIN_ANNOTATION,
    LEADER_SCHEDULED_GATE,
    PIN_FOLLOWERS,
    PIN_FOLLOWERS_LABEL,
    TARGET_COMPLETIONS_ANNOTATION,
    TOPOLOGY_ANNOTATION,
)
from placement.gang import release_patch
from placement.patch import apply
from placement.resize import decide_gate_release, decide_resize, violation_condition
from placement.retire import decide_retire
from tests.chart.cel_evaluation import all_true
from tests.chart.chart_rendering import NAMESPACE, Obj, named, of_component, of_kind, render
from tests.support.builders import make_job, make_node, make_pod

NOW = "2026-01-01T00:00:00Z"
POOL = "pool-a"


@pytest.fixture(scope="module")
def objects(mode_values: dict[str, Obj]) -> list[Obj]:
    return render(mode_values["generate"])


@pytest.fixture(scope="module")
def resizer(objects: list[Obj]) -> str:
    account = of_component(objects, "Deployment", "resizer")["spec"]["template"]["spec"]["serviceAccountName"]
    return f"system:serviceaccount:{NAMESPACE}:{account}"


Check = Callable[..., bool]


def checker(policy: Obj) -> Check:
    """`check(old, new, operation)`: whether the policy admits that request of the resizer (its matchCondition
    holds for the resizer alone, checked separately)."""
    spec = policy["spec"]
    variables = [(v["name"], v["expression"]) for v in spec.get("variables", [])]
    validations = [v["expression"] for v in spec["validations"]]

    def check(old: Obj | None, new: Obj | None, operation: str = "UPDATE") -> bool:
        return all_true(
            validations,
            {"object": new, "oldObject": old, "request": {"operation": operation}},
            composed=variables,
        )

    return check


@pytest.fixture(scope="module")
def pods(objects: list[Obj]) -> Check:
    return checker(named(objects, "ValidatingAdmissionPolicy", "-resizer-pods"))


@pytest.fixture(scope="module")
def jobs(objects: list[Obj]) -> Check:
    return checker(named(objects, "ValidatingAdmissionPolicy", "-resizer-jobs"))


def changed(obj: Obj, change: Callable[[Obj], Any]) -> Obj:
    result = copy.deepcopy(obj)
    change(result)
    return result


def with_condition(pod: Obj, condition: Obj) -> Obj:
    """`pod` after a strategic merge patch of one status condition (conditions merge by type)."""
    result = copy.deepcopy(pod)
    conditions = [c for c in result["status"].get("conditions", []) if c["type"] != condition["type"]]
    result["status"]["conditions"] = [*conditions, condition]
    return result


LEADER = (
    make_pod("train-0-0", "team-b")
    .owned_by("train-0", "job-uid")
    .index(0)
    .topology(GKE_NODEPOOL_LABEL, TOPOLOGY_ANNOTATION)
    .node("node-1")
    .obj()
)
NODE = make_node("node-1").label(GKE_NODEPOOL_LABEL, POOL).obj()
FOLLOWER = (
    make_pod("train-0-1", "team-b")
    .owned_by("train-0", "job-uid")
    .index(1)
    .topology(GKE_NODEPOOL_LABEL, TOPOLOGY_ANNOTATION)
    .gated()
    .obj()
)
GATED_LEADER = (
    make_pod("train-0-0", "team-b")
    .owned_by("train-0", "job-uid")
    .index(0)
    .topology(GKE_NODEPOOL_LABEL, TOPOLOGY_ANNOTATION)
    .gated(ALL_OR_NOTHING_GATE)
    .obj()
)
RUNNING = changed(
    make_pod("web-0", "team-b").node("node-7").phase("Running").condition("Ready").obj(),
    lambda p: p["status"].update(podIP="10.0.0.7", podIPs=[{"ip": "10.0.0.7"}]),
)


def released_follower() -> Obj:
    release = decide_gate_release(FOLLOWER, LEADER, NODE, gang=None)
    assert release.patch is not None
    return apply(FOLLOWER, release.patch)


def test_the_policies_act_on_the_resizer_alone(objects: list[Obj], resizer: str) -> None:
    for suffix in ("-resizer-pods", "-resizer-jobs"):
        policy = named(objects, "ValidatingAdmissionPolicy", suffix)
        conditions = [c["expression"] for c in policy["spec"]["matchConditions"]]
        assert all_true(conditions, {"request": {"userInfo": {"username": resizer}}}) is True
        other = {"request": {"userInfo": {"username": "system:serviceaccount:team-b:default"}}}
        assert all_true(conditions, other) is False
        binding = named(objects, "ValidatingAdmissionPolicyBinding", suffix)
        assert binding["spec"] == {"policyName": policy["metadata"]["name"], "validationActions": ["Deny"]}


def test_releasing_a_gated_follower_into_its_leaders_domain_is_allowed(pods: Check) -> None:
    released = released_follower()
    assert released["spec"]["nodeSelector"] == {GKE_NODEPOOL_LABEL: POOL}
    assert pods(FOLLOWER, released) is True


def test_releasing_an_all_or_nothing_leader_is_allowed(pods: Check) -> None:
    patch = release_patch(GATED_LEADER, NOW)
    assert patch is not None
    assert pods(GATED_LEADER, apply(GATED_LEADER, patch)) is True


def test_its_disruption_target_condition_is_allowed(pods: Check) -> None:
    condition = violation_condition("team-b/train-0", "pool-b", "train-0-0", POOL, NOW)
    assert pods(FOLLOWER, with_condition(FOLLOWER, condition)) is True
    evicted = with_condition(RUNNING, {"type": DISRUPTION_TARGET_CONDITION, "status": "True", "reason": "x"})
    assert pods(evicted, with_condition(evicted, condition)) is True  # replaces an earlier one


def test_deleting_an_exclusive_pod_is_allowed_and_any_other_denied(pods: Check) -> None:
    assert pods(FOLLOWER, None, "DELETE") is True
    assert pods(RUNNING, None, "DELETE") is False


ATTACKS: list[tuple[str, Obj, Callable[[Obj], Any]]] = [
    ("container image", RUNNING, lambda p: p["spec"]["containers"][0].update(image="evil:latest")),
    ("status.podIP", RUNNING, lambda p: p["status"].update(podIP="10.9.9.9", podIPs=[{"ip": "10.9.9.9"}])),
    ("a label", RUNNING, lambda p: p["metadata"].setdefault("labels", {}).update(app="evil")),
    ("an annotation", RUNNING, lambda p: p["metadata"].setdefault("annotations", {}).update(x="y")),
    ("an ownerReference", FOLLOWER, lambda p: p["metadata"].pop("ownerReferences")),
    ("tolerations", FOLLOWER, lambda p: p["spec"].update(tolerations=[{"operator": "Exists"}])),
    ("activeDeadlineSeconds", RUNNING, lambda p: p["spec"].update(activeDeadlineSeconds=1)),
    (
        "a nodeSelector of a pod not gated on its leader",
        RUNNING,
        lambda p: p["spec"].update(nodeSelector={"a": "b"}),
    ),
    (
        "a follower's nodeSelector entry changed",
        changed(FOLLOWER, lambda p: p["spec"].update(nodeSelector={"a": "b"})),
        lambda p: p["spec"]["nodeSelector"].update(a="c"),
    ),
    (
        "another's scheduling gate",
        changed(FOLLOWER, lambda p: p["spec"]["schedulingGates"].append({"name": "example.com/quota"})),
        lambda p: p["spec"].update(schedulingGates=[{"name": LEADER_SCHEDULED_GATE}]),
    ),
    (
        "released-at on a pod without the all-or-nothing gate",
        FOLLOWER,
        lambda p: p["metadata"]["annotations"].update({"exclusive-placement.io/released-at": NOW}),
    ),
    ("the Ready condition", RUNNING, lambda p: p["status"]["conditions"][0].update(status="False")),
    (
        "a DisruptionTarget of another reason",
        RUNNING,
        lambda p: p["status"]["conditions"].append(
            {"type": DISRUPTION_TARGET_CONDITION, "status": "True", "reason": "Evil"}
        ),
    ),
    ("the phase", RUNNING, lambda p: p["status"].update(phase="Failed")),
]


@pytest.mark.parametrize(("what", "pod", "change"), ATTACKS, ids=[a[0] for a in ATTACKS])
def test_any_other_change_of_a_pod_is_denied(
    pods: Check, what: str, pod: Obj, change: Callable[[Obj], Any]
) -> None:
    assert pods(pod, changed(pod, change)) is False, what


def test_a_gate_release_that_also_changes_the_image_is_denied(pods: Check) -> None:
    released = released_follower()
    released["spec"]["containers"][0]["image"] = "evil:latest"
    assert pods(FOLLOWER, released) is False


def test_fields_the_api_server_sets_on_every_write_may_differ(pods: Check) -> None:
    released = released_follower()
    released["metadata"].update(resourceVersion="2", generation=2, managedFields=[{"manager": "resizer"}])
    assert pods(FOLLOWER, released) is True


JOB = make_job("train-0", "team-b").indexed(1).pending(4).obj()


def resized(job: Obj) -> Obj:
    """`job` after the resizer's one patch: sizes, the resize label, the leader's domain."""
    decision = decide_resize(job, LEADER, gang=None, node=NODE)
    assert decision.patch is not None
    return apply(job, decision.patch)


def test_resizing_a_job_is_allowed(jobs: Check) -> None:
    after = resized(JOB)
    assert after["metadata"]["annotations"][LEADER_DOMAIN_ANNOTATION] == POOL  # what the pod policies read
    assert after["metadata"]["labels"][PIN_FOLLOWERS_LABEL] == PIN_FOLLOWERS  # what their binding selects
    assert jobs(JOB, after) is True


def test_retiring_a_finished_job_from_the_follower_policys_params_is_allowed(jobs: Check) -> None:
    finished = changed(
        resized(JOB), lambda j: j.update(status={"conditions": [{"type": "Complete", "status": "True"}]})
    )
    finished["metadata"]["uid"] = "job-uid"
    decision = decide_retire(finished)
    assert decision.patch is not None
    assert jobs(finished, apply(finished, decision.patch)) is True


def test_suspending_an_exclusive_job_is_allowed_and_resuming_denied(jobs: Check) -> None:
    suspended = changed(JOB, lambda j: j["spec"].update(suspend=True))
    assert jobs(JOB, suspended) is True
    assert jobs(suspended, JOB) is False
    plain = make_job("web", "team-b").indexed(1).obj()
    assert jobs(plain, changed(plain, lambda j: j["spec"].update(suspend=True))) is False


JOB_ATTACKS: list[tuple[str, Callable[[Obj], Any]]] = [
    ("backoffLimit", lambda j: j["spec"].update(backoffLimit=100)),
    ("activeDeadlineSeconds", lambda j: j["spec"].update(activeDeadlineSeconds=1)),
    ("the pod template", lambda j: j["spec"]["template"]["spec"].update(nodeSelector={"a": "b"})),
    (
        "a target annotation",
        lambda j: j["metadata"]["annotations"].update({TARGET_COMPLETIONS_ANNOTATION: "9"}),
    ),
    ("another label", lambda j: j["metadata"]["labels"].update(team="evil")),
    ("another annotation", lambda j: j["metadata"]["annotations"].update(note="evil")),
]


@pytest.mark.parametrize(("what", "change"), JOB_ATTACKS, ids=[a[0] for a in JOB_ATTACKS])
def test_any_other_change_of_a_job_is_denied(jobs: Check, what: str, change: Callable[[Obj], Any]) -> None:
    assert jobs(JOB, changed(resized(JOB), change)) is False, what


def test_disabled_renders_no_policy(mode_values: dict[str, Obj]) -> None:
    values = mode_values["generate"] | {"resizer": {"writesPolicy": {"enabled": False}}}
    names = [o["metadata"]["name"] for o in of_kind(render(values), "ValidatingAdmissionPolicy")]
    assert not [name for name in names if "-resizer-" in name]
