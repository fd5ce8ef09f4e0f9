"""JobSet's exclusive-placement webhooks and pod reconciler, case by case: the cases of
kubernetes-sigs/jobset `pkg/webhooks/pod_webhook_test.go` and `pkg/controllers/pod_controller_test.go`,
written here as data (each named after its upstream test and case), plus the ValidateCreate branches
upstream leaves untested. The caches are real `Informer`s filled by hand (never run), so the index
lookups are the ones kubesim uses.
"""

from __future__ import annotations

import asyncio
import copy
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any, cast

import pytest

from kubesim.apiserver.server import ApiServer
from kubesim.clock import Clock
from kubesim.controllers.informer import Informer
from kubesim.controllers.jobset_placement import (
    NodeNotFound,
    PlacementError,
    index_pod_job,
    index_pod_name,
    leader_pod_name,
    leader_pod_topology,
    placements_valid,
    pods_owned_by_same_job,
    reconciles,
    remove_pod_name_suffix,
    with_violation_condition,
)
from kubesim.controllers.jobset_pod_reconciler import JobSetPodReconciler
from kubesim.controllers.jobset_webhooks import JobSetPodWebhooks, pod_webhook_configurations
from kubesim.errors import ApiError
from kubesim.interface import KubeApi
from kubesim.stats import Stats

Obj = dict[str, Any]
ZONE = "topology.kubernetes.io/zone"
EXCLUSIVE = "alpha.jobset.sigs.k8s.io/exclusive-topology"
NODE_SELECTOR_MODE = "alpha.jobset.sigs.k8s.io/node-selector"
INDEX = "batch.kubernetes.io/job-completion-index"
JOBSET = "jobset.sigs.k8s.io/jobset-name"
RJOB = "jobset.sigs.k8s.io/replicatedjob-name"
JOB_INDEX = "jobset.sigs.k8s.io/job-index"
JOB_KEY = "jobset.sigs.k8s.io/job-key"
PRIORITY = "jobset.sigs.k8s.io/priority"
FOLLOWER_LABELS = {JOBSET: "js", RJOB: "rjob", JOB_INDEX: "0"}


def pod(
    name: str = "p",
    *,
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    owner: str | None = None,
    spec: Obj | None = None,
    status: Obj | None = None,
    deleting: bool = False,
) -> Obj:
    meta: Obj = {"name": name, "namespace": "default"}
    if labels is not None:
        meta["labels"] = dict(labels)
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    if owner is not None:
        meta["ownerReferences"] = [{"kind": "Job", "name": "j", "uid": owner, "controller": True}]
    if deleting:
        meta["deletionTimestamp"] = "2026-01-01T00:00:00Z"
    obj: Obj = {"metadata": meta, "spec": dict(spec or {})}
    if status is not None:
        obj["status"] = status
    return obj


def node(name: str, labels: dict[str, str] | None = None) -> Obj:
    return {"metadata": {"name": name, "labels": dict(labels or {})}}


def informer(resource: str, objects: Sequence[Obj]) -> Informer:
    """A cache filled by hand: the Informer's store and indexes, never run against an API."""
    cache = Informer(cast(KubeApi, None), resource)
    for obj in objects:
        cache.assume(obj)
    cache.synced.set()
    return cache


def webhooks(pods: Sequence[Obj] = (), nodes: Sequence[Obj] = ()) -> tuple[JobSetPodWebhooks, Stats]:
    """JobSet's pod webhooks on caches holding `pods` and `nodes`."""
    stats = Stats()
    return JobSetPodWebhooks(pods=informer("pods", pods), nodes=informer("nodes", nodes), stats=stats), stats


# --- pod_webhook_test.go TestDefault --------------------------------------------------------------------

LEADER_ANNOTATIONS = {EXCLUSIVE: ZONE, INDEX: "0"}
FOLLOWER_ANNOTATIONS = {JOBSET: "js", EXCLUSIVE: ZONE, INDEX: "1"}


def _leader_in_cache(node_name: str = "") -> Obj:
    return pod(
        "js-rjob-0-0-leader",
        labels=FOLLOWER_LABELS,
        annotations=LEADER_ANNOTATIONS,
        owner="job-uid-1",
        spec={"nodeName": node_name} if node_name else {},
    )


def _follower() -> Obj:
    return pod(
        "js-rjob-0-1-follower",
        labels=FOLLOWER_LABELS,
        annotations=FOLLOWER_ANNOTATIONS,
        owner="job-uid-1",
        spec={"priority": 100},
    )


def _with(obj: Obj, *, labels: dict[str, str] | None = None, spec: Obj | None = None) -> Obj:
    meta = {**obj["metadata"], "labels": {**(obj["metadata"].get("labels") or {}), **(labels or {})}}
    return {**obj, "metadata": meta, "spec": {**obj["spec"], **(spec or {})}}


_LEADER = pod(
    "p-leader",
    labels={JOB_KEY: "js-rjob-0"},
    annotations={JOBSET: "js", EXCLUSIVE: ZONE, INDEX: "0", RJOB: "rjob", JOB_INDEX: "0"},
    spec={"priority": 100},
)
_LEADER_AFFINITY = {
    "podAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "labelSelector": {
                    "matchExpressions": [{"key": JOB_KEY, "operator": "In", "values": ["js-rjob-0"]}]
                },
                "topologyKey": ZONE,
                "namespaceSelector": {},
            }
        ]
    },
    "podAntiAffinity": {
        "requiredDuringSchedulingIgnoredDuringExecution": [
            {
                "labelSelector": {
                    "matchExpressions": [
                        {"key": JOB_KEY, "operator": "Exists"},
                        {"key": JOB_KEY, "operator": "NotIn", "values": ["js-rjob-0"]},
                        {"key": PRIORITY, "operator": "In", "values": ["100"]},
                    ]
                },
                "topologyKey": ZONE,
                "namespaceSelector": {},
            }
        ]
    },
}


@dataclass
class DefaultCase:
    name: str
    pod: Obj
    want: Obj | None = None
    """None: the pod comes back unchanged."""
    cached_pods: list[Obj] = field(default_factory=list)
    cached_nodes: list[Obj] = field(default_factory=list)
    want_error: str | None = None


DEFAULT_CASES = [
    DefaultCase("not a jobset pod", pod()),
    DefaultCase("using node selector strategy", pod(annotations={JOBSET: "js", NODE_SELECTOR_MODE: ""})),
    DefaultCase("jobset pod, no exclusive placement, no priority", pod(annotations={JOBSET: "js"})),
    DefaultCase(
        "jobset pod, no exclusive placement, with priority",
        pod(annotations={JOBSET: "js"}, spec={"priority": 100}),
        want=pod(annotations={JOBSET: "js"}, labels={PRIORITY: "100"}, spec={"priority": 100}),
    ),
    DefaultCase(
        "leader pod with exclusive placement",
        _LEADER,
        want=_with(_LEADER, labels={PRIORITY: "100"}, spec={"affinity": _LEADER_AFFINITY}),
    ),
    DefaultCase(
        "follower pod, leader not scheduled",
        _follower(),
        want=_with(_follower(), labels={PRIORITY: "100"}),
        cached_pods=[_leader_in_cache()],
    ),
    DefaultCase(
        "follower pod, leader scheduled",
        _follower(),
        want=_with(_follower(), labels={PRIORITY: "100"}, spec={"nodeSelector": {ZONE: "zone-a"}}),
        cached_pods=[_leader_in_cache("node-a")],
        cached_nodes=[node("node-a", {ZONE: "zone-a"})],
    ),
    DefaultCase(
        "follower pod, leader scheduled on missing node",
        _follower(),
        cached_pods=[_leader_in_cache("node-a")],
        want_error='nodes "node-a" not found',
    ),
]


@pytest.mark.parametrize("case", DEFAULT_CASES, ids=[c.name for c in DEFAULT_CASES])
def test_default(case: DefaultCase) -> None:
    """pod_webhook_test.go TestDefault."""
    hooks, _ = webhooks(case.cached_pods, case.cached_nodes)
    mutated = copy.deepcopy(case.pod)
    if case.want_error is not None:
        with pytest.raises(NodeNotFound, match=case.want_error):
            hooks.default(mutated)
        return
    hooks.default(mutated)
    assert mutated == (case.want if case.want is not None else case.pod)


def test_a_missing_node_is_denied_as_controller_runtime_reports_a_not_found_status() -> None:
    hooks, stats = webhooks([_leader_in_cache("node-a")])
    reply = asyncio.run(hooks.mutate(_follower()))
    assert not reply.allowed
    assert reply.status is not None
    assert (reply.status["code"], reply.status["reason"], reply.status["message"]) == (
        404,
        "NotFound",
        'nodes "node-a" not found',
    )
    assert (stats.jobset_webhook_calls, stats.jobset_webhook_denied) == (1, 1)


def test_a_leader_node_without_the_topology_label_is_denied_with_jobsets_message() -> None:
    hooks, _ = webhooks([_leader_in_cache("node-a")], [node("node-a")])
    reply = asyncio.run(hooks.mutate(_follower()))
    assert reply.status == {
        "code": 403,
        "reason": "Forbidden",
        "message": f"node does not have topology label: {ZONE}",
    }


# --- pod_webhook_test.go TestLeaderPodName ------------------------------------------------------------


@pytest.mark.parametrize(
    ("labels", "want"),
    [
        pytest.param({JOBSET: "js", RJOB: "rjob", JOB_INDEX: "0"}, "js-rjob-0-0", id="valid pod"),
        pytest.param(
            {JOBSET: "js", RJOB: "rjob"}, f"pod missing label: {JOB_INDEX}", id="pod missing labels"
        ),
    ],
)
def test_leader_pod_name(labels: dict[str, str], want: str) -> None:
    """pod_webhook_test.go TestLeaderPodName (genLeaderPodName)."""
    if want.startswith("pod missing"):
        with pytest.raises(PlacementError, match=want):
            leader_pod_name(pod(labels=labels))
    else:
        assert leader_pod_name(pod(labels=labels)) == want


# --- pod_webhook_test.go TestPodsOwnedBySameJob -------------------------------------------------------


@pytest.mark.parametrize(
    ("leader_owner", "follower_owner", "want"),
    [
        pytest.param("job-uid-1", "job-uid-1", None, id="pods owned by the same job"),
        pytest.param(
            "job-uid-1",
            "job-uid-2",
            "follower pod owner UID (job-uid-2) != leader pod owner UID (job-uid-1)",
            id="pods owned by different jobs",
        ),
        pytest.param(
            "job-uid-1", None, "follower pod has no owner reference", id="follower pod with no owner"
        ),
        pytest.param(
            None, "job-uid-2", 'leader pod "leader-pod" has no owner reference', id="leader pod with no owner"
        ),
    ],
)
def test_pods_owned_by_same_job(
    leader_owner: str | None, follower_owner: str | None, want: str | None
) -> None:
    """pod_webhook_test.go TestPodsOwnedBySameJob."""
    leader, follower = pod("leader-pod", owner=leader_owner), pod("follower-pod", owner=follower_owner)
    if want is None:
        pods_owned_by_same_job(leader, follower)
        return
    with pytest.raises(PlacementError) as error:
        pods_owned_by_same_job(leader, follower)
    assert error.value.message == want


# --- pod_webhook_test.go TestLeaderPodForFollower --------------------------------------------------------

_ZONE_ANNOTATION = {EXCLUSIVE: ZONE}


def _test_pod(name: str, owner: str = "job-uid-1", **extra: Any) -> Obj:
    """makeTestPod: JobSet labels, the exclusive annotation, a Job controller owner."""
    return pod(name, labels=FOLLOWER_LABELS, annotations=_ZONE_ANNOTATION, owner=owner, **extra)


_FOLLOWER = _test_pod("js-rjob-0-1-abc")
_TEST_LEADER = _test_pod("js-rjob-0-0-xyz")
_NO_JOB_INDEX = pod(
    "js-rjob-0-1-abc", labels={JOBSET: "js", RJOB: "rjob"}, annotations=_ZONE_ANNOTATION, owner="job-uid-1"
)

LEADER_CASES = [
    pytest.param(_FOLLOWER, [_TEST_LEADER], "js-rjob-0-0-xyz", id="valid leader pod exists"),
    pytest.param(_NO_JOB_INDEX, [], f"pod missing label: {JOB_INDEX}", id="follower pod missing labels"),
    pytest.param(_FOLLOWER, [], "expected 1 leader pod (js-rjob-0-0), but got 0", id="no leader pod found"),
    pytest.param(
        _FOLLOWER,
        [_TEST_LEADER, _test_pod("js-rjob-0-0-uvw")],
        "expected 1 leader pod (js-rjob-0-0), but got 2",
        id="multiple leader pods found",
    ),
    pytest.param(
        _FOLLOWER,
        [_test_pod("js-rjob-0-0-xyz", deleting=True)],
        "expected 1 leader pod (js-rjob-0-0), but got 0",
        id="leader pod is terminating",
    ),
    pytest.param(
        _FOLLOWER,
        [_TEST_LEADER, _test_pod("js-rjob-0-0-failed", status={"phase": "Failed"})],
        "js-rjob-0-0-xyz",
        id="active leader alongside failed leader pod",
    ),
    pytest.param(
        _FOLLOWER,
        [_TEST_LEADER, _test_pod("js-rjob-0-0-succeeded", status={"phase": "Succeeded"})],
        "js-rjob-0-0-xyz",
        id="active leader alongside succeeded leader pod",
    ),
    pytest.param(
        _FOLLOWER,
        [_test_pod("js-rjob-0-0-xyz", owner="job-uid-2")],
        "follower pod owner UID (job-uid-1) != leader pod owner UID (job-uid-2)",
        id="leader and follower owned by different jobs",
    ),
]


@pytest.mark.parametrize(("follower", "cached", "want"), LEADER_CASES)
def test_leader_pod_for_follower(follower: Obj, cached: list[Obj], want: str) -> None:
    """pod_webhook_test.go TestLeaderPodForFollower: the leader from the cache's podName index."""
    hooks, _ = webhooks(cached)
    if want.startswith("js-rjob"):
        assert hooks.leader_for_follower(follower)["metadata"]["name"] == want
        return
    with pytest.raises(PlacementError) as error:
        hooks.leader_for_follower(follower)
    assert want in error.value.message


def test_duplicate_leader_pods_a_failed_old_leader_is_ignored() -> None:
    """pod_webhook_test.go TestPodWebhook_DuplicateLeaderPods: the retry's leader admits the follower."""
    labels = {JOBSET: "test-jobset", RJOB: "slice", JOB_INDEX: "0", "jobset.sigs.k8s.io/restart-attempt": "0"}
    annotations = {EXCLUSIVE: ZONE, JOBSET: "test-jobset"}
    old = pod(
        "test-jobset-slice-0-0-oldhash",
        labels={**labels, INDEX: "0"},
        annotations=annotations,
        owner="uid-123",
        status={"phase": "Failed"},
    )
    new = pod(
        "test-jobset-slice-0-0-newhash",
        labels={**labels, INDEX: "0"},
        annotations=annotations,
        owner="uid-123",
        spec={"nodeName": "node-a"},
        status={"phase": "Pending"},
    )
    follower = pod(
        "test-jobset-slice-0-1-randomhash",
        labels={**labels, INDEX: "1"},
        annotations=annotations,
        owner="uid-123",
        spec={"nodeSelector": {ZONE: "zone-a"}},
    )
    hooks, _ = webhooks([old, new, follower])
    hooks.validate_create(follower)


# --- ValidateCreate (pod_webhook.go; its branches have no upstream table) ---------------------------------

_SCHEDULED = [_leader_in_cache("node-a")]
_PINNED = _with(_follower(), spec={"nodeSelector": {ZONE: "zone-a"}})

VALIDATE_CASES = [
    pytest.param(pod(), [], None, id="not a jobset pod"),
    pytest.param(
        pod(annotations={JOBSET: "js", EXCLUSIVE: ZONE, NODE_SELECTOR_MODE: "", INDEX: "1"}),
        [],
        None,
        id="node selector strategy",
    ),
    pytest.param(pod(annotations={JOBSET: "js", INDEX: "1"}), [], None, id="no exclusive placement"),
    pytest.param(pod(annotations={JOBSET: "js", EXCLUSIVE: ZONE, INDEX: "0"}), [], None, id="leader pod"),
    pytest.param(
        _follower(), _SCHEDULED, "follower pod node selector not set", id="follower without nodeSelector"
    ),
    pytest.param(
        _with(_follower(), spec={"nodeSelector": {"other": "x"}}),
        _SCHEDULED,
        f"follower pod node selector for topology domain not found. missing selector: {ZONE}",
        id="follower nodeSelector without the topology key",
    ),
    pytest.param(
        _PINNED,
        [_leader_in_cache()],
        "leader pod not yet scheduled, not creating follower pod. this is an expected, transient error",
        id="leader not scheduled",
    ),
    pytest.param(
        _PINNED,
        [],
        "expected 1 leader pod (js-rjob-0-0), but got 0. this is an expected, transient error",
        id="leader not in the cache",
    ),
    pytest.param(_PINNED, _SCHEDULED, None, id="leader scheduled"),
]


@pytest.mark.parametrize(("follower", "cached", "want"), VALIDATE_CASES)
def test_validate_create(follower: Obj, cached: list[Obj], want: str | None) -> None:
    """podWebhook.ValidateCreate: the denial message (403 Forbidden), or admitted."""
    hooks, stats = webhooks(cached)
    reply = asyncio.run(hooks.validate(follower))
    if want is None:
        assert reply.allowed
        assert stats.jobset_webhook_denied == 0
    else:
        assert reply.status == {"code": 403, "reason": "Forbidden", "message": want}
        assert stats.jobset_webhook_denied == 1
    assert stats.jobset_webhook_calls == 1


def test_configurations_are_jobsets_release_manifests() -> None:
    """config/components/webhook: names, CREATE pods, jobset-name label objectSelector, Fail, None."""
    (mutating, is_mutating), (validating, is_validating) = pod_webhook_configurations()
    assert (is_mutating, is_validating) == (True, False)
    assert mutating["metadata"]["name"] == "jobset-mutating-webhook-configuration"
    assert validating["metadata"]["name"] == "jobset-validating-webhook-configuration"
    for config, name in ((mutating, "mpod.kb.io"), (validating, "vpod.kb.io")):
        (hook,) = config["webhooks"]
        assert hook["name"] == name
        assert hook["rules"] == [
            {"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}
        ]
        assert hook["objectSelector"] == {"matchExpressions": [{"key": JOBSET, "operator": "Exists"}]}
        assert (hook["failurePolicy"], hook["sideEffects"]) == ("Fail", "None")
        assert "namespaceSelector" not in hook


# --- pod_controller.go: indexes, the event filter, removePodNameSuffix -----------------------------------


@pytest.mark.parametrize(
    ("name", "want"),
    [
        ("js-rjob-0-1-abcde", "js-rjob-0-1"),
        ("my-js-rjob-0-1-abcde", "my-js-rjob-0-1"),
        ("rjob-0-1-abcde", None),
        ("p", None),
    ],
)
def test_remove_pod_name_suffix(name: str, want: str | None) -> None:
    assert remove_pod_name_suffix(name) == want


@pytest.mark.parametrize(
    ("obj", "by_name", "by_job"),
    [
        pytest.param(
            pod("js-r-0-1-abcde", labels={JOB_KEY: "k"}, annotations={EXCLUSIVE: ZONE}),
            ["js-r-0-1"],
            ["k"],
            id="exclusive pod",
        ),
        pytest.param(pod("js-r-0-1-abcde", labels={JOB_KEY: "k"}), [], [], id="no exclusive annotation"),
        pytest.param(pod("short-name", annotations={EXCLUSIVE: ZONE}), [], [], id="short name, no job-key"),
    ],
)
def test_indexes(obj: Obj, by_name: list[str], by_job: list[str]) -> None:
    """IndexPodName / IndexPodJob."""
    assert (index_pod_name(obj), index_pod_job(obj)) == (by_name, by_job)


_SCHEDULED_LEADER = pod(annotations={EXCLUSIVE: ZONE, INDEX: "0"}, spec={"nodeName": "n"})


@pytest.mark.parametrize(
    ("obj", "want"),
    [
        pytest.param(_SCHEDULED_LEADER, True, id="scheduled exclusive leader"),
        pytest.param(pod(annotations={EXCLUSIVE: ZONE, INDEX: "0"}), False, id="unscheduled leader"),
        pytest.param(
            pod(annotations={EXCLUSIVE: ZONE, INDEX: "1"}, spec={"nodeName": "n"}), False, id="follower"
        ),
        pytest.param(
            pod(annotations={INDEX: "0"}, spec={"nodeName": "n"}), False, id="no exclusive placement"
        ),
        pytest.param(
            pod(annotations={EXCLUSIVE: ZONE, INDEX: "0"}, spec={"nodeName": "n"}, deleting=True),
            False,
            id="deleting leader",
        ),
    ],
)
def test_reconciler_event_filter(obj: Obj, want: bool) -> None:
    """PodReconciler.SetupWithManager's predicate."""
    assert reconciles(obj) is want


# --- pod_controller_test.go TestValidatePodPlacements ---------------------------------------------------

TOPOLOGY_KEY = "test-node-topologyKey"
_LEADER_PC = pod(annotations={EXCLUSIVE: TOPOLOGY_KEY, INDEX: "0"}, spec={"nodeName": "test-node"})


def _follower_pc(selector: dict[str, str] | None) -> Obj:
    return pod(
        annotations={EXCLUSIVE: TOPOLOGY_KEY, INDEX: "1"},
        spec={} if selector is None else {"nodeSelector": selector},
    )


_DOMAIN = {TOPOLOGY_KEY: "topologyDomain"}
PLACEMENT_CASES = [
    pytest.param(
        node("test-node"),
        {**_DOMAIN},
        f"node does not have topology label: {TOPOLOGY_KEY}",
        id="topology node label not found",
    ),
    pytest.param(node("test-node", _DOMAIN), _DOMAIN, True, id="valid pod placements"),
    pytest.param(node("test-node", _DOMAIN), None, False, id="follower pod nodeSelector is nil"),
    pytest.param(node("test-node", _DOMAIN), {}, False, id="follower pod nodeSelector is empty"),
    pytest.param(
        node("test-node", _DOMAIN),
        {TOPOLOGY_KEY: "topologyDomain1"},
        False,
        id="followerTopology != leaderTopology",
    ),
    pytest.param(
        None,
        _DOMAIN,
        "leader topology is unknown (node not found)",
        id="leader topology unknown retries instead of deleting followers",
    ),
]


@pytest.mark.parametrize(("leader_node", "selector", "want"), PLACEMENT_CASES)
def test_validate_pod_placements(
    leader_node: Obj | None, selector: dict[str, str] | None, want: bool | str
) -> None:
    """pod_controller_test.go TestValidatePodPlacements (its "get node error" case has no counterpart: a
    cache read cannot fail)."""
    pods = [_LEADER_PC, _follower_pc(selector)]
    if isinstance(want, str):
        with pytest.raises(PlacementError) as error:
            placements_valid(leader_pod_topology(leader_node, TOPOLOGY_KEY), pods, TOPOLOGY_KEY)
        assert error.value.message == want
    else:
        assert placements_valid(leader_pod_topology(leader_node, TOPOLOGY_KEY), pods, TOPOLOGY_KEY) is want


# --- updatePodCondition ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("conditions", "want_statuses"),
    [
        pytest.param([], ["True"], id="added"),
        pytest.param([{"type": "DisruptionTarget", "status": "False"}], ["True"], id="False flipped to True"),
        pytest.param([{"type": "DisruptionTarget", "status": "True"}], None, id="already True: no update"),
        pytest.param([{"type": "Ready", "status": "True"}], ["True", "True"], id="other conditions kept"),
    ],
)
def test_violation_condition(conditions: list[Obj], want_statuses: list[str] | None) -> None:
    updated = with_violation_condition(pod(status={"conditions": conditions}), "2026-01-01T00:00:00Z")
    if want_statuses is None:
        assert updated is None
        return
    assert updated is not None
    assert [c["status"] for c in updated["status"]["conditions"]] == want_statuses
    mark = next(c for c in updated["status"]["conditions"] if c["type"] == "DisruptionTarget")
    assert (mark["reason"], mark["message"]) == (
        "ExclusivePlacementViolation",
        "Pod violated JobSet exclusive placement policy",
    )


# --- pod_controller_test.go TestListPodsForJob, TestDeleteFollowerPods, TestReconcile... ------------------


@dataclass
class FakeApi:
    """Records the reconciler's writes; `fail` names the verbs that answer 500."""

    fail: set[str] = field(default_factory=set)
    calls: list[tuple[str, str]] = field(default_factory=list)

    async def update(
        self,
        resource: str,
        obj: Obj,
        *,
        namespace: str | None = None,
        subresource: str | None = None,
        client: str = "",
    ) -> Obj:
        self.calls.append((f"update {resource}/{subresource}", obj["metadata"]["name"]))
        if "update" in self.fail:
            raise ApiError(500, "InternalError", "example error")
        return obj

    async def delete(
        self, resource: str, name: str, *, namespace: str | None = None, client: str = ""
    ) -> Obj:
        self.calls.append((f"delete {resource}", name))
        if "delete" in self.fail:
            raise ApiError(500, "InternalError", "example error")
        return {}


def reconciler(api: Any, pods: Sequence[Obj], nodes: Sequence[Obj] = ()) -> JobSetPodReconciler:
    """JobSet's pod reconciler writing to `api`, on caches holding `pods` and `nodes`."""
    return JobSetPodReconciler(
        api=api, clock=Clock(0.01), pods=informer("pods", pods), nodes=informer("nodes", nodes)
    )


def test_list_pods_for_job_keeps_only_pods_of_the_leaders_job() -> None:
    """pod_controller_test.go TestListPodsForJob "with inconsistent and unowned pods"."""
    labels = {JOB_KEY: "key"}
    annotations = {EXCLUSIVE: "topologyKey"}
    pods = [
        pod("leader-pod", labels=labels, annotations=annotations, owner="job-uid-1"),
        pod("follower-pod", labels=labels, annotations=annotations, owner="job-uid-1"),
        pod("inconsistent-pod", labels=labels, annotations=annotations, owner="job-uid-2"),
        pod("unowned-pod", labels=labels, annotations=annotations),
    ]
    found = reconciler(FakeApi(), pods).pods_for_job("default", "key", "job-uid-1")
    assert sorted(p["metadata"]["name"] for p in found) == ["follower-pod", "leader-pod"]


_LEADER_DF = pod(
    "test-jobset-replicated-job-1-test-job-0-0", annotations={INDEX: "0"}, spec={"nodeName": "test-node"}
)


def _follower_df(conditions: list[Obj] | None = None) -> Obj:
    return pod(
        "test-jobset-replicated-job-1-test-job-0-1",
        annotations={INDEX: "1"},
        status={"conditions": conditions} if conditions is not None else None,
    )


_FALSE_MARK = [{"type": "DisruptionTarget", "status": "False", "reason": "ExclusivePlacementViolation"}]
_TRUE_MARK = [{"type": "DisruptionTarget", "status": "True", "reason": "ExclusivePlacementViolation"}]
FOLLOWER = "test-jobset-replicated-job-1-test-job-0-1"
DELETE_CASES = [
    pytest.param(
        _follower_df(),
        set(),
        [("update pods/status", FOLLOWER), ("delete pods", FOLLOWER)],
        False,
        id="delete follower pods",
    ),
    pytest.param(
        _follower_df(_FALSE_MARK),
        set(),
        [("update pods/status", FOLLOWER), ("delete pods", FOLLOWER)],
        False,
        id="delete follower pods with pod conditions status is false",
    ),
    pytest.param(
        _follower_df(_FALSE_MARK),
        {"update", "delete"},
        [("update pods/status", FOLLOWER)],
        True,
        id="delete follower pods with update pod status error",
    ),
    pytest.param(
        _follower_df(_TRUE_MARK),
        {"update", "delete"},
        [("delete pods", FOLLOWER)],
        True,
        id="delete follower pods with delete error",
    ),
]


@pytest.mark.parametrize(("follower", "fail", "want_calls", "want_error"), DELETE_CASES)
def test_delete_follower_pods(
    follower: Obj, fail: set[str], want_calls: list[tuple[str, str]], want_error: bool
) -> None:
    """pod_controller_test.go TestDeleteFollowerPods: the leader is never touched; a follower is marked
    (unless already marked True) then deleted; a failed mark skips its delete; errors are returned."""
    api = FakeApi(fail)
    pods = reconciler(api, [])
    if want_error:
        with pytest.raises(ApiError, match="example error"):
            asyncio.run(pods.delete_followers([_LEADER_DF, follower]))
    else:
        asyncio.run(pods.delete_followers([_LEADER_DF, follower]))
    assert api.calls == want_calls


def test_reconcile_deletes_mismatched_follower_pods_on_the_api_server() -> None:
    """pod_controller_test.go TestReconcileDeletesMismatchedFollowerPods, against kubesim's API server:
    the follower is marked through pods/status and deleted, both as the JobSet manager's client."""

    async def scenario() -> None:
        server = ApiServer(Stats(), seed=0)
        labels = {JOB_KEY: "job-key-1"}
        container = {"containers": [{"name": "c", "image": "busybox"}]}
        leader = pod(
            "test-jobset-rj-0-0-abcde",
            labels=labels,
            annotations={EXCLUSIVE: TOPOLOGY_KEY, INDEX: "0"},
            owner="job-uid-1",
            spec={**container, "nodeName": "test-node"},
        )
        follower = pod(
            "test-jobset-rj-0-1-abcde",
            labels=labels,
            annotations={EXCLUSIVE: TOPOLOGY_KEY, INDEX: "1"},
            owner="job-uid-1",
            spec={**container, "nodeSelector": {TOPOLOGY_KEY: "wrong-topology"}},
        )
        created = [await server.create("pods", obj, namespace="default") for obj in (leader, follower)]
        server.stats.reset()
        pods = reconciler(server, created, [node("test-node", {TOPOLOGY_KEY: "expected-topology"})])
        await pods.reconcile("default/test-jobset-rj-0-0-abcde")
        assert server.stats.by_verb_resource == {"update pods/status": 1, "delete pods": 1}
        assert server.stats.by_client == {"jobset-controller": 2}
        remaining, _ = await server.list("pods", namespace="default")
        assert [p["metadata"]["name"] for p in remaining] == ["test-jobset-rj-0-0-abcde"]
        await server.aclose()

    asyncio.run(scenario())
