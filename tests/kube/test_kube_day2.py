"""What a user meets on day 2, on the real control plane, with the real kubectl: an edit of a running
JobSet's strategy is refused at `kubectl annotate`, capacity is told at `kubectl apply` and by
`kubectl exclusive-placement status`, and the JobSet Events are shown by `kubectl describe jobset`."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from typing import Any

import pytest
import yaml

from devstack.manifests import exclusive_jobset
from devstack.stack import Stack
from kubekit.client import KubeError
from placement.constants import ALL_OR_NOTHING_ANNOTATION, GKE_NODEPOOL_LABEL, STRATEGY_ANNOTATION
from resizer.recorder import REPORTING_CONTROLLER
from tests.kube.kube_support import wait_running
from tests.support.describe import described_events
from tests.support.waiting import eventually

KUBECTL = shutil.which("kubectl.1.33") or shutil.which("kubectl")

pytestmark = [
    pytest.mark.kube,
    pytest.mark.xdist_group("kube-day2"),
    pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine"),
]

POOLS = 4
"""The kube tier's cluster: 4 node pools of 2 eight-GPU nodes (tests/kube/conftest.py)."""


def kubectl(stack: Stack, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    return subprocess.run(
        [KUBECTL, "--kubeconfig", str(stack.kubeconfig), *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def apply(stack: Stack, jobset: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    result = kubectl(stack, "apply", "-f", "-", stdin=yaml.safe_dump(jobset))
    assert result.returncode == 0, result.stderr
    return result


def plugin_status(stack: Stack, namespace: str) -> dict[str, Any]:
    result = subprocess.run(
        [sys.executable, "-m", "kubectl_plugin", "status", "-n", namespace, "-o", "json"],
        env={**os.environ, "KUBECONFIG": str(stack.kubeconfig)},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    document: dict[str, Any] = json.loads(result.stdout)
    return document


def test_a_running_jobsets_strategy_cannot_be_changed_at_kubectl_annotate(
    kube_stack: Stack, namespace: str
) -> None:
    jobset = exclusive_jobset("serve", jobs=2, pods_per_job=2, namespace=namespace)
    jobset["metadata"]["annotations"][STRATEGY_ANNOTATION] = "elastic"
    apply(kube_stack, jobset)
    wait_running(kube_stack, namespace, 4)
    annotate = ("annotate", "jobset", "serve", "-n", namespace)
    result = kubectl(kube_stack, *annotate, f"{STRATEGY_ANNOTATION}=gate", "--overwrite")
    assert result.returncode != 0
    assert "exclusive placement: JobSet serve: metadata.annotations: " in result.stderr
    assert "applies only at the JobSet's creation" in result.stderr
    assert "delete and re-create the JobSet to change it" in result.stderr
    added = kubectl(kube_stack, *annotate, f"{ALL_OR_NOTHING_ANNOTATION}=true")
    assert added.returncode != 0
    assert "from absent to 'true'" in added.stderr
    stored = kube_stack.client.get("JobSet", "serve", namespace=namespace)
    assert stored["metadata"]["annotations"][STRATEGY_ANNOTATION] == "elastic"
    assert ALL_OR_NOTHING_ANNOTATION not in stored["metadata"]["annotations"]


def test_five_exclusive_jobs_on_four_pools_are_told_at_apply_and_by_status(
    kube_stack: Stack, namespace: str
) -> None:
    jobset = exclusive_jobset("five", jobs=POOLS + 1, pods_per_job=2, namespace=namespace)
    result = apply(kube_stack, jobset)
    assert (
        f"Warning: exclusive placement: JobSet five: 5 Jobs need 5 {GKE_NODEPOOL_LABEL} domains; 4 exist"
        in result.stderr
    )
    wait_running(kube_stack, namespace, POOLS * 2, "pods of the 4 Jobs that got a pool")

    def waiting() -> list[dict[str, Any]] | None:
        found = plugin_status(kube_stack, namespace)["waiting"]
        return found if [entry["reason"] for entry in found] == ["too-few-domains"] else None

    (entry,) = eventually(waiting, "the fifth Job waiting for too few domains", 90)
    assert entry["jobset"] == "five"
    assert entry["message"] == f"5 Jobs need 5 {GKE_NODEPOOL_LABEL} domains; 4 exist"


def test_describe_jobset_shows_the_all_or_nothing_wait(kube_stack: Stack, namespace: str) -> None:
    jobset = exclusive_jobset("gang", jobs=POOLS + 1, pods_per_job=2, namespace=namespace)
    jobset["metadata"]["annotations"][ALL_OR_NOTHING_ANNOTATION] = "true"
    apply(kube_stack, jobset)
    assert KUBECTL is not None

    def waiting_event() -> list[Any]:
        return [
            event
            for event in described_events(KUBECTL, kube_stack.kubeconfig, "jobset", "gang", namespace)
            if event.reason == "AllOrNothingWaiting"
        ]

    (event,) = eventually(
        waiting_event, "AllOrNothingWaiting in kubectl describe jobset", 90, ignoring=(KubeError,)
    )
    assert (event.type, event.source) == ("Warning", REPORTING_CONTROLLER)
    assert event.message == f"needs {POOLS + 1} domains, the cluster has {POOLS}"


def _condition(obj: dict[str, Any], kind: str) -> bool:
    return any(
        c.get("type") == kind and c.get("status") == "True"
        for c in obj.get("status", {}).get("conditions", [])
    )


def test_deleting_a_leader_with_backoff_limit_0_fails_the_jobset(kube_stack: Stack, namespace: str) -> None:
    """What the README's day-2 section says of the example (backoffLimit: 0, no failurePolicy)."""
    apply(kube_stack, exclusive_jobset("train", jobs=2, pods_per_job=2, namespace=namespace))
    wait_running(kube_stack, namespace, 4)
    (leader,) = [
        pod
        for pod in kube_stack.client.list("Pod", namespace=namespace)
        if pod["metadata"]["labels"].get("batch.kubernetes.io/job-completion-index") == "0"
        and pod["metadata"]["labels"].get("batch.kubernetes.io/job-name") == "train-w-0"
    ]
    kube_stack.client.delete("Pod", leader["metadata"]["name"], namespace=namespace)
    eventually(
        lambda: _condition(kube_stack.client.get("JobSet", "train", namespace=namespace), "Failed"),
        "the JobSet Failed",
        90,
        ignoring=(KubeError,),
    )
    assert _condition(kube_stack.client.get("Job", "train-w-0", namespace=namespace), "Failed")
