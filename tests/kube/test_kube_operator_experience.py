"""What an operator sees, on the real control plane: `kubectl exclusive-placement` prints there what it
prints on kubesim, and kube-apiserver calls the JobSet validation and the Job webhook as the chart registers
them (a strategy typo on a JobSet denied with the valid values, a NonIndexed Job placed with affinity)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from devstack.commands import KubesimFlags
from devstack.manifests import exclusive_jobset
from placement.constants import GKE_NODEPOOL_LABEL
from tests.e2e.jobset_e2e_support import plain_job
from tests.kube.conftest import KubeStackFactory
from tests.kubesim.kubectl_fixture import KUBECTL
from tests.support.plugin_commands import run, status_json
from tests.support.waiting import eventually

pytestmark = [
    pytest.mark.kube,
    pytest.mark.kubectl,
    pytest.mark.skipif(KUBECTL is None, reason="kubectl 1.33 is not installed on this machine"),
    pytest.mark.xdist_group("kube-operator-experience"),
]

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "jobset-exclusive.yaml"
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def test_the_plugin_and_the_admission_checks_on_kube_apiserver(kube_stack_factory: KubeStackFactory) -> None:
    stack = kube_stack_factory(cluster=KubesimFlags(nodes=8, pools=2, gpus_per_node=8))
    kubeconfig = stack.kubeconfig
    applied = run([str(KUBECTL), "apply", "-f", str(EXAMPLE)], kubeconfig)
    assert applied.returncode == 0, applied.stderr

    def two_waiting() -> dict[str, Any] | None:
        document = status_json(kubeconfig)
        return document if len(document["waiting"]) == 2 else None

    document = eventually(two_waiting, "2 of the example's 4 Jobs waiting on 2 pools", timeout=120)
    assert sorted(d["domain"] for d in document["domains"] if d["holders"]) == ["pool-00", "pool-01"]
    assert {w["reason"] for w in document["waiting"]} == {"leader-unschedulable"}
    assert all("0/8 nodes are available" in w["message"] for w in document["waiting"])
    job = document["waiting"][0]["job"]
    explained = run(
        [str(KUBECTL), "exclusive-placement", "explain", f"job/{job}", "-n", "default"], kubeconfig
    )
    assert explained.returncode == 0, explained.stderr
    assert "Waiting for:     leader-unschedulable" in explained.stdout

    typo = exclusive_jobset("typo", jobs=2, pods_per_job=2, strategy="fastest", namespace="typos")
    run([str(KUBECTL), "create", "namespace", "typos"], kubeconfig)
    denied = run([str(KUBECTL), "apply", "-f", "-"], kubeconfig, stdin=yaml.safe_dump(typo))
    assert denied.returncode != 0
    assert "valid values: elastic, gate, scheduling-gate, affinity" in denied.stderr

    sweep = plain_job("sweep", "typos", pods=2)
    del sweep["spec"]["completionMode"]  # NonIndexed: no leader
    placed = run([str(KUBECTL), "apply", "-f", "-"], kubeconfig, stdin=yaml.safe_dump(sweep))
    assert placed.returncode == 0, placed.stderr
    assert "the Job is NonIndexed" in placed.stderr

    def sweep_pods() -> list[dict[str, Any]] | None:
        pods = stack.client.list("Pod", namespace="typos", label_selector="job-name=sweep")
        return pods if len(pods) == 2 else None

    for pod in eventually(sweep_pods, "both pods of the NonIndexed Job", timeout=60):
        assert pod["spec"]["affinity"]["podAntiAffinity"][REQUIRED][0]["topologyKey"] == GKE_NODEPOOL_LABEL
