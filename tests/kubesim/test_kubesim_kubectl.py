"""Real kubectl (1.33) against the kubeconfig kubesim writes."""

from __future__ import annotations

import json
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from kubesim.testing import KubesimServer
from tests.kubesim.kubectl_fixture import KUBECTL, kubectl

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(KUBECTL is None, reason="kubectl 1.33 is not installed on this machine"),
]

JOB = """
apiVersion: batch/v1
kind: Job
metadata:
  name: demo
  labels: {app: demo}
spec:
  completions: 2
  parallelism: 2
  completionMode: Indexed
  template:
    metadata:
      labels: {app: demo}
    spec:
      restartPolicy: Never
      containers:
      - name: main
        image: busybox:1.36
"""

POD = """
apiVersion: v1
kind: Pod
metadata:
  name: {name}
  labels: {{app: web, version: "{version}"}}
spec:
  containers:
  - name: main
    image: nginx:1.27
"""


@pytest.fixture(scope="module")
def sim() -> Iterator[KubesimServer]:
    with KubesimServer(nodes=3, pools=3, time_scale=0.01) as server:
        yield server


def test_get_nodes(sim: KubesimServer) -> None:
    names = kubectl(sim, "get", "nodes", "-o", "name").split()
    assert len(names) == 3
    assert all(n.startswith("node/gke-kubesim-pool-") for n in names)


def test_create_job_and_list_its_pods_by_label(sim: KubesimServer, tmp_path: Path) -> None:
    manifest = tmp_path / "job.yaml"
    manifest.write_text(JOB)
    assert kubectl(sim, "create", "-f", str(manifest)).strip() == "job.batch/demo created"
    kubectl(sim, "wait", "--for=condition=Ready", "pod", "-l", "app=demo", "--timeout=20s")
    pods = json.loads(kubectl(sim, "get", "pods", "-l", "app=demo", "-o", "json"))
    indexes = sorted(
        p["metadata"]["annotations"]["batch.kubernetes.io/job-completion-index"] for p in pods["items"]
    )
    assert indexes == ["0", "1"]
    assert all(p["spec"]["nodeName"] for p in pods["items"])
    assert kubectl(sim, "delete", "job", "demo").strip() == 'job.batch "demo" deleted'


def test_apply_client_side_then_server_side(sim: KubesimServer, tmp_path: Path) -> None:
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD.format(name="web", version="1"))
    assert kubectl(sim, "apply", "-f", str(manifest)).strip() == "pod/web created"
    manifest.write_text(POD.format(name="web", version="2"))
    assert kubectl(sim, "apply", "-f", str(manifest)).strip() == "pod/web configured"
    assert kubectl(sim, "apply", "-f", str(manifest)).strip() == "pod/web unchanged"
    assert kubectl(sim, "get", "pod", "web", "-o", "jsonpath={.metadata.labels.version}") == "2"

    manifest.write_text(POD.format(name="web-ssa", version="1"))
    assert (
        kubectl(sim, "apply", "--server-side", "-f", str(manifest)).strip()
        == "pod/web-ssa serverside-applied"
    )
    manifest.write_text(POD.format(name="web-ssa", version="2"))
    kubectl(sim, "apply", "--server-side", "-f", str(manifest))
    assert kubectl(sim, "get", "pod", "web-ssa", "-o", "jsonpath={.metadata.labels.version}") == "2"


def test_patch_merge_and_delete(sim: KubesimServer) -> None:
    kubectl(sim, "create", "-f", "-", stdin=POD.format(name="patched", version="1"))
    out = kubectl(
        sim, "patch", "pod", "patched", "--type=merge", "-p", '{"metadata":{"labels":{"extra":"yes"}}}'
    )
    assert out.strip() == "pod/patched patched"
    assert kubectl(sim, "get", "pod", "patched", "-o", "jsonpath={.metadata.labels.extra}") == "yes"
    assert kubectl(sim, "delete", "pod", "patched", "--wait=true").strip() == 'pod "patched" deleted'
    assert "patched" not in kubectl(sim, "get", "pods", "-o", "name")


def test_errors_are_printed_from_status_bodies(sim: KubesimServer) -> None:
    assert KUBECTL is not None
    result = subprocess.run(
        [KUBECTL, "--kubeconfig", str(sim.kubeconfig_path), "get", "pod", "does-not-exist"],
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert result.returncode == 1
    assert 'Error from server (NotFound): pods "does-not-exist" not found' in result.stderr


def test_get_pods_watch_is_bounded_and_streams_events(sim: KubesimServer) -> None:
    assert KUBECTL is not None
    kubectl(sim, "create", "-f", "-", stdin=POD.format(name="watched", version="1"))
    watcher = subprocess.Popen(
        [KUBECTL, "--kubeconfig", str(sim.kubeconfig_path), "get", "pods", "watched", "-w",
         "--output-watch-events", "--request-timeout=5s"],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        header = watcher.stdout.readline() if watcher.stdout else ""
        first = watcher.stdout.readline() if watcher.stdout else ""
        kubectl(sim, "label", "pod", "watched", "seen=yes")
        output, _ = watcher.communicate(timeout=20)
    finally:
        if watcher.poll() is None:
            watcher.kill()
            watcher.wait()
    assert header.split()[:2] == ["EVENT", "NAME"]
    events = [line.split()[:2] for line in [first, *output.splitlines()] if line.strip()]
    assert ["ADDED", "watched"] in events
    assert ["MODIFIED", "watched"] in events


def test_get_prints_server_side_table_columns(sim: KubesimServer) -> None:
    kubectl(sim, "create", "-f", "-", stdin=POD.format(name="tabled", version="1"))
    header = kubectl(sim, "get", "pod", "tabled").splitlines()[0].split()
    assert header == ["NAME", "READY", "STATUS", "RESTARTS", "AGE"]
    wide = kubectl(sim, "get", "nodes", "-o", "wide").splitlines()
    assert wide[0].split()[:5] == ["NAME", "STATUS", "ROLES", "AGE", "VERSION"]
    assert all(line.split()[1] == "Ready" for line in wide[1:])


def test_older_kubectl_reading_openapi_v2_protobuf_can_create_and_apply(
    sim: KubesimServer, tmp_path: Path
) -> None:
    old = Path("/usr/lib/google-cloud-sdk/bin/kubectl.1.27")
    if not old.exists():
        pytest.skip("kubectl 1.27 is not installed on this machine")
    manifest = tmp_path / "pod.yaml"
    manifest.write_text(POD.format(name="old-client", version="1"))
    for verb in (["create"], ["apply"], ["apply", "--server-side"]):
        result = subprocess.run(
            [str(old), "--kubeconfig", str(sim.kubeconfig_path), *verb, "-f", str(manifest)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
        assert result.returncode == 0, result.stderr
