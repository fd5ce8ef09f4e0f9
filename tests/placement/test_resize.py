"""Table-driven tests of the resizer's pure decisions (placement/resize.py)."""

from __future__ import annotations

import copy
from typing import Any

import jsonpatch
import pytest

from placement.constants import (
    ALL_OR_NOTHING_ANNOTATION,
    GANG_SIZE_ANNOTATION,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    JOBSET_NAME_LABEL,
    JOBSET_RESTART_ATTEMPT_LABEL,
    LEADER_DOMAIN_ANNOTATION,
    LEADER_SCHEDULED_GATE,
    PIN_FOLLOWERS,
    PIN_FOLLOWERS_LABEL,
    RESIZE_LABEL,
    TARGET_COMPLETIONS_ANNOTATION,
    TARGET_MAX_FAILED_INDEXES_ANNOTATION,
    TARGET_PARALLELISM_ANNOTATION,
    TOPOLOGY_ANNOTATION,
)
from placement.gang import Gang, GangId, build_gang, record_of_pods
from placement.patch import apply
from placement.resize import (
    RECORDED_DOMAIN_RELEASES,
    SkipReason,
    decide_follower_repair,
    decide_gate_release,
    decide_recorded_release,
    decide_resize,
    topology_key,
)
from tests.support import builders

POOL = "cloud.google.com/gke-nodepool"
JOB_UID = "uid-job-1"


def _changed(obj: dict[str, Any], changes: dict[str, Any]) -> dict[str, Any]:
    """`obj` with `section__field=value` set (None: removed)."""
    for path, value in changes.items():
        section, key = path.split("__")
        if value is None:
            obj[section].pop(key, None)
        else:
            obj.setdefault(section, {})[key] = value
    return obj


def make_job(recorded: int = 8, **changes: Any) -> dict[str, Any]:
    """js-w-0 as the webhook leaves it: 1/1, to grow to `recorded` (its record on the pod template too)."""
    job = (
        builders.make_job("js-w-0").uid(JOB_UID).resource_version("42").indexed(1).pending(recorded).status()
    )
    return _changed(job.obj(), changes)


def make_pod(
    index: str = "0", uid: str = JOB_UID, node: str | None = "node-1", **changes: Any
) -> dict[str, Any]:
    """Completion index `index` of js-w-0 (of the Job with `uid`), exclusive on node pools."""
    pod = builders.make_pod(f"js-w-0-{index}-abcde").owned_by("js-w-0", uid).index(index).topology(POOL)
    return _changed(pod.node(node).obj(), changes)


NODE = {"metadata": {"name": "node-1", "labels": {POOL: "pool-3", "kubernetes.io/hostname": "node-1"}}}

RESIZE_SKIPS = [
    ("done", make_job(metadata__labels={RESIZE_LABEL: "done"}), make_pod(), SkipReason.ALREADY_DONE),
    ("unlabelled", make_job(metadata__labels=None), make_pod(), SkipReason.NOT_PENDING),
    ("missing target", make_job(metadata__annotations={}), make_pod(), SkipReason.MISSING_TARGET),
    (
        "non-numeric target",
        make_job(metadata__annotations={TARGET_COMPLETIONS_ANNOTATION: "eight"}),
        make_pod(),
        SkipReason.INVALID_TARGET,
    ),
    (
        "zero target",
        make_job(metadata__annotations={TARGET_COMPLETIONS_ANNOTATION: "0"}),
        make_pod(),
        SkipReason.INVALID_TARGET,
    ),
    (
        "completions != parallelism",
        make_job(
            metadata__annotations={TARGET_COMPLETIONS_ANNOTATION: "8", TARGET_PARALLELISM_ANNOTATION: "4"}
        ),
        make_pod(),
        SkipReason.INVALID_TARGET,
    ),
    (
        "never shrink",
        make_job(spec__completions=16, spec__parallelism=16),
        make_pod(),
        SkipReason.WOULD_SHRINK,
    ),
    ("non-indexed", make_job(spec__completionMode="NonIndexed"), make_pod(), SkipReason.NOT_INDEXED),
    (
        "job finished",
        make_job(status__conditions=[{"type": "Complete", "status": "True"}]),
        make_pod(),
        SkipReason.JOB_FINISHED,
    ),
    (
        "job deleting",
        make_job(metadata__deletionTimestamp="2026-01-01T00:00:00Z"),
        make_pod(),
        SkipReason.JOB_TERMINATING,
    ),
    ("no leader", make_job(), None, SkipReason.NO_LEADER),
    ("leader not bound", make_job(), make_pod(node=None), SkipReason.LEADER_NOT_BOUND),
    ("leader of another uid", make_job(), make_pod(uid="uid-old"), SkipReason.LEADER_OF_OTHER_JOB),
    (
        "leader terminating",
        make_job(),
        make_pod(metadata__deletionTimestamp="2026-01-01T00:00:00Z"),
        SkipReason.LEADER_TERMINATING,
    ),
    ("leader failed", make_job(), make_pod(status__phase="Failed"), SkipReason.LEADER_FINISHED),
    ("pod is a follower", make_job(), make_pod(index="3"), SkipReason.NOT_A_LEADER),
]


@pytest.mark.parametrize(
    ("job", "leader", "reason"), [case[1:] for case in RESIZE_SKIPS], ids=[c[0] for c in RESIZE_SKIPS]
)
def test_decide_resize_says_why_not(
    job: dict[str, Any], leader: dict[str, Any] | None, reason: SkipReason
) -> None:
    decision = decide_resize(job, leader, gang=None)
    assert not decision.resize
    assert decision.patch is None
    assert decision.reason == reason


def test_a_job_without_a_topology_annotation_on_its_pod_template_is_not_resized() -> None:
    """`resize: pending` and a target on a Job the webhook never admitted as exclusive (added by an update,
    say): not this project's Job. A topology annotation on the Job's metadata alone does not make it one:
    the webhook always writes it onto the pod template, which no client changes once the Job runs."""
    job = make_job(metadata__annotations={TARGET_COMPLETIONS_ANNOTATION: "40", TOPOLOGY_ANNOTATION: POOL})
    job["spec"]["template"]["metadata"]["annotations"].pop(TOPOLOGY_ANNOTATION)
    decision = decide_resize(job, make_pod(), gang=None)
    assert (decision.reason, decision.patch) == (SkipReason.NOT_ADMITTED, None)


def test_the_target_never_exceeds_what_the_webhook_recorded_on_the_pod_template() -> None:
    forged = {TARGET_COMPLETIONS_ANNOTATION: "100000", TARGET_PARALLELISM_ANNOTATION: "100000"}
    decision = decide_resize(make_job(2, metadata__annotations=forged), make_pod(), gang=None)
    assert (decision.reason, decision.patch) == (SkipReason.INVALID_TARGET, None)
    assert decision.detail == (
        f"{TARGET_COMPLETIONS_ANNOTATION}: 100000 is more than the 2 the Job webhook recorded (on the pod "
        "template) when it admitted the Job"
    )
    lowered = {TARGET_COMPLETIONS_ANNOTATION: "3", TARGET_PARALLELISM_ANNOTATION: "3"}
    assert decide_resize(make_job(8, metadata__annotations=lowered), make_pod(), gang=None).target == 3


def test_a_job_admitted_before_the_pod_template_record_grows_to_its_own_target() -> None:
    job = make_job(8)
    for key in (TARGET_COMPLETIONS_ANNOTATION, TARGET_PARALLELISM_ANNOTATION):
        del job["spec"]["template"]["metadata"]["annotations"][key]
    assert decide_resize(job, make_pod(), gang=None).target == 8


def test_a_pod_template_record_the_webhook_would_not_write_refuses_the_resize() -> None:
    job = make_job(8)
    job["spec"]["template"]["metadata"]["annotations"][TARGET_COMPLETIONS_ANNOTATION] = "\u00b2"
    decision = decide_resize(job, make_pod(), gang=None)
    assert decision.reason == SkipReason.INVALID_TARGET
    assert decision.detail.startswith(f"the pod template's {TARGET_COMPLETIONS_ANNOTATION}: ")


@pytest.mark.parametrize(
    ("annotations", "detail"),
    [
        ({TARGET_COMPLETIONS_ANNOTATION: "\u00b2"}, "not a decimal number"),  # "²".isdigit() is True
        ({TARGET_COMPLETIONS_ANNOTATION: "\u0663"}, "not a decimal number"),  # int() reads it as 3
        ({TARGET_COMPLETIONS_ANNOTATION: "9" * 5_000}, "5000 characters"),  # int() refuses > 4,300 digits
        ({TARGET_COMPLETIONS_ANNOTATION: "100001"}, "more than 100000"),
        ({TARGET_COMPLETIONS_ANNOTATION: " 32 "}, "not a decimal number"),
        ({TARGET_COMPLETIONS_ANNOTATION: "+8"}, "not a decimal number"),
        ({TARGET_COMPLETIONS_ANNOTATION: "08"}, "leading zero"),
        ({TARGET_COMPLETIONS_ANNOTATION: "8", TARGET_PARALLELISM_ANNOTATION: "\u00b2"}, "target-parallelism"),
        ({TARGET_COMPLETIONS_ANNOTATION: "8", TARGET_MAX_FAILED_INDEXES_ANNOTATION: "9"}, "more than 8"),
    ],
)
def test_decide_resize_refuses_a_target_the_webhook_would_not_write(
    annotations: dict[str, str], detail: str
) -> None:
    decision = decide_resize(make_job(metadata__annotations=annotations), make_pod(), gang=None)
    assert (decision.reason, decision.patch, decision.target) == (SkipReason.INVALID_TARGET, None, None)
    assert detail in decision.detail


@pytest.mark.parametrize(
    ("annotations", "current", "target"),
    [
        ({TARGET_COMPLETIONS_ANNOTATION: "8", TARGET_PARALLELISM_ANNOTATION: "8"}, 1, 8),
        ({TARGET_COMPLETIONS_ANNOTATION: "8"}, 1, 8),  # parallelism target defaults to completions
        ({TARGET_COMPLETIONS_ANNOTATION: "100000", TARGET_PARALLELISM_ANNOTATION: "100000"}, 1, 100_000),
        ({TARGET_COMPLETIONS_ANNOTATION: "4", TARGET_PARALLELISM_ANNOTATION: "4"}, 4, 4),  # mark done only
    ],
)
def test_decide_resize_patches_sizes_label_and_precondition(
    annotations: dict[str, str], current: int, target: int
) -> None:
    job = make_job(
        target, metadata__annotations=annotations, spec__completions=current, spec__parallelism=current
    )
    decision = decide_resize(job, make_pod(), gang=None)
    assert decision.resize
    assert decision.reason is None
    assert decision.target == target
    assert decision.patch is not None
    resized = apply(job, decision.patch)
    assert resized["metadata"]["labels"][RESIZE_LABEL] == "done"
    assert (resized["spec"]["parallelism"], resized["spec"]["completions"]) == (target, target)
    assert {k: v for k, v in resized["metadata"].items() if k != "labels"} == {
        k: v for k, v in job["metadata"].items() if k != "labels"
    }


@pytest.mark.parametrize(
    ("field", "value"),
    [
        ("uid", "another-uid"),  # deleted and re-created under the same name
        ("generation", 3),  # its spec changed: a user's edit, a suspension
        ("labels", {RESIZE_LABEL: "done"}),  # resized meanwhile (another replica, before a failover)
    ],
)
def test_the_resize_is_refused_when_what_it_read_changed(field: str, value: Any) -> None:
    job = make_job(metadata__generation=2)
    decision = decide_resize(job, make_pod(), gang=None)
    assert decision.patch is not None
    changed = copy.deepcopy(job)
    changed["metadata"][field] = value
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        apply(changed, decision.patch)


def test_the_resize_survives_a_status_write_but_not_without_a_generation() -> None:
    """The Job controller's status writes change the resourceVersion, often right when the leader binds;
    no status field decides a resize, so they no longer refuse it. An object without a generation (no API
    server served it) is held to its resourceVersion."""
    job = make_job(metadata__generation=2)
    decision = decide_resize(job, make_pod(), gang=None)
    assert decision.patch is not None
    status_written = copy.deepcopy(job)
    status_written["metadata"]["resourceVersion"] = "43"
    status_written["status"] = {"active": 1, "ready": 1}
    assert apply(status_written, decision.patch)["spec"]["completions"] == 8
    unversioned = decide_resize(make_job(), make_pod(), gang=None)
    assert unversioned.patch is not None
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        apply(status_written, unversioned.patch)


def test_the_resize_patch_records_the_leaders_domain_when_its_node_shows_one() -> None:
    """The pod admission policies pin the followers to it: written in the resize itself, no extra write."""
    decision = decide_resize(make_job(), make_pod(), gang=None, node=NODE)
    assert decision.patch is not None
    resized = apply(make_job(), decision.patch)
    assert resized["metadata"]["annotations"][LEADER_DOMAIN_ANNOTATION] == "pool-3"
    assert resized["metadata"]["labels"][RESIZE_LABEL] == "done"
    unlabelled = {"metadata": {"name": "node-1", "labels": {"kubernetes.io/hostname": "node-1"}}}
    without_domain = decide_resize(make_job(), make_pod(), gang=None, node=unlabelled)
    assert without_domain.patch is not None
    assert LEADER_DOMAIN_ANNOTATION not in apply(make_job(), without_domain.patch)["metadata"]["annotations"]


def test_the_resize_patch_makes_the_job_a_param_of_the_follower_policy_only_with_a_domain() -> None:
    """The pin-followers label goes with the recorded domain (the binding selects on it), in the same
    patch; without a domain, or with the label turned off (the webhook path), the Job is no param."""
    pinning = decide_resize(make_job(), make_pod(), gang=None, node=NODE)
    assert pinning.patch is not None
    assert apply(make_job(), pinning.patch)["metadata"]["labels"][PIN_FOLLOWERS_LABEL] == PIN_FOLLOWERS
    unlabelled = {"metadata": {"name": "node-1", "labels": {"kubernetes.io/hostname": "node-1"}}}
    off = decide_resize(make_job(), make_pod(), gang=None, node=NODE, pin_followers=False)
    without_domain = decide_resize(make_job(), make_pod(), gang=None, node=unlabelled)
    for decision in (off, without_domain):
        assert decision.patch is not None
        assert PIN_FOLLOWERS_LABEL not in apply(make_job(), decision.patch)["metadata"]["labels"]
    off_resized = apply(make_job(), off.patch or [])
    assert off_resized["metadata"]["annotations"][LEADER_DOMAIN_ANNOTATION] == "pool-3"


def test_resize_patch_applied_is_no_longer_pending() -> None:
    job = make_job()
    decision = decide_resize(job, make_pod(), gang=None)
    assert decision.patch is not None
    patched = apply(job, decision.patch)
    again = decide_resize(patched, make_pod(), gang=None)
    assert again.reason == SkipReason.ALREADY_DONE
    assert (patched["spec"]["completions"], patched["spec"]["parallelism"]) == (8, 8)


def gated(pod: dict[str, Any], gates: list[str] | None = None) -> dict[str, Any]:
    pod = copy.deepcopy(pod)
    pod["spec"]["schedulingGates"] = [{"name": name} for name in (gates or [LEADER_SCHEDULED_GATE])]
    return pod


FOLLOWER = make_pod(index="3", node=None)

RELEASE_CASES = [
    ("no selector yet", gated(FOLLOWER), None, []),
    (
        "other gate stays",
        gated(FOLLOWER, ["kueue.x-k8s.io/topology", LEADER_SCHEDULED_GATE]),
        None,
        ["kueue.x-k8s.io/topology"],
    ),
    (
        "selector map exists",
        {**gated(FOLLOWER), "spec": {**gated(FOLLOWER)["spec"], "nodeSelector": {"gpu": "a100"}}},
        {"gpu": "a100"},
        [],
    ),
    (
        "selector already right",
        {**gated(FOLLOWER), "spec": {**gated(FOLLOWER)["spec"], "nodeSelector": {POOL: "pool-3"}}},
        {},
        [],
    ),
]


@pytest.mark.parametrize(
    ("follower", "selector_before", "gates_after"),
    [c[1:] for c in RELEASE_CASES],
    ids=[c[0] for c in RELEASE_CASES],
)
def test_gate_release_patch_pins_domain_and_removes_only_our_gate(
    follower: dict[str, Any], selector_before: dict[str, str] | None, gates_after: list[str]
) -> None:
    release = decide_gate_release(follower, make_pod(), NODE, gang=None)
    assert release.release
    assert release.domain == "pool-3"
    assert release.patch is not None
    assert release.patch[0]["op"] == "test"
    result = jsonpatch.apply_patch(follower, release.patch)
    assert result["spec"]["nodeSelector"][POOL] == "pool-3"
    for key, value in (selector_before or {}).items():
        assert result["spec"]["nodeSelector"][key] == value
    assert [gate["name"] for gate in result["spec"]["schedulingGates"]] == gates_after


def test_gate_release_patch_fails_if_gate_moved() -> None:
    follower = gated(FOLLOWER, ["other", LEADER_SCHEDULED_GATE])
    release = decide_gate_release(follower, make_pod(), NODE, gang=None)
    assert release.patch is not None
    concurrently_changed = gated(FOLLOWER, [LEADER_SCHEDULED_GATE])
    with pytest.raises(jsonpatch.JsonPatchTestFailed):
        jsonpatch.apply_patch(concurrently_changed, release.patch)


RELEASE_SKIPS: list[tuple[str, dict[str, Any], dict[str, Any] | None, dict[str, Any] | None, SkipReason]] = [
    ("not gated", FOLLOWER, make_pod(), NODE, SkipReason.NOT_GATED),
    ("leader missing", gated(FOLLOWER), None, NODE, SkipReason.NO_LEADER),
    ("leader unbound", gated(FOLLOWER), make_pod(node=None), NODE, SkipReason.LEADER_NOT_BOUND),
    ("leader of old job", gated(FOLLOWER), make_pod(uid="uid-old"), NODE, SkipReason.LEADER_OF_OTHER_JOB),
    ("node unknown", gated(FOLLOWER), make_pod(), None, SkipReason.NODE_UNKNOWN),
    (
        "node lacks label",
        gated(FOLLOWER),
        make_pod(),
        {"metadata": {"labels": {}}},
        SkipReason.NODE_WITHOUT_DOMAIN,
    ),
    (
        "selector names other domain",
        {**gated(FOLLOWER), "spec": {**gated(FOLLOWER)["spec"], "nodeSelector": {POOL: "pool-9"}}},
        make_pod(),
        NODE,
        SkipReason.NODE_SELECTOR_CONFLICT,
    ),
    (
        "follower deleting",
        {
            **gated(FOLLOWER),
            "metadata": {**FOLLOWER["metadata"], "deletionTimestamp": "2026-01-01T00:00:00Z"},
        },
        make_pod(),
        NODE,
        SkipReason.FOLLOWER_TERMINATING,
    ),
]


@pytest.mark.parametrize(
    ("follower", "leader", "node", "reason"),
    [c[1:] for c in RELEASE_SKIPS],
    ids=[c[0] for c in RELEASE_SKIPS],
)
def test_gate_release_says_why_not(
    follower: dict[str, Any], leader: dict[str, Any] | None, node: dict[str, Any] | None, reason: SkipReason
) -> None:
    release = decide_gate_release(follower, leader, node, gang=None)
    assert not release.release
    assert release.reason == reason


def test_gate_release_escapes_slash_in_key_when_map_exists() -> None:
    follower = gated(FOLLOWER)
    follower["spec"]["nodeSelector"] = {"a": "b"}
    release = decide_gate_release(follower, make_pod(), NODE, gang=None)
    assert release.patch is not None
    assert {
        "op": "add",
        "path": "/spec/nodeSelector/cloud.google.com~1gke-nodepool",
        "value": "pool-3",
    } in release.patch


@pytest.mark.parametrize(
    ("annotations", "template_annotations", "expected"),
    [
        ({TOPOLOGY_ANNOTATION: "rack", JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: "zone"}, {}, "rack"),
        (
            {JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: "zone"},
            {TOPOLOGY_ANNOTATION: "rack"},
            "zone",
        ),  # metadata first
        ({}, {JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: "zone"}, "zone"),
        ({}, {}, None),
    ],
)
def test_topology_key_ours_wins(
    annotations: dict[str, str], template_annotations: dict[str, str], expected: str | None
) -> None:
    job = {
        "kind": "Job",
        "metadata": {"annotations": annotations},
        "spec": {"template": {"metadata": {"annotations": template_annotations}}},
    }
    assert topology_key(job) == expected


# --- two leaders, maxFailedIndexes ------------------------------------------------------------------

OTHER_POOL_NODE = {"metadata": {"name": "node-9", "labels": {POOL: "pool-9"}}}


def rival(node: str = "node-9") -> dict[str, Any]:
    pod = make_pod(node=node)
    pod["metadata"]["name"] = "js-w-0-0-fghij"
    return pod


@pytest.mark.parametrize(
    ("rival_node", "reason"),
    [(OTHER_POOL_NODE, SkipReason.LEADERS_DISAGREE), (None, SkipReason.LEADERS_DISAGREE), (NODE, None)],
    ids=["other domain", "unknown node", "same domain"],
)
def test_gate_release_waits_while_two_leaders_disagree(
    rival_node: dict[str, Any] | None, reason: SkipReason | None
) -> None:
    release = decide_gate_release(gated(FOLLOWER), make_pod(), NODE, [(rival(), rival_node)], gang=None)
    assert release.reason == reason
    assert release.release is (reason is None)


def resized(job: dict[str, Any], domain: str | None = "pool-3") -> dict[str, Any]:
    """`job` after its resize: labelled done, the leader's domain recorded (None: not recorded)."""
    job = copy.deepcopy(job)
    job["metadata"]["labels"][RESIZE_LABEL] = "done"
    if domain is not None:
        job["metadata"].setdefault("annotations", {})[LEADER_DOMAIN_ANNOTATION] = domain
    return job


FINISHED_LEADER = make_pod(status__phase="Succeeded")


def test_a_gated_elastic_follower_whose_leader_finished_is_released_into_the_recorded_domain() -> None:
    """Gated because its admission did not see the resize yet, and its leader ran to completion since:
    the leader releases it no more; the domain the resize recorded does, as the pod policies pin."""
    follower = gated(FOLLOWER)
    held = decide_gate_release(follower, FINISHED_LEADER, NODE, gang=None)
    assert held.reason == SkipReason.LEADER_FINISHED
    assert held.reason in RECORDED_DOMAIN_RELEASES
    release = decide_recorded_release(follower, resized(make_job(), "pool-7"))
    assert (release.reason, release.domain) == (None, "pool-7")
    assert release.patch is not None
    result = jsonpatch.apply_patch(follower, release.patch)
    assert result["spec"]["nodeSelector"] == {POOL: "pool-7"}
    assert result["spec"].get("schedulingGates") == []


@pytest.mark.parametrize(
    ("job", "reason"),
    [
        (None, SkipReason.NOT_RESIZED),  # the Job is gone
        (make_job(), SkipReason.NOT_RESIZED),  # still pending: a scheduling-gate Job never records one
        (resized(make_job(), None), SkipReason.NOT_RESIZED),  # resized onto a node without the label
        (resized(_changed(make_job(), {"metadata__uid": "uid-other"})), SkipReason.NOT_RESIZED),
    ],
    ids=["no-job", "not-resized", "no-domain-recorded", "another-job-of-the-same-name"],
)
def test_the_recorded_release_needs_the_followers_own_resized_job_and_its_domain(
    job: dict[str, Any] | None, reason: SkipReason
) -> None:
    release = decide_recorded_release(gated(FOLLOWER), job)
    assert (release.reason, release.patch) == (reason, None)


def test_the_recorded_release_leaves_ungated_and_terminating_followers_alone() -> None:
    assert decide_recorded_release(FOLLOWER, resized(make_job())).reason == SkipReason.NOT_GATED
    terminating = gated(make_pod(index="3", node=None, metadata__deletionTimestamp="2026-12-02T06:00:00Z"))
    assert decide_recorded_release(terminating, resized(make_job())).reason == SkipReason.FOLLOWER_TERMINATING


def test_a_leader_not_yet_bound_or_terminating_is_waited_for_not_overruled_by_the_record() -> None:
    assert SkipReason.LEADER_NOT_BOUND not in RECORDED_DOMAIN_RELEASES
    assert SkipReason.LEADER_TERMINATING not in RECORDED_DOMAIN_RELEASES
    assert SkipReason.LEADERS_DISAGREE not in RECORDED_DOMAIN_RELEASES


@pytest.mark.parametrize(
    ("raw", "patched"),
    [("3", 3), ("8", 8)],
)
def test_resize_restores_max_failed_indexes(raw: str, patched: int) -> None:
    annotations = {
        TARGET_COMPLETIONS_ANNOTATION: "8",
        TARGET_PARALLELISM_ANNOTATION: "8",
        TARGET_MAX_FAILED_INDEXES_ANNOTATION: raw,
    }
    decision = decide_resize(make_job(metadata__annotations=annotations), make_pod(), gang=None)
    assert decision.patch is not None
    resized = apply(make_job(metadata__annotations=annotations), decision.patch)["spec"]
    assert (resized["parallelism"], resized["completions"], resized["maxFailedIndexes"]) == (8, 8, patched)


@pytest.mark.parametrize("raw", ["9", "0", "many"])
def test_resize_refuses_a_max_failed_indexes_target_the_api_server_would_reject(raw: str) -> None:
    annotations = {
        TARGET_COMPLETIONS_ANNOTATION: "8",
        TARGET_PARALLELISM_ANNOTATION: "8",
        TARGET_MAX_FAILED_INDEXES_ANNOTATION: raw,
    }
    assert decide_resize(make_job(metadata__annotations=annotations), make_pod(), gang=None).reason == (
        SkipReason.INVALID_TARGET
    )


# --- all-or-nothing: a Job of a gang grows, and releases its followers, only with its whole JobSet ------

GANG_SIZE = 2


def in_gang(obj: dict[str, Any], jobset: str = "js") -> dict[str, Any]:
    """`obj` as the webhook leaves a Job or pod of an all-or-nothing JobSet of `GANG_SIZE` Jobs."""
    obj = copy.deepcopy(obj)
    obj["metadata"].setdefault("labels", {}).update(
        {JOBSET_NAME_LABEL: jobset, JOBSET_RESTART_ATTEMPT_LABEL: "0"}
    )
    obj["metadata"].setdefault("annotations", {}).update(
        {ALL_OR_NOTHING_ANNOTATION: "true", GANG_SIZE_ANNOTATION: str(GANG_SIZE)}
    )
    return obj


def gang_of_leaders(*nodes: str | None, jobset: str = "js") -> Gang:
    """The gang whose Job `js-w-<i>` has its leader on `nodes[i]` (None: not bound yet)."""
    leaders = []
    for index, node in enumerate(nodes):
        leader = in_gang(make_pod(node=node), jobset)
        leader["metadata"]["name"] = f"js-w-{index}-0-abcde"
        leader["metadata"]["ownerReferences"][0].update(name=f"js-w-{index}", uid=f"uid-job-{index}")
        leaders.append(leader)
    gang_id = GangId("default", jobset)
    built = build_gang(gang_id, leaders, record_of_pods(gang_id, leaders))
    assert built is not None
    return built


GANG_CASES: list[tuple[str, bool, Gang | None, SkipReason | None]] = [
    ("not all-or-nothing", False, None, None),
    ("no leader of the JobSet cached", True, None, SkipReason.GANG_INCOMPLETE),
    ("one of two leaders bound", True, gang_of_leaders("node-1", None), SkipReason.GANG_INCOMPLETE),
    ("one of two Jobs has a leader", True, gang_of_leaders("node-1"), SkipReason.GANG_INCOMPLETE),
    (
        "another JobSet's gang",
        True,
        gang_of_leaders("node-1", "node-2", jobset="other"),
        SkipReason.GANG_INCOMPLETE,
    ),
    ("every Job has a bound leader", True, gang_of_leaders("node-1", "node-2"), None),
]


@pytest.mark.parametrize(
    ("all_or_nothing", "gang", "reason"), [c[1:] for c in GANG_CASES], ids=[c[0] for c in GANG_CASES]
)
def test_a_job_of_a_gang_grows_only_with_its_whole_jobset(
    all_or_nothing: bool, gang: Gang | None, reason: SkipReason | None
) -> None:
    job = in_gang(make_job()) if all_or_nothing else make_job()
    decision = decide_resize(job, make_pod(), gang=gang)
    assert (decision.reason, decision.resize) == (reason, reason is None)


@pytest.mark.parametrize(
    ("all_or_nothing", "gang", "reason"), [c[1:] for c in GANG_CASES], ids=[c[0] for c in GANG_CASES]
)
def test_a_follower_of_a_gang_is_released_only_with_its_whole_jobset(
    all_or_nothing: bool, gang: Gang | None, reason: SkipReason | None
) -> None:
    follower = in_gang(gated(FOLLOWER)) if all_or_nothing else gated(FOLLOWER)
    release = decide_gate_release(follower, make_pod(), NODE, gang=gang)
    assert (release.reason, release.release) == (reason, reason is None)


def test_an_incomplete_gang_does_not_hide_a_reason_that_comes_first() -> None:
    """The gang is the last condition: a Job whose own leader is not bound says so."""
    decision = decide_resize(in_gang(make_job()), make_pod(node=None), gang=gang_of_leaders(None, None))
    assert decision.reason == SkipReason.LEADER_NOT_BOUND


# --- repairing followers pinned elsewhere (JobSet's pod reconciler) ---------------------------------

NOW = "2026-05-01T10:00:00Z"


def pinned(pool: str, **extra: Any) -> dict[str, Any]:
    follower = make_pod(index="3", node=None, **extra)
    follower["spec"]["nodeSelector"] = {"gpu": "a100", POOL: pool}
    return follower


def test_a_follower_pinned_to_another_domain_is_marked_then_deleted() -> None:
    repair = decide_follower_repair(pinned("pool-1"), make_pod(), NODE, [], NOW)
    assert repair.delete
    assert (repair.pinned_to, repair.domain) == ("pool-1", "pool-3")
    assert repair.status_patch == {
        "status": {
            "conditions": [
                {
                    "type": "DisruptionTarget",
                    "status": "True",
                    "reason": "ExclusivePlacementViolation",
                    "message": (
                        f"exclusive-placement: pinned to {POOL}=pool-1, but leader pod js-w-0-0-abcde "
                        f"runs in {POOL}=pool-3; deleted so that the Job controller re-creates it in the "
                        "leader's domain"
                    ),
                    "lastTransitionTime": NOW,
                }
            ]
        }
    }


def test_repairing_a_follower_of_an_elastic_job_first_publishes_the_leaders_new_domain() -> None:
    """Else the policies would pin its replacement to the domain the leader left, again and again."""
    elastic = pinned("pool-1")
    elastic["metadata"]["annotations"][TARGET_COMPLETIONS_ANNOTATION] = (
        "8"  # an elastic Job's template record
    )
    repair = decide_follower_repair(elastic, make_pod(), NODE, [], NOW)
    assert repair.delete
    assert repair.job_patch == {"metadata": {"annotations": {LEADER_DOMAIN_ANNOTATION: "pool-3"}}}
    assert decide_follower_repair(pinned("pool-1"), make_pod(), NODE, [], NOW).job_patch is None


def test_a_follower_already_marked_is_deleted_without_a_second_status_write() -> None:
    marked = pinned("pool-1", status__conditions=[{"type": "DisruptionTarget", "status": "True"}])
    repair = decide_follower_repair(marked, make_pod(), NODE, [], NOW)
    assert repair.delete
    assert repair.status_patch is None


REPAIR_SKIPS: list[
    tuple[
        str,
        dict[str, Any],
        dict[str, Any] | None,
        dict[str, Any] | None,
        list[tuple[dict[str, Any], dict[str, Any] | None]],
        SkipReason,
    ]
] = [
    ("in the leader's domain", pinned("pool-3"), make_pod(), NODE, [], SkipReason.IN_LEADER_DOMAIN),
    ("not pinned", make_pod(index="3", node=None), make_pod(), NODE, [], SkipReason.NOT_PINNED),
    ("gated", gated(pinned("pool-1")), make_pod(), NODE, [], SkipReason.FOLLOWER_GATED),
    (
        "deleting",
        pinned("pool-1", metadata__deletionTimestamp=NOW),
        make_pod(),
        NODE,
        [],
        SkipReason.FOLLOWER_TERMINATING,
    ),
    ("no leader", pinned("pool-1"), None, NODE, [], SkipReason.NO_LEADER),
    ("leader not bound", pinned("pool-1"), make_pod(node=None), NODE, [], SkipReason.LEADER_NOT_BOUND),
    (
        "leader terminating",
        pinned("pool-1"),
        make_pod(metadata__deletionTimestamp=NOW),
        NODE,
        [],
        SkipReason.LEADER_TERMINATING,
    ),
    (
        "leader of an older Job",
        pinned("pool-1"),
        make_pod(uid="old"),
        NODE,
        [],
        SkipReason.LEADER_OF_OTHER_JOB,
    ),
    ("leader's node unknown", pinned("pool-1"), make_pod(), None, [], SkipReason.NODE_UNKNOWN),
    (
        "leader's node without the label",
        pinned("pool-1"),
        make_pod(),
        {"metadata": {"labels": {}}},
        [],
        SkipReason.NODE_WITHOUT_DOMAIN,
    ),
    (
        "two leaders disagree",
        pinned("pool-1"),
        make_pod(),
        NODE,
        [(rival(), OTHER_POOL_NODE)],
        SkipReason.LEADERS_DISAGREE,
    ),
]


@pytest.mark.parametrize(
    ("follower", "leader", "node", "rivals", "reason"),
    [c[1:] for c in REPAIR_SKIPS],
    ids=[c[0] for c in REPAIR_SKIPS],
)
def test_follower_repair_says_why_not(
    follower: dict[str, Any],
    leader: dict[str, Any] | None,
    node: dict[str, Any] | None,
    rivals: list[tuple[dict[str, Any], dict[str, Any] | None]],
    reason: SkipReason,
) -> None:
    repair = decide_follower_repair(follower, leader, node, rivals, NOW)
    assert not repair.delete
    assert repair.reason == reason
    assert repair.status_patch is None
