"""kwok's part: Stage manifests for the fake kubelets, and the Node objects it runs (devstack.shape).

The Stages are kwok's own, taken from its module by `make kube` (manifests/kwok/):
- nodes: `node-initialize` (Ready, addresses, the capacity the Node object declares) and
  `node-heartbeat-with-lease` (node Leases, as kubelets renew them);
- pods: `pod-ready` of kwok's "fast" set (a bound pod becomes Running and Ready at once), and beside it
  `pod-ready-after-start-time`, the same for the pods that carry `START_TIME_ANNOTATION` (a duration such
  as `2000ms`, `start_time_annotations`): they become Running and Ready that long after kwok sees them
  bound, as a container that takes time to start would; `pod-delete`
  (a deleted pod goes away at once) and `pod-complete` of its "general" set, changed in two ways so that
  a pod runs until it is deleted unless it asks for a run time:
  - it applies only to pods that carry `pod-complete.stage.kwok.x-k8s.io/delay` (upstream completes every
    Job pod 1 to 5 s after it is Ready);
  - the default jitter of 5 s is dropped. kwok takes a jitter that is not above the delay as the delay
    itself, so upstream's default would cut any run time above 5 s down to 5 s.
  `run_time_annotations` sets both the delay and the jitter to the same value: a fixed run time.
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import yaml

from devstack.shape import ClusterShape, cluster_nodes

Obj = dict[str, Any]

NODE_STAGES = ("node-initialize.yaml", "node-heartbeat-with-lease.yaml")
POD_STAGES = ("pod-ready.yaml", "pod-complete.yaml", "pod-delete.yaml")
RUN_TIME_ANNOTATION = "pod-complete.stage.kwok.x-k8s.io/delay"
RUN_TIME_JITTER_ANNOTATION = "pod-complete.stage.kwok.x-k8s.io/jitter-delay"
START_TIME_ANNOTATION = "pod-ready.stage.kwok.x-k8s.io/delay"
KWOK_NODE_ANNOTATION = "kwok.x-k8s.io/node"
NODE_FAULT_ANNOTATION = "devstack.exclusive-placement.io/node-fault"
"""A node or pod carrying it is left alone by kwok's Stages: the status a fault gave a node (Ready=False)
stays, and the pods bound to a failed node make no progress (a dead kubelet reports nothing)."""


class StageError(RuntimeError):
    """A Stage manifest from the kwok module is not shaped as this module expects."""


def run_time_annotations(seconds: float) -> dict[str, str]:
    """Pod annotations that make kwok complete the pod `seconds` after it is Running."""
    value = f"{round(seconds * 1000)}ms"
    return {RUN_TIME_ANNOTATION: value, RUN_TIME_JITTER_ANNOTATION: value}


def start_time_annotations(seconds: float) -> dict[str, str]:
    """Pod annotations that make kwok start the pod (Running and Ready) `seconds` after it is bound."""
    return {START_TIME_ANNOTATION: f"{round(seconds * 1000)}ms"}


def _load_stage(path: Path) -> Obj:
    stage = yaml.safe_load(path.read_text())
    if not isinstance(stage, dict) or stage.get("kind") != "Stage":
        raise StageError(f"{path} is not a kwok Stage")
    return stage


def _with_selector(stage: Obj, expression: Obj) -> Obj:
    """A copy of `stage` that also requires `expression` of the objects it applies to."""
    result = copy.deepcopy(stage)
    result["spec"].setdefault("selector", {}).setdefault("matchExpressions", []).append(expression)
    return result


def completion_on_request(stage: Obj) -> Obj:
    """kwok's general `pod-complete`, applied only to pods that ask for a run time, with no default jitter."""
    key = f'.metadata.annotations["{RUN_TIME_ANNOTATION}"]'
    result = _with_selector(stage, {"key": key, "operator": "Exists"})
    delay = result["spec"].get("delay")
    if not isinstance(delay, dict) or "durationFrom" not in delay:
        raise StageError("kwok's pod-complete Stage no longer reads its delay from an annotation")
    delay.pop("jitterDurationMilliseconds", None)
    return result


def readiness_split_by_start_time(stage: Obj) -> list[Obj]:
    """kwok's fast `pod-ready` for the pods without `START_TIME_ANNOTATION` (unchanged: at once), and a copy
    for the pods with it that waits that long (none is read as no wait)."""
    key = f'.metadata.annotations["{START_TIME_ANNOTATION}"]'
    at_once = _with_selector(stage, {"key": key, "operator": "DoesNotExist"})
    delayed = _with_selector(stage, {"key": key, "operator": "Exists"})
    delayed["metadata"]["name"] = f"{stage['metadata']['name']}-after-start-time"
    delayed["spec"]["delay"] = {"durationMilliseconds": 0, "durationFrom": {"expressionFrom": key}}
    return [at_once, delayed]


def unless_faulted(stage: Obj) -> Obj:
    """A Stage that does not apply to the nodes and pods a fault took over (`NODE_FAULT_ANNOTATION`)."""
    key = f'.metadata.annotations["{NODE_FAULT_ANNOTATION}"]'
    return _with_selector(stage, {"key": key, "operator": "DoesNotExist"})


def _pod_stages(name: str, stage: Obj) -> list[Obj]:
    """What one of kwok's pod Stages becomes here (the module's docstring)."""
    if name == "pod-ready.yaml":
        return readiness_split_by_start_time(stage)
    if name == "pod-complete.yaml":
        return [completion_on_request(stage)]
    return [stage]


def stages(manifests_dir: Path) -> list[Obj]:
    """Every Stage the fake kubelets run, in the order kwok is given them."""
    kwok_dir = manifests_dir / "kwok"
    result = [unless_faulted(_load_stage(kwok_dir / name)) for name in NODE_STAGES]
    for name in POD_STAGES:
        result.extend(unless_faulted(stage) for stage in _pod_stages(name, _load_stage(kwok_dir / name)))
    return result


def kwok_nodes(count: int, pools: int, *, gpus_per_node: int) -> list[Obj]:
    """The cluster's nodes (pools, zones, racks, GPUs) for kwok to run: kwok sets their conditions,
    addresses and heartbeats itself."""
    nodes = cluster_nodes(ClusterShape(count, pools, gpus_per_node), cluster_name="kwok")
    for node in nodes:
        node["metadata"]["annotations"] = {KWOK_NODE_ANNOTATION: "fake"}
    return nodes
