"""The pod statuses a kubelet writes (pkg/kubelet/kubelet_pods.go generateAPIPodStatus) and how its status
manager merges them into the API's copy (pkg/kubelet/status/status_manager.go mergePodStatus).

A pod without probes or init containers goes through two statuses after admission:

1. Pending: containers waiting `ContainerCreating`, PodReadyToStartContainers=False (no sandbox yet),
   Initialized=True, Ready and ContainersReady False (`ContainersNotReady`), PodScheduled=True;
2. Running: pod IP, containers running and (no readiness probe) ready, every condition True.

Pure: plain dicts in and out.
"""

from __future__ import annotations

import hashlib
from typing import Any

from .objects import Obj, new_condition, object_key

KUBELET_CONDITIONS = frozenset(
    {"PodScheduled", "Ready", "Initialized", "ContainersReady", "PodReadyToStartContainers"}
)
"""kubetypes.PodConditionsByKubelet: the conditions the kubelet owns and rewrites on every status."""
TERMINAL_PHASES = frozenset({"Succeeded", "Failed"})


def _digest(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def _containers(pod: Obj) -> list[Obj]:
    return list((pod.get("spec") or {}).get("containers") or [])


def _host_ips(host_ip: str) -> dict[str, Any]:
    return {"hostIP": host_ip, "hostIPs": [{"ip": host_ip}]} if host_ip else {}


def _readiness(ready: bool, pod: Obj) -> list[Obj]:
    """GeneratePodReadyCondition / GenerateContainersReadyCondition for all-ready or none-ready pods."""
    if ready:
        return [new_condition("Ready", "True"), new_condition("ContainersReady", "True")]
    names = " ".join(str(c.get("name")) for c in _containers(pod))
    message = f"containers with unready status: [{names}]"
    return [
        new_condition("Ready", "False", "ContainersNotReady", message),
        new_condition("ContainersReady", "False", "ContainersNotReady", message),
    ]


def _conditions(pod: Obj, sandbox_ready: bool, containers_ready: bool) -> list[Obj]:
    """In generateAPIPodStatus' order."""
    return [
        new_condition("PodReadyToStartContainers", "True" if sandbox_ready else "False"),
        new_condition("Initialized", "True"),
        *_readiness(containers_ready, pod),
        new_condition("PodScheduled", "True"),
    ]


def pending_status(pod: Obj, host_ip: str) -> dict[str, Any]:
    """The first status after admission: the sandbox and containers are being created."""
    return {
        "phase": "Pending",
        **_host_ips(host_ip),
        "conditions": _conditions(pod, sandbox_ready=False, containers_ready=False),
        "containerStatuses": [
            {
                "name": c.get("name"),
                "image": c.get("image"),
                "imageID": "",
                "lastState": {},
                "ready": False,
                "restartCount": 0,
                "started": False,
                "state": {"waiting": {"reason": "ContainerCreating"}},
            }
            for c in _containers(pod)
        ],
    }


def running_status(pod: Obj, pod_ip: str, host_ip: str, now: str) -> dict[str, Any]:
    """Every container started; without a readiness probe a running container is ready at once."""
    return {
        "phase": "Running",
        **_host_ips(host_ip),
        "podIP": pod_ip,
        "podIPs": [{"ip": pod_ip}],
        "startTime": now,
        "conditions": _conditions(pod, sandbox_ready=True, containers_ready=True),
        "containerStatuses": [
            {
                "name": c.get("name"),
                "image": c.get("image"),
                "imageID": f"{c.get('image')}@sha256:{_digest(str(c.get('image')))}",
                "containerID": "containerd://" + _digest(f"{object_key(pod)}/{c.get('name')}"),
                "lastState": {},
                "ready": True,
                "started": True,
                "restartCount": 0,
                "state": {"running": {"startedAt": now}},
            }
            for c in _containers(pod)
        ],
    }


def terminated_status(pod: Obj, phase: str, exit_code: int, reason: str, now: str) -> dict[str, Any]:
    """Every container terminated; a terminal phase forces Ready/ContainersReady False (mergePodStatus)."""
    status = dict(pod.get("status") or {})
    status["phase"] = phase
    ready_reason = "PodCompleted" if phase == "Succeeded" else "PodFailed"
    status["conditions"] = [
        c for c in status.get("conditions") or [] if c.get("type") not in ("Ready", "ContainersReady")
    ] + [
        new_condition("Ready", "False", ready_reason),
        new_condition("ContainersReady", "False", ready_reason),
    ]
    status["containerStatuses"] = [
        {
            **item,
            "ready": False,
            "started": False,
            "state": {
                "terminated": {
                    "exitCode": exit_code,
                    "reason": reason,
                    "startedAt": ((item.get("state") or {}).get("running") or {}).get("startedAt")
                    or status.get("startTime")
                    or now,
                    "finishedAt": now,
                }
            },
        }
        for item in status.get("containerStatuses") or []
    ]
    return status


def _carry_transition(condition: Obj, previous: Obj | None) -> Obj:
    """updateLastTransitionTime: an unchanged condition status keeps its lastTransitionTime."""
    if previous is not None and previous.get("status") == condition.get("status"):
        return {**condition, "lastTransitionTime": previous.get("lastTransitionTime")}
    return condition


def merge_status(server: dict[str, Any], kubelet: dict[str, Any], now: str) -> dict[str, Any]:
    """The status the kubelet sends: its own conditions replace the server's kubelet-owned ones (others
    kept, first), the first startTime sticks, other server fields stay."""
    previous = {c.get("type"): c for c in server.get("conditions") or []}
    conditions = [c for c in server.get("conditions") or [] if c.get("type") not in KUBELET_CONDITIONS]
    conditions += [
        _carry_transition(c, previous.get(c.get("type")))
        for c in kubelet.get("conditions") or []
        if c.get("type") in KUBELET_CONDITIONS
    ]
    return {
        **server,
        **kubelet,
        "conditions": conditions,
        "startTime": server.get("startTime") or kubelet.get("startTime") or now,
    }
