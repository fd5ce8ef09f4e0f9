"""Queueing hints: which cluster event moves which waiting pod.

The table cases transcribe kube-scheduler's own hint tests as data (kubernetes/kubernetes
pkg/scheduler/framework/plugins/interpodaffinity/plugin_test.go: `PC:` Test_isSchedulableAfterPodChange,
`NC:` Test_isSchedulableAfterNodeChange), plus cases of the other plugins' hints; the behaviour tests run
the scheduler on the in-process cluster and look at where the waiting pod sits in the scheduling queue.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pytest

from kubesim.controllers.cluster_events import (
    Action,
    ClusterEvent,
    Resource,
    node_added,
    node_updated,
    pod_added,
    pod_deleted,
    pod_updated,
)
from kubesim.controllers.podinfo import (
    INTER_POD_AFFINITY,
    NODE_AFFINITY,
    NODE_RESOURCES_FIT,
    NODE_UNSCHEDULABLE,
    SCHEDULING_GATES,
    TAINT_TOLERATION,
    PodInfo,
)
from kubesim.controllers.queueing_hints import worth_requeuing
from placement.constants import GKE_NODEPOOL_LABEL
from tests.kubesim.controllers.ctrl_harness import Cluster, Run, cluster, pod_spec

pytestmark = pytest.mark.timeout(120)

Obj = dict[str, Any]


def _pod(
    name: str = "p",
    labels: dict[str, str] | None = None,
    node: str = "",
    affinity: tuple[Obj, ...] = (),
    anti: tuple[Obj, ...] = (),
    **spec: Any,
) -> Obj:
    body: Obj = {**spec, "affinity": {}}
    if affinity:
        body["affinity"]["podAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": list(affinity)}
    if anti:
        body["affinity"]["podAntiAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": list(anti)}
    if node:
        body["nodeName"] = node
    return {
        "metadata": {"name": name, "namespace": "default", "uid": f"uid-{name}", "labels": labels or {}},
        "spec": body,
    }


def _term(key: str, topology: str, operator: str = "In", values: tuple[str, ...] = ()) -> Obj:
    expression: Obj = {"key": key, "operator": operator}
    if values:
        expression["values"] = list(values)
    return {"labelSelector": {"matchExpressions": [expression]}, "topologyKey": topology}


def _node(name: str = "node-a", labels: dict[str, str] | None = None, **spec: Any) -> Obj:
    return {
        "metadata": {"name": name, "labels": labels or {}},
        "spec": spec,
        "status": {"allocatable": {"cpu": "8", "memory": "32Gi", "pods": "110"}},
    }


AFFINITY_IN = _pod(affinity=(_term("service", "region", values=("securityscan", "value2")),))
ANTI_IN = _pod(anti=(_term("service", "region", values=("securityscan", "value2")),))
TWO_EXISTS = _pod(affinity=(_term("aaa", "hostname", "Exists"), _term("bbb", "hostname", "Exists")))
ZONE_AFFINITY = _pod(affinity=(_term("service", "zone", values=("securityscan", "value2")),))
ZONE_ANTI = _pod(anti=({"labelSelector": {"matchLabels": {"another": "label"}}, "topologyKey": "zone"},))
SCANNED_ON_NODE = _pod("x", {"service": "securityscan"}, node="fake-node")


@dataclass
class HintCase:
    name: str
    waiting: Obj
    rejectors: tuple[str, ...]
    event: ClusterEvent
    queue: bool


def _updated(old: Obj, new: Obj) -> ClusterEvent:
    (event,) = [e for e in pod_updated(old, new) if e.action is not Action.UPDATE_POD_OTHER] or pod_updated(
        old, new
    )
    return event


def _node_update(old: Obj, new: Obj) -> ClusterEvent:
    (event,) = node_updated(old, new)
    return event


IPA = (INTER_POD_AFFINITY,)

HINT_CASES = [
    HintCase(
        "PC: add a pod which matches the pod affinity", AFFINITY_IN, IPA, pod_added(SCANNED_ON_NODE), True
    ),
    HintCase(
        "PC: add an un-scheduled pod",
        AFFINITY_IN,
        IPA,
        pod_added(_pod("x", {"service": "securityscan"})),
        False,
    ),
    HintCase(
        "PC: add a pod which doesn't match the pod affinity",
        AFFINITY_IN,
        IPA,
        pod_added(_pod("x", {"aaa": "a"}, node="fake-node")),
        False,
    ),
    HintCase(
        "PC: update a pod from non-match to match pod affinity",
        AFFINITY_IN,
        IPA,
        _updated(_pod("x", {"aaa": "a"}, node="fake-node"), SCANNED_ON_NODE),
        True,
    ),
    HintCase(
        "PC: the updating pod matches target pod's affinity both before and after label changes",
        AFFINITY_IN,
        IPA,
        _updated(_pod("x", {"service": "value2"}, node="fake-node"), SCANNED_ON_NODE),
        False,
    ),
    HintCase(
        "PC: update an un-scheduled pod",
        AFFINITY_IN,
        IPA,
        _updated(_pod("x", {"service": "value2"}), _pod("x", {"service": "securityscan"})),
        False,
    ),
    HintCase(
        "PC: update a pod from match to non-match the pod affinity",
        AFFINITY_IN,
        IPA,
        _updated(SCANNED_ON_NODE, _pod("x", {"aaa": "a"}, node="fake-node")),
        False,
    ),
    HintCase(
        "PC: update a pod from match to non-match pod's affinity - multiple terms case",
        TWO_EXISTS,
        IPA,
        _updated(
            _pod("x", {"aaa": "a"}, node="fake-node"),
            _pod("x", {"service": "securityscan"}, node="fake-node"),
        ),
        False,
    ),
    HintCase(
        "PC: update a pod from non-match to match pod's affinity - multiple terms case",
        TWO_EXISTS,
        IPA,
        _updated(
            _pod("x", {"aaa": "a"}, node="fake-node"), _pod("x", {"aaa": "", "bbb": ""}, node="fake-node")
        ),
        True,
    ),
    HintCase(
        "PC: modify pod label to change it from satisfying pod anti-affinity to not satisfying anti-affinity",
        ANTI_IN,
        IPA,
        _updated(SCANNED_ON_NODE, _pod("x", {"service": "aaaa"}, node="fake-node")),
        True,
    ),
    HintCase(
        "PC: modify pod label to change it from not satisfying pod anti-affinity to satisfying anti-affinity",
        ANTI_IN,
        IPA,
        _updated(_pod("x", {"service": "bbb"}, node="fake-node"), SCANNED_ON_NODE),
        False,
    ),
    HintCase(
        "PC: delete a pod which doesn't match pod's anti-affinity",
        ANTI_IN,
        IPA,
        pod_deleted(_pod("x", {"aaa": "a"}, node="fake-node")),
        False,
    ),
    HintCase(
        "PC: delete a pod which matches pod's anti-affinity", ANTI_IN, IPA, pod_deleted(SCANNED_ON_NODE), True
    ),
    HintCase(
        "kubernetes#135325: delete a pod whose own anti-affinity matched the waiting pod",
        _pod(labels={"app": "web"}),
        IPA,
        pod_deleted(_pod("x", node="fake-node", anti=(_term("app", "zone", values=("web",)),))),
        True,
    ),
    HintCase(
        "kubernetes#139161: delete a pod matching one of several anti-affinity terms",
        _pod(anti=(_term("service", "zone", values=("securityscan",)), _term("other", "zone", "Exists"))),
        IPA,
        pod_deleted(SCANNED_ON_NODE),
        True,
    ),
    HintCase(
        "kubernetes#135394: the waiting pod's own labels changed",
        AFFINITY_IN,
        IPA,
        _updated(
            AFFINITY_IN, {**AFFINITY_IN, "metadata": {**AFFINITY_IN["metadata"], "labels": {"new": "x"}}}
        ),
        True,
    ),
    HintCase(
        "NC: add a new node with matched pod affinity topologyKey",
        ZONE_AFFINITY,
        IPA,
        node_added(_node(labels={"zone": "zone1"})),
        True,
    ),
    HintCase(
        "NC: add a new node without matched topologyKey",
        AFFINITY_IN,
        IPA,
        node_added(_node(labels={"zone": "zone1"})),
        False,
    ),
    HintCase(
        "NC: update node label but not topologyKey",
        ZONE_AFFINITY,
        IPA,
        _node_update(_node(labels={"aaa": "a"}), _node(labels={"aaa": "b"})),
        False,
    ),
    HintCase(
        "NC: update node label that isn't related to the pod affinity",
        ZONE_AFFINITY,
        IPA,
        _node_update(
            _node(labels={"zone": "zone1"}), _node(labels={"zone": "zone1", "unrelated-label": "x"})
        ),
        False,
    ),
    HintCase(
        "NC: update node with different affinity topologyKey value",
        ZONE_AFFINITY,
        IPA,
        _node_update(_node(labels={"zone": "zone1"}), _node(labels={"zone": "zone2"})),
        True,
    ),
    HintCase(
        "NC: update node to have the affinity topology label",
        ZONE_AFFINITY,
        IPA,
        _node_update(_node(labels={"aaa": "a"}), _node(labels={"zone": "zone1"})),
        True,
    ),
    HintCase(
        "NC: add a new node with matched pod anti-affinity topologyKey",
        ZONE_ANTI,
        IPA,
        node_added(_node(labels={"zone": "zone1"})),
        True,
    ),
    HintCase(
        "NC: add a new node without matched pod anti-affinity topologyKey",
        ZONE_ANTI,
        IPA,
        node_added(_node()),
        True,
    ),
    HintCase(
        "NC: update node label that isn't related to the pod anti-affinity",
        ZONE_ANTI,
        IPA,
        _node_update(
            _node(labels={"zone": "zone1"}), _node(labels={"zone": "zone1", "unrelated-label": "x"})
        ),
        False,
    ),
    HintCase(
        "NC: update node with different anti-affinity topologyKey value",
        ZONE_ANTI,
        IPA,
        _node_update(_node(labels={"zone": "zone1"}), _node(labels={"zone": "zone2"})),
        True,
    ),
    HintCase(
        "NC: update node to have the anti-affinity topology label",
        ZONE_ANTI,
        IPA,
        _node_update(_node(labels={"aaa": "a"}), _node(labels={"zone": "zone1"})),
        False,
    ),
    HintCase(
        "NC: update node label not to have anti-affinity topology label",
        ZONE_ANTI,
        IPA,
        _node_update(_node(labels={"zone": "zone1"}), _node(labels={"aaa": "a"})),
        True,
    ),
    HintCase(
        "NodeAffinity: an added node matching the nodeSelector",
        _pod(nodeSelector={"pool": "a"}),
        (NODE_AFFINITY,),
        node_added(_node(labels={"pool": "a"})),
        True,
    ),
    HintCase(
        "NodeAffinity: an updated node that already matched",
        _pod(nodeSelector={"pool": "a"}),
        (NODE_AFFINITY,),
        _node_update(_node(labels={"pool": "a"}), _node(labels={"pool": "a", "x": "y"})),
        False,
    ),
    HintCase(
        "NodeAffinity: a pod deletion does not help a node affinity rejection",
        _pod(nodeSelector={"pool": "a"}),
        (NODE_AFFINITY,),
        pod_deleted(SCANNED_ON_NODE),
        False,
    ),
    HintCase(
        "NodeResourcesFit: a scheduled pod's deletion",
        _pod(),
        (NODE_RESOURCES_FIT,),
        pod_deleted(SCANNED_ON_NODE),
        True,
    ),
    HintCase(
        "NodeResourcesFit: an unscheduled pod's deletion",
        _pod(),
        (NODE_RESOURCES_FIT,),
        pod_deleted(_pod("x")),
        False,
    ),
    HintCase(
        "NodeResourcesFit: a node too small even when empty",
        _pod(containers=[{"name": "c", "resources": {"requests": {"cpu": "16"}}}]),
        (NODE_RESOURCES_FIT,),
        node_added(_node()),
        False,
    ),
    HintCase(
        "TaintToleration: a node's untolerated taint removed",
        _pod(),
        (TAINT_TOLERATION,),
        _node_update(_node(taints=[{"key": "k", "effect": "NoSchedule"}]), _node(taints=[])),
        True,
    ),
    HintCase(
        "NodeUnschedulable: a node uncordoned",
        _pod(),
        (NODE_UNSCHEDULABLE,),
        _node_update(_node(unschedulable=True), _node()),
        True,
    ),
    HintCase(
        "SchedulingGates: the waiting pod's gates removed",
        _pod(schedulingGates=[{"name": "g"}]),
        (SCHEDULING_GATES,),
        _updated(_pod(schedulingGates=[{"name": "g"}]), _pod()),
        True,
    ),
    HintCase(
        "SchedulingGates: another pod's gates removed",
        _pod(schedulingGates=[{"name": "g"}]),
        (SCHEDULING_GATES,),
        _updated(_pod("x", schedulingGates=[{"name": "g"}]), _pod("x")),
        False,
    ),
    HintCase(
        "a pod with two rejecting plugins moves when either hint says Queue",
        _pod(nodeSelector={"pool": "a"}),
        (NODE_AFFINITY, NODE_RESOURCES_FIT),
        pod_deleted(SCANNED_ON_NODE),
        True,
    ),
    HintCase(
        "an event none of the rejecting plugins registered for",
        _pod(),
        (NODE_RESOURCES_FIT,),
        ClusterEvent(Resource.NODE, Action.UPDATE_NODE_CONDITION, _node(), _node()),
        False,
    ),
]


@pytest.mark.parametrize("case", HINT_CASES, ids=lambda c: c.name)
def test_queueing_hint(case: HintCase) -> None:
    assert worth_requeuing(PodInfo.of(case.waiting), case.rejectors, case.event, {}) is case.queue


# --- behaviour on the in-process cluster ----------------------------------------------------------------


SLOW_BACKOFF: dict[str, Any] = {
    "scheduler_initial_backoff_seconds": 30.0,
    "scheduler_max_backoff_seconds": 30.0,
}
"""A moved pod then sits visibly in backoffQ (0.3 s of real time) instead of being retried at once."""


def _bare_pod(name: str, **spec: Any) -> Obj:
    labels = spec.pop("labels", {})
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "namespace": "default", "labels": labels},
        "spec": {**pod_spec(gpus=1), **spec},
    }


async def _node_names(c: Cluster) -> list[str]:
    items, _ = await c.server.list("nodes")
    return sorted(n["metadata"]["name"] for n in items)


async def _parked(c: Cluster, name: str) -> None:
    """Wait until the pod was tried and parked in the unschedulable pool."""
    queue = c.controllers.scheduler.queue
    await c.wait_for(lambda: queue.sizes() == (0, 0, 1) and f"default/{name}" in queue, 30, f"{name} parked")


async def _gone(c: Cluster, name: str) -> None:
    """Delete a pod at once and wait until the scheduler's informer has seen it go."""
    await c.server.delete("pods", name, namespace="default", grace_period_seconds=0)
    await c.wait_for(lambda: c.controllers.pods.get(f"default/{name}") is None, 30, f"{name} gone")


async def _bound_to(c: Cluster, name: str) -> str | None:
    pod = await c.server.get("pods", name, namespace="default")
    node: str | None = pod["spec"].get("nodeName")
    return node


def test_a_pod_rejected_by_node_affinity_ignores_pod_deletions(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=4, pools=2, components=("scheduler",), **SLOW_BACKOFF) as c:
            await c.server.create("pods", _bare_pod("other"), namespace="default")
            await c.wait_for(lambda: _bound_to(c, "other"), 30, "other bound")
            await c.server.create(
                "pods", _bare_pod("nowhere", nodeSelector={"pool": "none"}), namespace="default"
            )
            await _parked(c, "nowhere")
            await _gone(c, "other")
            assert c.controllers.scheduler.queue.sizes() == (0, 0, 1)

    run(scenario())


def test_a_node_label_change_moves_only_the_pods_it_lets_in(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=4, pools=2, components=("scheduler",), **SLOW_BACKOFF) as c:
            await c.server.create(
                "pods", _bare_pod("picky", nodeSelector={"dedicated": "ml"}), namespace="default"
            )
            await _parked(c, "picky")
            name = (await _node_names(c))[0]
            await c.server.patch("nodes", name, {"metadata": {"labels": {"unrelated": "x"}}})
            await c.wait_for(
                lambda: "unrelated" in c.controllers.scheduler.nodes[name].labels, 30, "relabelled"
            )
            assert c.controllers.scheduler.queue.sizes() == (0, 0, 1)
            await c.server.patch("nodes", name, {"metadata": {"labels": {"dedicated": "ml"}}})
            assert await c.wait_for(lambda: _bound_to(c, "picky"), 30, "picky bound") == name

    run(scenario())


def test_a_pod_waiting_for_affinity_moves_only_when_a_matching_pod_is_bound(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=2, pools=1, components=("scheduler",), **SLOW_BACKOFF) as c:
            first, second = await _node_names(c)
            affinity = {
                "podAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {
                            "labelSelector": {"matchLabels": {"app": "db"}},
                            "topologyKey": "kubernetes.io/hostname",
                        }
                    ]
                }
            }
            web = _bare_pod("web", labels={"app": "web"}, affinity=affinity)
            await c.server.create("pods", web, namespace="default")
            await _parked(c, "web")
            cache = _bare_pod(
                "cache", labels={"app": "cache"}, nodeSelector={"kubernetes.io/hostname": first}
            )
            await c.server.create("pods", cache, namespace="default")
            await c.wait_for(
                lambda: (c.controllers.pods.get("default/cache") or {}).get("spec", {}).get("nodeName"), 30
            )
            assert c.controllers.scheduler.queue.sizes() == (0, 0, 1)
            db = _bare_pod("db", labels={"app": "db"}, nodeSelector={"kubernetes.io/hostname": second})
            await c.server.create("pods", db, namespace="default")
            assert await c.wait_for(lambda: _bound_to(c, "web"), 30, "web bound next to db") == second

    run(scenario())


def test_a_pod_blocked_by_an_existing_pods_anti_affinity_moves_when_that_pod_goes(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=2, pools=1, components=("scheduler",), **SLOW_BACKOFF) as c:
            anti = {
                "podAntiAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": [
                        {"labelSelector": {"matchLabels": {"app": "web"}}, "topologyKey": GKE_NODEPOOL_LABEL}
                    ]
                }
            }
            await c.server.create(
                "pods", _bare_pod("loner", labels={"app": "loner"}, affinity=anti), namespace="default"
            )
            await c.server.create("pods", _bare_pod("bystander"), namespace="default")
            await c.wait_for(lambda: _bound_to(c, "loner"), 30, "loner bound")
            await c.wait_for(lambda: _bound_to(c, "bystander"), 30, "bystander bound")
            await c.server.create("pods", _bare_pod("web", labels={"app": "web"}), namespace="default")
            await _parked(c, "web")
            await _gone(c, "bystander")
            assert c.controllers.scheduler.queue.sizes() == (0, 0, 1)
            await _gone(c, "loner")
            await c.wait_for(lambda: _bound_to(c, "web"), 30, "web bound once the loner left")

    run(scenario())


def test_a_gated_pod_waits_in_the_unschedulable_pool_without_attempts(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=2, pools=1, components=("scheduler",)) as c:
            gated = _bare_pod("gated", schedulingGates=[{"name": "example.com/wait"}])
            await c.server.create("pods", gated, namespace="default")
            await _parked(c, "gated")
            assert c.stats.scheduler_attempts == 0
            await c.server.patch("pods", "gated", {"spec": {"schedulingGates": None}}, namespace="default")
            await c.wait_for(lambda: _bound_to(c, "gated"), 30, "gated pod bound")
            assert c.stats.scheduler_attempts == 1

    run(scenario())
