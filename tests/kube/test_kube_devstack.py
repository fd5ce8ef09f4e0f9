"""`python -m devstack run|demo --control-plane kube` as a user types them, against the real control plane.

`run` keeps serving with DIR/kubeconfig: kubectl reaches a kube-apiserver that reports its Kubernetes
release, with JobSet's CRD and webhook configurations and this project's webhook configurations installed;
Ctrl-C stops everything. `demo` exits 0 once every Job of the example is placed.
"""

from __future__ import annotations

import json
import re
import signal
import subprocess
import sys
from pathlib import Path

import pytest

from devstack.processes import ManagedProcess
from devstack.readiness import wait_for_log_line
from tests.kubesim.kubectl_fixture import KUBECTL

pytestmark = [pytest.mark.kube, pytest.mark.timeout(400)]

SMALL = ["--nodes", "16", "--pools", "4"]


def kubectl(kubeconfig: Path, *args: str) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None, "kubectl 1.33 is part of this machine (the Cloud SDK package)"
    return subprocess.run(
        [KUBECTL, "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.mark.xdist_group("kube-devstack-run")
def test_run_keeps_serving_a_real_cluster_with_both_projects_webhooks(tmp_path: Path) -> None:
    workdir = tmp_path / "run"
    argv = [
        sys.executable,
        "-m",
        "devstack",
        "run",
        "--control-plane",
        "kube",
        "--workdir",
        str(workdir),
        *SMALL,
    ]
    run = ManagedProcess("devstack-run", argv, tmp_path / "run.log")
    run.start()
    try:
        wait_for_log_line(run, re.compile(r"^serving\. kubeconfig", re.MULTILINE), 300)
        kubeconfig = workdir / "kubeconfig"
        version = json.loads(kubectl(kubeconfig, "version", "-o", "json").stdout)
        assert re.fullmatch(r"v1\.3\d\.\d+", version["serverVersion"]["gitVersion"])
        crds = kubectl(kubeconfig, "get", "crd", "-o", "name").stdout.split()
        assert "customresourcedefinition.apiextensions.k8s.io/jobsets.jobset.x-k8s.io" in crds
        mutating = kubectl(kubeconfig, "get", "mutatingwebhookconfigurations", "-o", "name").stdout
        validating = kubectl(kubeconfig, "get", "validatingwebhookconfigurations", "-o", "name").stdout
        assert "jobset-mutating-webhook-configuration" in mutating
        assert "jobset-validating-webhook-configuration" in validating
        assert "exclusive-placement" in mutating
        assert "exclusive-placement" in validating
        pods = kubectl(kubeconfig, "get", "pods", "-o", "json").stdout
        assert len(json.loads(pods)["items"]) == 32  # the example: 4 Jobs x 8 pods, all placed
    finally:
        run.signal(signal.SIGINT)
        code = run.stop(timeout=60)
    assert code == 0, run.log_tail()
    assert "stopped: every process terminated" in run.log_since_start()


@pytest.mark.xdist_group("kube-devstack-demo")
def test_demo_exits_0_once_every_job_is_placed(tmp_path: Path) -> None:
    argv = ["-m", "devstack", "demo", "--control-plane", "kube", "--workdir", str(tmp_path / "demo"), *SMALL]
    result = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "every Job placed, each in its own node pool (4 Jobs)" in result.stdout
