"""`python -m devstack run|demo` as a user types them, and what an operator then sees, on the real control
plane (issue "Say what is happening").

`run` on 2 pools of 4 eight-GPU nodes serves once its first JobSet (one Job filling a pool) is placed; kubectl
reaches a kube-apiserver that reports its Kubernetes release, with JobSet's CRD and webhook configurations
and this project's installed. The shipped example (4 Jobs, each filling a pool) applied to it with kubectl
waits for the one pool left: the kubectl plugin (its console script, and through kubectl's own plugin
mechanism) shows the held domains, the waiting Jobs and why, and `run` itself reports the stall with its
hint. Misconfigurations applied with kubectl are denied or placed, never silent. A second `run` on the same
workdir is refused naming the running one; Ctrl-C stops everything and leaves no process or port behind,
even when `run` was started with SIGINT ignored (as `make test &` starts it: a background job of a
non-interactive shell). `demo` exits 0 with the table once every Job of the example is placed.
"""

from __future__ import annotations

import contextlib
import json
import os
import re
import signal
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from devstack.manifests import exclusive_jobset
from devstack.ports import port_is_free
from devstack.processes import ManagedProcess
from devstack.readiness import wait_for_log_line
from placement.constants import GKE_NODEPOOL_LABEL, STRATEGY_ANNOTATION
from tests.kube.workloads import plain_job
from tests.support.kubectl import KUBECTL
from tests.support.plugin_commands import run, status_json
from tests.support.waiting import eventually

pytestmark = [
    pytest.mark.kube,
    pytest.mark.kubectl,
    pytest.mark.skipif(KUBECTL is None, reason="kubectl 1.33 is not installed on this machine"),
    pytest.mark.timeout(400),
]

ROOT = Path(__file__).resolve().parents[2]
EXAMPLE = ROOT / "examples" / "jobset-exclusive.yaml"
SERVING = re.compile(r"serving\. kubeconfig: (?P<kubeconfig>\S+)")
REQUIRED = "requiredDuringSchedulingIgnoredDuringExecution"
TWO_POOLS = ["--nodes", "8", "--pools", "2", "--gpus-per-node", "8"]


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> subprocess.CompletedProcess[str]:
    assert KUBECTL is not None
    return run([KUBECTL, *args], kubeconfig, stdin=stdin)


def kubectl_apply(kubeconfig: Path, manifest: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    return kubectl(kubeconfig, "apply", "-f", "-", stdin=yaml.safe_dump(manifest))


@dataclass
class Serving:
    process: ManagedProcess
    workdir: Path
    kubeconfig: Path
    api_port: int


@contextlib.contextmanager
def sigint_ignored() -> Iterator[None]:
    """What a child started meanwhile inherits: SIG_IGN survives exec (a Python handler becomes SIG_DFL)."""
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        yield
    finally:
        signal.signal(signal.SIGINT, previous)


def descendants(pid: int) -> set[int]:
    children: dict[int, list[int]] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                ppid = int((entry / "stat").read_text().rsplit(")", 1)[1].split()[1])
            except (OSError, IndexError, ValueError):
                continue
            children.setdefault(ppid, []).append(int(entry.name))
    found: set[int] = set()
    todo = [pid]
    while todo:
        for child in children.get(todo.pop(), []):
            found.add(child)
            todo.append(child)
    return found


def alive(pid: int) -> bool:
    try:
        state = (Path("/proc") / str(pid) / "stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


@pytest.fixture(scope="module")
def serving(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Serving]:
    """`devstack run` serving on 2 pools, its first JobSet filling one, the example applied to it."""
    tmp = tmp_path_factory.mktemp("devstack-run")
    first = tmp / "first.yaml"
    first.write_text(yaml.safe_dump(exclusive_jobset("first", jobs=1, pods_per_job=4, gpus_per_pod=8)))
    workdir = tmp / "w"
    argv = [sys.executable, "-m", "devstack", "run", "--workdir", str(workdir), *TWO_POOLS]
    process = ManagedProcess(
        "devstack-run", [*argv, "--stall-seconds", "2", "-f", str(first)], tmp / "devstack.log"
    )
    with sigint_ignored():
        process.start()
    try:
        kubeconfig = Path(wait_for_log_line(process, SERVING, 300)["kubeconfig"])
        api = wait_for_log_line(process, re.compile(r"kube-apiserver https://127\.0\.0\.1:(?P<port>\d+)"), 5)
        applied = kubectl(kubeconfig, "apply", "-f", str(EXAMPLE))
        assert applied.returncode == 0, applied.stderr
        yield Serving(process, workdir, kubeconfig, int(api["port"]))
    finally:
        process.stop()


@pytest.mark.xdist_group("kube-devstack-run")
def test_run_serves_a_real_cluster_with_both_projects_webhooks(serving: Serving) -> None:
    version = json.loads(kubectl(serving.kubeconfig, "version", "-o", "json").stdout)
    assert re.fullmatch(r"v1\.3\d\.\d+", version["serverVersion"]["gitVersion"])
    crds = kubectl(serving.kubeconfig, "get", "crd", "-o", "name").stdout.split()
    assert "customresourcedefinition.apiextensions.k8s.io/jobsets.jobset.x-k8s.io" in crds
    mutating = kubectl(serving.kubeconfig, "get", "mutatingwebhookconfigurations", "-o", "name").stdout
    validating = kubectl(serving.kubeconfig, "get", "validatingwebhookconfigurations", "-o", "name").stdout
    assert "jobset-mutating-webhook-configuration" in mutating
    assert "jobset-validating-webhook-configuration" in validating
    assert "exclusive-placement" in mutating
    assert "exclusive-placement" in validating


@pytest.mark.xdist_group("kube-devstack-run")
def test_an_operator_sees_held_domains_waiting_jobs_and_why(serving: Serving) -> None:
    def three_waiting() -> dict[str, Any] | None:
        document = status_json(serving.kubeconfig)
        return document if len(document["waiting"]) == 3 else None

    document = eventually(
        three_waiting, "3 of the example's Jobs waiting (one pool left for 4 Jobs)", timeout=120
    )
    held = {d["domain"]: [h["job"] for h in d["holders"]] for d in document["domains"]}
    assert sorted(held) == ["pool-00", "pool-01"]
    assert sorted(job for jobs in held.values() for job in jobs)[0] == "first-w-0"
    assert all(len(jobs) == 1 for jobs in held.values())
    for waiting in document["waiting"]:
        assert (waiting["namespace"], waiting["jobset"]) == ("default", "training")
        # the example's 4 Jobs on 2 pools: waiting for a pool to free cannot help them (placement.capacity)
        assert (waiting["reason"], waiting["message"]) == (
            "too-few-domains",
            f"4 Jobs need 4 {GKE_NODEPOOL_LABEL} domains; 2 exist",
        )

    # kubectl finds the plugin on PATH by its name
    job = document["waiting"][0]["job"]
    explained = kubectl(serving.kubeconfig, "exclusive-placement", "explain", f"job/{job}", "-n", "default")
    assert explained.returncode == 0, explained.stderr
    assert "Waiting for:     too-few-domains" in explained.stdout
    assert f"more schedulable {GKE_NODEPOOL_LABEL} domains" in explained.stdout

    # `make run` reported the example, applied after its own workload, and why it stalls
    report = wait_for_log_line(
        serving.process, re.compile(r"no progress for \d+s \(5 Jobs: [^)]*\)\. Waiting:[^\[]*"), 60
    )
    assert "wait for a free node pool" in report.group(0), report.group(0)


@pytest.mark.xdist_group("kube-devstack-run")
def test_misconfigurations_are_denied_or_placed_never_silent(serving: Serving) -> None:
    kubeconfig = serving.kubeconfig
    assert kubectl(kubeconfig, "create", "namespace", "typos").returncode == 0
    typo = kubectl_apply(
        kubeconfig, exclusive_jobset("typo", jobs=2, pods_per_job=2, strategy="fastest", namespace="typos")
    )
    assert typo.returncode != 0
    assert 'admission webhook "jobsets.validate.exclusive-placement.io" denied the request' in typo.stderr
    assert "valid values: elastic, gate, scheduling-gate, affinity" in typo.stderr

    unknown_key = kubectl_apply(
        kubeconfig,
        exclusive_jobset("rack", jobs=1, pods_per_job=1, topology_key="example.com/rack", namespace="typos"),
    )
    assert unknown_key.returncode == 0, unknown_key.stderr
    assert "Warning: exclusive placement: no node carries the label example.com/rack" in unknown_key.stderr

    non_indexed = plain_job("sweep", "typos", pods=2)
    del non_indexed["spec"]["completionMode"]  # NonIndexed: no leader
    applied = kubectl_apply(kubeconfig, non_indexed)
    assert applied.returncode == 0, applied.stderr
    assert "Warning: exclusive placement: the Job is NonIndexed" in applied.stderr

    def both_pods() -> list[dict[str, Any]] | None:
        listed = kubectl(kubeconfig, "get", "pods", "-n", "typos", "-l", "job-name=sweep", "-o", "json")
        found: list[dict[str, Any]] = json.loads(listed.stdout)["items"] if listed.returncode == 0 else []
        return found if len(found) == 2 else None

    for pod in eventually(both_pods, "both pods of the NonIndexed Job", timeout=60):
        affinity = pod["spec"]["affinity"]
        assert affinity["podAffinity"][REQUIRED][0]["topologyKey"] == GKE_NODEPOOL_LABEL
        assert affinity["podAntiAffinity"][REQUIRED][0]["topologyKey"] == GKE_NODEPOOL_LABEL
        assert pod["metadata"]["annotations"][STRATEGY_ANNOTATION] == "affinity"


@pytest.mark.xdist_group("kube-devstack-run")
def test_a_second_run_on_the_workdir_is_refused_then_ctrl_c_stops_everything(serving: Serving) -> None:
    second = subprocess.run(
        [sys.executable, "-m", "devstack", "run", "--workdir", str(serving.workdir)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert second.returncode == 1
    assert second.stderr.startswith(f"error: the workdir {serving.workdir} is in use by the devstack of pid ")
    assert f"kubeconfig {serving.kubeconfig}" in second.stderr
    assert "Traceback" not in second.stderr

    pid = serving.process.pid
    assert pid is not None
    children = descendants(pid)
    assert (
        len(children) >= 3
    )  # the webhook, the resizer, the control plane's guard (its components: the port)
    os.kill(pid, signal.SIGINT)
    assert serving.process.stop(timeout=60) == 0, serving.process.log_tail()
    assert "stopped: every process terminated" in serving.process.log_since_start()
    assert [child for child in children if alive(child)] == []
    assert port_is_free(serving.api_port)


@pytest.mark.xdist_group("kube-devstack-demo")
def test_demo_exits_0_once_every_job_is_placed(tmp_path: Path) -> None:
    argv = ["-m", "devstack", "demo", "--workdir", str(tmp_path / "demo"), "--nodes", "16", "--pools", "4"]
    result = subprocess.run([sys.executable, *argv], capture_output=True, text=True, timeout=300, check=False)
    assert result.returncode == 0, result.stdout + result.stderr
    assert "every Job placed, each in its own node pool (4 Jobs)" in result.stdout
    assert "Kubernetes v1.3" in result.stdout
    assert re.search(r"default/training-workers-0\s+pool-\d+\s+8/8", result.stdout), result.stdout
