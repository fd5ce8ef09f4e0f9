"""Clients of the API server against the real kube-apiserver: kubekit's informers and lists (projected
caches, pages, PartialObjectMetadata), the kubectl plugin's command line (kubeconfig and context, the default
namespace, one-line errors, `--watch`), and compose's webhook registration.
"""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import pytest
import yaml

from certs.files import write_dev_certs
from devstack.stack import Stack
from kubectl_plugin.cli import main
from kubekit.client import Kube, Timeouts, build_api_client
from kubekit.informer import Informer
from kubekit.projection import FieldProjection
from placement.cached_fields import LEADER_POD_FIELDS, NODE_FIELDS
from placement.constants import (
    GKE_NODEPOOL_LABEL,
    JOB_COMPLETION_INDEX_ANNOTATION,
    ROLE_LABEL,
    ROLE_LEADER,
)
from tests.kube.workloads import plain_job
from tests.kubekit.test_kubekit_projection import LEADER_POD_KEYS, assert_only
from tests.support.waiting import eventually

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-clients")]

Obj = dict[str, Any]
REPO = Path(__file__).resolve().parents[2]
NODE_KEYS = {
    "metadata": {"name", "resourceVersion", "labels"},
    "spec": {"unschedulable"},
    "status": {"allocatable"},
}


def kube_client(stack: Stack) -> Kube:
    """kubekit's client with the stack's admin kubeconfig, as a binary builds it."""
    return Kube(build_api_client(stack.kubeconfig, None, user_agent="test"), Timeouts(read=10))


def leader_pod(name: str) -> Obj:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {ROLE_LABEL: ROLE_LEADER, "team": "research"},
            "annotations": {JOB_COMPLETION_INDEX_ANNOTATION: "0", "note": "y" * 500},
        },
        "spec": {"containers": [{"name": "c", "image": "registry.example/c:1"}]},
    }


def kubeconfig_with(source: Path, target: Path, **context: str) -> Path:
    """A copy of `source` whose current context has `context` set (e.g. namespace)."""
    config = yaml.safe_load(source.read_text())
    (current,) = [c for c in config["contexts"] if c["name"] == config["current-context"]]
    current["context"].update(context)
    target.write_text(yaml.safe_dump(config))
    return target


def as_in_a_terminal() -> None:
    """In the child before exec: Ctrl-C's default disposition, as a terminal gives it. A suite started in
    the background (`make test &`, nohup) has SIGINT ignored, the child would inherit that, and Python
    then installs no KeyboardInterrupt handler: the SIGINT below would be ignored."""
    signal.signal(signal.SIGINT, signal.SIG_DFL)


def next_line(lines: queue.Queue[str]) -> str | None:
    try:
        return lines.get_nowait()
    except queue.Empty:
        return None


# --- the kubectl plugin -------------------------------------------------------------------------------------


def test_a_cluster_without_exclusive_jobs_says_so(
    kube_stack: Stack, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", "--kubeconfig", str(kube_stack.kubeconfig)]) == 0
    assert capsys.readouterr().out == "No exclusive Jobs or topology domains found in namespace default.\n"
    assert main(["status", "-A", "-o", "json", "--kubeconfig", str(kube_stack.kubeconfig)]) == 0
    assert capsys.readouterr().out == '{\n  "domains": [],\n  "waiting": []\n}\n'


def test_the_namespace_defaults_to_the_contexts(
    kube_stack: Stack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = kubeconfig_with(kube_stack.kubeconfig, tmp_path / "kubeconfig", namespace="team-a")
    assert main(["explain", "job/train-0", "--kubeconfig", str(config)]) == 1
    assert capsys.readouterr().err == 'error: job "train-0" not found in namespace team-a\n'
    assert main(["explain", "jobset", "train", "-n", "team-b", "--kubeconfig", str(config)]) == 1
    assert capsys.readouterr().err == 'error: jobset "train" not found in namespace team-b\n'


def test_an_unknown_context_or_kubeconfig_is_one_line(
    kube_stack: Stack, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", "--kubeconfig", str(tmp_path / "missing")]) == 1
    assert capsys.readouterr().err == f"error: kubeconfig {tmp_path / 'missing'} does not exist\n"
    assert main(["status", "--kubeconfig", str(kube_stack.kubeconfig), "--context", "nope"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: kubeconfig ")
    assert "nope" in err
    assert err.count("\n") == 1


def test_a_reader_that_goes_away_gets_no_traceback(kube_stack: Stack) -> None:
    """`kubectl exclusive-placement status -o json | head -1`: the pipe closes before the output ends."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "kubectl_plugin", "status", "-A", "-o", "json"],
            env={**os.environ, "KUBECONFIG": str(kube_stack.kubeconfig)},
            stdout=write_end,
            stderr=subprocess.PIPE,
            text=True,
            timeout=60,
            check=False,
        )
    finally:
        os.close(write_end)
    assert result.returncode == 1
    assert result.stderr == ""


def test_watch_prints_a_document_per_change_and_ends_on_ctrl_c(kube_stack: Stack, namespace: str) -> None:
    watcher = subprocess.Popen(
        [sys.executable, "-m", "kubectl_plugin", "status", "-A", "-o", "json", "--watch"],
        env={**os.environ, "KUBECONFIG": str(kube_stack.kubeconfig)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        preexec_fn=as_in_a_terminal,  # noqa: PLW1509 - one signal() call, async-signal-safe
    )
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in watcher.stdout or ():
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        first = json.loads(eventually(lambda: next_line(lines), "the first document", 60))
        assert first == {"domains": [], "waiting": []}
        job = plain_job("watched", namespace, 2)
        job["spec"]["suspend"] = True  # no pod: the Job waits for as long as the test reads
        kube_stack.client.create(job)
        changed = json.loads(eventually(lambda: next_line(lines), "a document after the Job was created", 60))
        assert [(w["job"], w["reason"]) for w in changed["waiting"]] == [("watched", "suspended")]
        assert {d["domain"] for d in changed["domains"]} == {"pool-00", "pool-01", "pool-02", "pool-03"}
    finally:
        watcher.send_signal(signal.SIGINT)
        assert watcher.wait(60) == 130  # as kubectl: 128 + SIGINT
    assert watcher.stderr is not None
    assert watcher.stderr.read() == ""


# --- kubekit's informers and lists ---------------------------------------------------------------------


def test_informers_store_only_the_projected_fields(kube_stack: Stack, namespace: str) -> None:
    """From the list and from watch events: a node keeps name, labels, cordon and allocatable, a leader pod
    only what the rules read, even when the change that arrives touches only unrelated fields."""
    kube = kube_client(kube_stack)
    node_count = len(kube_stack.client.list("Node"))
    kube_stack.client.create(leader_pod("listed"), namespace=namespace)
    nodes = Informer(
        kube,
        "nodes",
        name="nodes",
        namespace=None,
        label_selector=None,
        project=FieldProjection(NODE_FIELDS),
    )
    leaders = Informer(
        kube,
        "pods",
        name="leaders",
        namespace=namespace,
        label_selector=f"{ROLE_LABEL}={ROLE_LEADER}",
        project=FieldProjection(LEADER_POD_FIELDS),
    )
    try:
        nodes.start()
        leaders.start()
        eventually(lambda: nodes.synced.is_set() and leaders.synced.is_set(), "both caches synced")
        assert len(nodes.store) == node_count
        for cached in nodes.store.items():
            assert_only(cached, NODE_KEYS)
            assert GKE_NODEPOOL_LABEL in cached["metadata"]["labels"]
        first = nodes.store.items()[0]["metadata"]["name"]
        kube_stack.client.patch(
            "Node", first, {"metadata": {"labels": {"extra": "1"}, "annotations": {"big": "z" * 500}}}
        )
        eventually(
            lambda: (nodes.store.get(first) or {}).get("metadata", {}).get("labels", {}).get("extra") == "1",
            "the watched node change",
        )
        assert_only(nodes.store.get(first) or {}, NODE_KEYS)
        assert "annotations" not in (nodes.store.get(first) or {})["metadata"]
        kube_stack.client.create(leader_pod("watched"), namespace=namespace)
        eventually(lambda: leaders.store.get(f"{namespace}/watched") is not None, "the watched leader")
        for cached in leaders.store.items():
            assert_only(cached, LEADER_POD_KEYS)
            assert "team" not in cached["metadata"]["labels"]
            assert "note" not in cached["metadata"]["annotations"]
            assert cached["metadata"]["annotations"][JOB_COMPLETION_INDEX_ANNOTATION] == "0"
    finally:
        for informer in (nodes, leaders):
            informer.stop()
            informer.join(5)
        kube.close()


def test_list_applies_the_transform_page_by_page(kube_stack: Stack) -> None:
    """`Kube.list_objects(transform=...)` hands back only the transformed items (None drops one)."""
    node_count = len(kube_stack.client.list("Node"))
    kube = kube_client(kube_stack)
    seen: list[str] = []

    def transform(obj: Obj) -> Obj | None:
        seen.append(obj["metadata"]["name"])
        return None if len(seen) == 1 else FieldProjection(NODE_FIELDS)(obj)

    try:
        items, version = kube.list_objects("nodes", namespace=None, label_selector=None, transform=transform)
    finally:
        kube.close()
    assert len(seen) == node_count
    assert len(items) == node_count - 1
    assert version
    assert all(set(item["metadata"]) <= {"name", "resourceVersion", "labels"} for item in items)


def test_metadata_only_lists_and_watches_partial_object_metadata(kube_stack: Stack) -> None:
    """With the official client as kubekit uses it: `metadata_only` gets PartialObjectMetadata from
    kube-apiserver for the list and for every watch event (nothing but metadata crosses the wire)."""
    kube = kube_client(kube_stack)
    informer = Informer(
        kube, "nodes", name="nodes", namespace=None, label_selector=None, project=dict, metadata_only=True
    )
    try:
        items, _ = kube.list_objects("nodes", namespace=None, label_selector=None, metadata_only=True)
        assert {item["kind"] for item in items} == {"PartialObjectMetadata"}
        assert all(set(item) == {"kind", "apiVersion", "metadata"} for item in items)
        informer.start()
        eventually(informer.synced.is_set, "the metadata-only cache synced")
        first = items[0]["metadata"]["name"]
        kube_stack.client.patch("Node", first, {"metadata": {"labels": {"extra": "2"}}})
        eventually(
            lambda: (
                (informer.store.get(first) or {}).get("metadata", {}).get("labels", {}).get("extra") == "2"
            ),
            "the watched change",
        )
        assert all(cached["kind"] == "PartialObjectMetadata" for cached in informer.store.items())
        assert all("status" not in cached for cached in informer.store.items())
    finally:
        informer.stop()
        informer.join(5)
        kube.close()


# --- compose's webhook registration ----------------------------------------------------------------------

SCRIPT = REPO / "images" / "register_webhooks.py"
WEBHOOK_URL = "https://127.0.0.1:9443"


def register(kubeconfig: Path, ca_file: Path) -> subprocess.CompletedProcess[str]:
    argv = [sys.executable, str(SCRIPT), "--kubeconfig", str(kubeconfig), "--webhook-url", WEBHOOK_URL]
    return subprocess.run(
        [*argv, "--ca-file", str(ca_file), "--default-strategy", "elastic"],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
        cwd=REPO,
        env={**os.environ, "PYTHONPATH": str(REPO)},
    )


def test_compose_registers_the_charts_webhooks_at_its_url(kube_stack: Stack, tmp_path: Path) -> None:
    """images/register_webhooks.py with the cluster's kubeconfig: the chart's four webhooks, pointed at the
    compose URL; a second run (compose restart) replaces rather than fails. The stack's own registration
    is put back afterwards."""
    paths = write_dev_certs(
        tmp_path, "exclusive-placement-webhook", "exclusive-placement", ["localhost"], ["127.0.0.1"]
    )
    try:
        for _ in range(2):
            result = register(kube_stack.kubeconfig, paths.ca_crt)
            assert result.returncode == 0, result.stderr
        configurations = kube_stack.client.list("MutatingWebhookConfiguration") + kube_stack.client.list(
            "ValidatingWebhookConfiguration"
        )
    finally:
        kube_stack.register_webhooks()
    urls = {w["name"]: w["clientConfig"].get("url") for c in configurations for w in c["webhooks"]}
    assert {name: url for name, url in urls.items() if name.endswith(".exclusive-placement.io")} == {
        "pods.mutate.exclusive-placement.io": f"{WEBHOOK_URL}/mutate-pods",
        "jobs.mutate.exclusive-placement.io": f"{WEBHOOK_URL}/mutate-jobs",
        "jobsets.validate.exclusive-placement.io": f"{WEBHOOK_URL}/validate-jobsets",
    }
    assert "registered MutatingWebhookConfiguration/exclusive-placement" in result.stdout


def test_a_missing_ca_file_is_a_clear_error(kube_stack: Stack, tmp_path: Path) -> None:
    result = register(kube_stack.kubeconfig, tmp_path / "absent.crt")
    assert result.returncode == 1
    assert "absent.crt" in result.stderr
