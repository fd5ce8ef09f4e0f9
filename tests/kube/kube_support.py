"""What the kube tier reads off a stack on the real control plane: the audit log, kube-apiserver's
admission metrics, and namespaces emptied between tests."""

from __future__ import annotations

import copy
import re
from collections import Counter
from typing import Any

from devstack.clusters import KubeCluster
from devstack.controlplane.audit import AuditLog, pod_creations
from devstack.controlplane.kwok import run_time_annotations
from devstack.kube import KubeError
from devstack.stack import Stack
from tests.support.waiting import eventually

Obj = dict[str, Any]

JOBSET_POD_WEBHOOKS = ("mpod.kb.io", "vpod.kb.io")
_ADMISSION_COUNT = re.compile(
    r"^apiserver_admission_webhook_admission_duration_seconds_count\{(?P<labels>[^}]*)\} (?P<value>\S+)$"
)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def kube_cluster(stack: Stack) -> KubeCluster:
    assert isinstance(stack.cluster, KubeCluster), "a kube tier test needs a stack on the real control plane"
    return stack.cluster


def audit_log(stack: Stack) -> AuditLog:
    return AuditLog(kube_cluster(stack).control_plane.audit_log)


def pod_creates(stack: Stack, namespace: str, *, since: int) -> Counter[int]:
    """Response code -> pod creations in `namespace` since audit offset `since` (201 created, 403 denied)."""
    return pod_creations(audit_log(stack).requests(since=since), namespace)


def webhook_admissions(stack: Stack) -> Counter[tuple[str, bool]]:
    """(webhook name, rejected) -> admissions kube-apiserver sent it so far (its own metric)."""
    counts: Counter[tuple[str, bool]] = Counter()
    for line in stack.client.text("/metrics").splitlines():
        match = _ADMISSION_COUNT.match(line)
        if match:
            labels = dict(_LABEL.findall(match["labels"]))
            counts[(labels["name"], labels["rejected"] == "true")] += int(float(match["value"]))
    return counts


def jobset_webhook_calls(
    before: Counter[tuple[str, bool]], after: Counter[tuple[str, bool]]
) -> tuple[int, int]:
    """(calls, denials) of JobSet's pod webhooks between two `webhook_admissions` readings."""
    calls = sum(after[(name, r)] - before[(name, r)] for name in JOBSET_POD_WEBHOOKS for r in (False, True))
    denied = sum(after[(name, True)] - before[(name, True)] for name in JOBSET_POD_WEBHOOKS)
    return calls, denied


def with_run_time(jobset: Obj, seconds: float) -> Obj:
    """The JobSet with every pod completing `seconds` after it runs (kwok's pod-complete Stage)."""
    result = copy.deepcopy(jobset)
    for replicated in result["spec"]["replicatedJobs"]:
        pod_meta = replicated["template"]["spec"]["template"].setdefault("metadata", {})
        pod_meta.setdefault("annotations", {}).update(run_time_annotations(seconds))
    return result


def empty_namespace(stack: Stack, namespace: str, timeout: float = 90) -> None:
    """Delete every JobSet, Job and pod of `namespace`, wait until no pod is left (its domains are free
    again), then delete the namespace itself."""
    for kind in ("JobSet", "Job", "Pod"):
        for obj in stack.client.list(kind, namespace=namespace):
            stack.client.delete(kind, obj["metadata"]["name"], namespace=namespace)
    eventually(
        lambda: not stack.client.list("Pod", namespace=namespace),
        f"every pod of {namespace} gone",
        timeout,
        ignoring=(KubeError,),
    )
    stack.client.delete("Namespace", namespace)
