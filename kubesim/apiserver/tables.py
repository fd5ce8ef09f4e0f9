"""Server-side printing (`Accept: application/json;as=Table;g=meta.k8s.io;v=v1`): the columns `kubectl get`
shows for each kind, computed like kube-apiserver's printers (priority-1 columns appear with `-o wide`)."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from kubesim.apiserver.resources import ResourceType

Obj = dict[str, Any]
Column = tuple[str, str, int]  # name, type, priority
Row = list[Any]


def wants_table(accept: str) -> bool:
    return "as=Table" in accept


def human_duration(seconds: float) -> str:
    """kubectl's duration.HumanDuration."""
    s = int(max(seconds, 0))
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = minutes // 60
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if days < 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    return f"{days}d" if days < 730 else f"{days // 365}y"


def _age(timestamp: str | None, now: datetime) -> str:
    if not timestamp:
        return "<unknown>"
    then = datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
    return human_duration((now - then).total_seconds())


def _pod(obj: Obj, now: datetime) -> Row:
    spec, status, meta = obj.get("spec") or {}, obj.get("status") or {}, obj["metadata"]
    statuses = status.get("containerStatuses") or []
    ready = sum(1 for c in statuses if c.get("ready"))
    restarts = sum(int(c.get("restartCount") or 0) for c in statuses)
    phase = status.get("reason") or status.get("phase") or "Pending"
    if meta.get("deletionTimestamp"):
        phase = "Terminating"
    elif spec.get("schedulingGates"):
        phase = "SchedulingGated"
    elif phase == "Pending" and spec.get("nodeName") and not statuses:
        phase = "ContainerCreating"
    for container in statuses:
        waiting = (container.get("state") or {}).get("waiting") or {}
        if waiting.get("reason") and phase == "Pending":
            phase = waiting["reason"]
    gates = spec.get("readinessGates") or []
    return [
        meta["name"],
        f"{ready}/{len(spec.get('containers') or [])}",
        phase,
        restarts,
        _age(meta.get("creationTimestamp"), now),
        status.get("podIP") or "<none>",
        spec.get("nodeName") or "<none>",
        status.get("nominatedNodeName") or "<none>",
        f"0/{len(gates)}" if gates else "<none>",
    ]


def _node(obj: Obj, now: datetime) -> Row:
    status, meta, spec = obj.get("status") or {}, obj["metadata"], obj.get("spec") or {}
    ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
    state = "Ready" if ready and ready.get("status") == "True" else "NotReady" if ready else "Unknown"
    if spec.get("unschedulable"):
        state += ",SchedulingDisabled"
    roles = sorted(
        k.split("/", 1)[1] for k in meta.get("labels") or {} if k.startswith("node-role.kubernetes.io/")
    )
    info = status.get("nodeInfo") or {}
    addresses = {a.get("type"): a.get("address") for a in status.get("addresses") or []}
    return [
        meta["name"],
        state,
        ",".join(roles) or "<none>",
        _age(meta.get("creationTimestamp"), now),
        info.get("kubeletVersion", ""),
        addresses.get("InternalIP", "<none>"),
        addresses.get("ExternalIP", "<none>"),
        info.get("osImage", "<unknown>"),
        info.get("kernelVersion", "<unknown>"),
        info.get("containerRuntimeVersion", "<unknown>"),
    ]


def _job(obj: Obj, now: datetime) -> Row:
    spec, status, meta = obj.get("spec") or {}, obj.get("status") or {}, obj["metadata"]
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    state = "Running"
    if conditions.get("Complete") == "True":
        state = "Complete"
    elif conditions.get("Failed") == "True":
        state = "Failed"
    elif spec.get("suspend"):
        state = "Suspended"
    completions = spec.get("completions")
    succeeded = int(status.get("succeeded") or 0)
    shown = (
        f"{succeeded}/{completions}"
        if completions is not None
        else f"{succeeded}/1 of {spec.get('parallelism')}"
    )
    duration = ""
    if status.get("startTime"):
        start = datetime.strptime(status["startTime"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        end = now
        if status.get("completionTime"):
            end = datetime.strptime(status["completionTime"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=UTC)
        duration = human_duration((end - start).total_seconds())
    containers = ((spec.get("template") or {}).get("spec") or {}).get("containers") or []
    selector = (spec.get("selector") or {}).get("matchLabels") or {}
    return [
        meta["name"],
        state,
        shown,
        duration,
        _age(meta.get("creationTimestamp"), now),
        ",".join(c.get("name", "") for c in containers),
        ",".join(c.get("image", "") for c in containers),
        ",".join(f"{k}={v}" for k, v in selector.items()),
    ]


def _jobset(obj: Obj, now: datetime) -> Row:
    spec, status, meta = obj.get("spec") or {}, obj.get("status") or {}, obj["metadata"]
    conditions = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    return [
        meta["name"],
        status.get("terminalState", ""),
        int(status.get("restarts") or 0),
        conditions.get("Completed", ""),
        bool(spec.get("suspend")),
        _age(meta.get("creationTimestamp"), now),
    ]


def _event(obj: Obj, now: datetime) -> Row:
    involved = obj.get("involvedObject") or {}
    last = obj.get("lastTimestamp") or obj.get("eventTime") or obj["metadata"].get("creationTimestamp")
    if isinstance(last, str) and "." in last:
        last = last.split(".")[0] + "Z"
    return [
        _age(last, now),
        obj.get("type", ""),
        obj.get("reason", ""),
        f"{str(involved.get('kind', '')).lower()}/{involved.get('name', '')}",
        obj.get("message", ""),
    ]


def _lease(obj: Obj, now: datetime) -> Row:
    return [
        obj["metadata"]["name"],
        (obj.get("spec") or {}).get("holderIdentity", ""),
        _age(obj["metadata"].get("creationTimestamp"), now),
    ]


def _namespace(obj: Obj, now: datetime) -> Row:
    return [
        obj["metadata"]["name"],
        (obj.get("status") or {}).get("phase", ""),
        _age(obj["metadata"].get("creationTimestamp"), now),
    ]


def _webhooks(obj: Obj, now: datetime) -> Row:
    return [
        obj["metadata"]["name"],
        len(obj.get("webhooks") or []),
        _age(obj["metadata"].get("creationTimestamp"), now),
    ]


def cols(*names: str, wide: tuple[str, ...] = ()) -> list[Column]:
    """Columns of type string; `wide` ones have priority 1 (shown by `kubectl get -o wide`)."""
    return [(n, "string", 0) for n in names] + [(n, "string", 1) for n in wide]


WEBHOOK_COLUMNS = cols("Name", "Webhooks", "Age")
PRINTERS: dict[str, tuple[list[Column], Callable[[Obj, datetime], Row]]] = {
    "pods": (
        cols("Name", "Ready", "Status", "Restarts", "Age", wide=("IP", "Node", "Nominated Node", "Readiness Gates")),  # noqa: E501
        _pod,
    ),
    "nodes": (
        cols("Name", "Status", "Roles", "Age", "Version",
             wide=("Internal-IP", "External-IP", "OS-Image", "Kernel-Version", "Container-Runtime")),
        _node,
    ),
    "jobs": (
        cols("Name", "Status", "Completions", "Duration", "Age", wide=("Containers", "Images", "Selector")),
        _job,
    ),
    "jobsets": (cols("Name", "TerminalState", "Restarts", "Completed", "Suspended", "Age"), _jobset),
    "events": (cols("Last Seen", "Type", "Reason", "Object", "Message"), _event),
    "leases": (cols("Name", "Holder", "Age"), _lease),
    "namespaces": (cols("Name", "Status", "Age"), _namespace),
    "mutatingwebhookconfigurations": (WEBHOOK_COLUMNS, _webhooks),
    "validatingwebhookconfigurations": (WEBHOOK_COLUMNS, _webhooks),
}  # fmt: skip


def _columns(columns: list[Column]) -> list[Obj]:
    return [
        {
            "name": name,
            "type": kind,
            "format": "name" if name == "Name" else "",
            "description": "",
            "priority": p,
        }
        for name, kind, p in columns
    ]


def _partial(rt: ResourceType, obj: Obj, include: str) -> Obj:
    if include == "Object":
        return obj
    return {"kind": "PartialObjectMetadata", "apiVersion": "meta.k8s.io/v1", "metadata": obj["metadata"]}


def table(
    rt: ResourceType,
    objects: list[Obj],
    *,
    resource_version: str,
    include_object: str = "Metadata",
    with_columns: bool = True,
    continue_token: str | None = None,
) -> Obj:
    columns, printer = PRINTERS.get(
        rt.plural,
        (
            [("Name", "string", 0), ("Age", "string", 0)],
            lambda o, now: [o["metadata"]["name"], _age(o["metadata"].get("creationTimestamp"), now)],
        ),
    )
    now = datetime.now(UTC)
    metadata: Obj = {"resourceVersion": resource_version}
    if continue_token:
        metadata["continue"] = continue_token
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": metadata,
        "columnDefinitions": _columns(columns) if with_columns else None,
        "rows": [{"cells": printer(o, now), "object": _partial(rt, o, include_object)} for o in objects],
    }
