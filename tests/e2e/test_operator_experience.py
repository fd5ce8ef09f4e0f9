"""What an operator sees, checked from outside (issue "Say what is happening"): `make run`'s devstack as a
process on pools too few for the example, read with the kubectl plugin's console script and through
kubectl's own plugin mechanism, and misconfigurations applied with kubectl."""

from __future__ import annotations

import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devstack.manifests import exclusive_jobset
from devstack.processes import ManagedProcess
from devstack.readiness import wait_for_log_line
from devstack.stack import Stack
from placement.constants import GKE_NODEPOOL_LABEL, STRATEGY_ANNOTATION
from tests.e2e.conftest import StackFactory
from tests.e2e.jobset_e2e_support import plain_job
from tests.kubesim.kubectl_fixture import KUBECTL
from tests.support.plugin_commands import run, status_json
from tests.support.waiting import eventually

pytestmark = [
    pytest.mark.e2e,
    pytest.mark.kubectl,
    pytest.mark.skipif(KUBECTL is None, reason="kubectl 1.33 is not installed on this machine"),
]

ROOT = Path(__file__).resolve().parents[2]
SERVING = re.compile(r"serving\. kubeconfig: (?P<kubeconfig>\S+)")
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"


def devstack_run(workdir: Path, log: Path, *args: str) -> ManagedProcess:
    argv = [sys.executable, "-m", "devstack", "run", "--workdir", str(workdir), *args]
    return ManagedProcess("devstack", argv, log)


@pytest.fixture
def serving(tmp_path: Path) -> Iterator[tuple[ManagedProcess, Path]]:
    """`devstack run` on 2 pools of 4 eight-GPU nodes, serving once its first JobSet (one Job filling a
    pool) is placed; then the shipped example (4 Jobs, each filling a pool) is applied to it."""
    first = tmp_path / "first.yaml"
    first.write_text(yaml.safe_dump(exclusive_jobset("first", jobs=1, pods_per_job=4, gpus_per_pod=8)))
    cluster = ["--nodes", "8", "--pools", "2", "--gpus-per-node", "8", "--time-scale", "0.05"]
    process = devstack_run(
        tmp_path / "w", tmp_path / "devstack.log", *cluster, "--stall-seconds", "2", "-f", str(first)
    )
    process.start()
    try:
        kubeconfig = Path(wait_for_log_line(process, SERVING, 120)["kubeconfig"])
        applied = run(
            [str(KUBECTL), "apply", "-f", str(ROOT / "examples" / "jobset-exclusive.yaml")], kubeconfig
        )
        assert applied.returncode == 0, applied.stderr
        yield process, kubeconfig
    finally:
        process.stop()


def test_an_operator_sees_held_domains_waiting_jobs_and_why(serving: tuple[ManagedProcess, Path]) -> None:
    process, kubeconfig = serving

    def three_waiting() -> dict[str, Any] | None:
        document = status_json(kubeconfig)
        return document if len(document["waiting"]) == 3 else None

    document = eventually(
        three_waiting, "3 of the example's Jobs waiting (one pool left for 4 Jobs)", timeout=90
    )
    held = {d["domain"]: [h["job"] for h in d["holders"]] for d in document["domains"]}
    assert sorted(held) == ["pool-00", "pool-01"]
    assert sorted(job for jobs in held.values() for job in jobs)[0] == "first-w-0"
    assert all(len(jobs) == 1 for jobs in held.values())
    for waiting in document["waiting"]:
        assert (waiting["namespace"], waiting["jobset"]) == ("default", "training")
        assert waiting["reason"] == "leader-unschedulable"
        assert "Unschedulable: 0/8 nodes are available" in waiting["message"]

    # kubectl finds the plugin on PATH by its name
    job = document["waiting"][0]["job"]
    explained = run(
        [str(KUBECTL), "exclusive-placement", "explain", f"job/{job}", "-n", "default"], kubeconfig
    )
    assert explained.returncode == 0, explained.stderr
    assert "Waiting for:     leader-unschedulable" in explained.stdout
    assert "Unschedulable: 0/8 nodes are available" in explained.stdout
    assert f"a {GKE_NODEPOOL_LABEL} domain freeing up: held are pool-0" in explained.stdout

    # `make run` reported the example, applied after its own workload, and why it stalls
    report = wait_for_log_line(
        process, re.compile(r"no progress for \d+s \(5 Jobs: [^)]*\)\. Waiting:[^\[]*"), 60
    )
    assert "wait for a free node pool" in report.group(0), report.group(0)


def test_a_second_run_on_a_workdir_in_use_is_refused_naming_the_running_one(tmp_path: Path) -> None:
    first = devstack_run(tmp_path / "w", tmp_path / "first.log", "--nodes", "4", "--pools", "2")
    first.start()
    try:
        wait_for_log_line(first, re.compile(r"kubeconfig \S+"), 120)
        second = subprocess.run(
            [sys.executable, "-m", "devstack", "run", "--workdir", str(tmp_path / "w")],
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )
        assert second.returncode == 1
        assert second.stderr.startswith(
            f"error: the workdir {tmp_path / 'w'} is in use by the devstack of pid "
        )
        assert f"kubeconfig {tmp_path / 'w' / 'kubeconfig'}" in second.stderr
        assert "Traceback" not in second.stderr
        first.signal(signal.SIGINT)
        assert first.stop(timeout=30) == 0
        assert "stopped: every process terminated" in first.log_since_start()
    finally:
        first.stop()


def kubectl_apply(stack: Stack, manifest: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return run([str(KUBECTL), "apply", "-f", "-"], stack.kubeconfig, stdin=yaml.safe_dump(manifest))


def test_misconfigurations_are_denied_or_placed_never_silent(stack_factory: StackFactory) -> None:
    stack = stack_factory()

    typo = kubectl_apply(stack, exclusive_jobset("typo", jobs=2, pods_per_job=2, strategy="fastest"))
    assert typo.returncode != 0
    assert 'admission webhook "jobsets.validate.exclusive-placement.io" denied the request' in typo.stderr
    assert "valid values: elastic, gate, scheduling-gate, affinity" in typo.stderr

    unknown_key = kubectl_apply(
        stack, exclusive_jobset("rack", jobs=1, pods_per_job=1, topology_key="example.com/rack")
    )
    assert unknown_key.returncode == 0, unknown_key.stderr
    assert "Warning: exclusive placement: no node carries the label example.com/rack" in unknown_key.stderr

    non_indexed = plain_job("sweep", "default", pods=2)
    del non_indexed["spec"]["completionMode"]  # NonIndexed: no leader
    applied = kubectl_apply(stack, non_indexed)
    assert applied.returncode == 0, applied.stderr
    assert "Warning: exclusive placement: the Job is NonIndexed" in applied.stderr

    def both_pods() -> list[dict[str, Any]] | None:
        found = stack.client.list("Pod", namespace="default", label_selector="job-name=sweep")
        return found if len(found) == 2 else None

    pods = eventually(both_pods, "both pods of the NonIndexed Job")
    for pod in pods:
        affinity = pod["spec"]["affinity"]
        assert affinity["podAffinity"][REQUIRED][0]["topologyKey"] == GKE_NODEPOOL_LABEL
        assert affinity["podAntiAffinity"][REQUIRED][0]["topologyKey"] == GKE_NODEPOOL_LABEL
        assert pod["metadata"]["annotations"][STRATEGY_ANNOTATION] == "affinity"
