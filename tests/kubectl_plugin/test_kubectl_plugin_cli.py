"""The plugin's command line against an in-process kubesim: kubeconfig and context, the default namespace,
usage errors (exit 2) and read errors (exit 1, one line). The placement itself is checked end to end in
tests/e2e/test_operator_experience.py."""

from __future__ import annotations

import json
import os
import queue
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest
import yaml

from devstack.kube import KubeClient
from devstack.ports import free_port
from kubectl_plugin.cli import main, parse_target
from kubesim.testing import KubesimServer
from placement.constants import GKE_NODEPOOL_LABEL, TOPOLOGY_ANNOTATION
from tests.support.waiting import eventually


@pytest.fixture(scope="module")
def sim() -> Iterator[KubesimServer]:
    with KubesimServer(nodes=4, pools=2, controllers=False) as server:
        yield server


def kubeconfig_with(source: Path, target: Path, **context: str) -> Path:
    """A copy of `source` whose context has `context` set (e.g. namespace, cluster server)."""
    config = yaml.safe_load(source.read_text())
    config["contexts"][0]["context"].update(context)
    target.write_text(yaml.safe_dump(config))
    return target


@pytest.mark.parametrize(
    ("target", "name", "expected"),
    [
        ("job/train-0", None, ("job", "train-0")),
        ("jobs", "train-0", ("job", "train-0")),
        ("JobSet/train", None, ("jobset", "train")),
        ("jobset.jobset.x-k8s.io/train", None, ("jobset", "train")),
        ("po/train-0-0-abcde", None, ("pod", "train-0-0-abcde")),
    ],
)
def test_targets_take_kubectls_forms(target: str, name: str | None, expected: tuple[str, str]) -> None:
    assert parse_target(target, name) == expected


@pytest.mark.parametrize(
    ("target", "name"), [("deploy/x", None), ("job", None), ("job/x", "y"), ("job/", None)]
)
def test_other_targets_are_refused(target: str, name: str | None) -> None:
    with pytest.raises(ValueError, match=r"expected \(job\|jobset\|pod\)/NAME or TYPE NAME"):
        parse_target(target, name)


def test_usage_errors_exit_2(capsys: pytest.CaptureFixture[str]) -> None:
    for argv in (["status", "-n", "a", "-A"], ["explain", "deploy/x"], ["status", "-o", "yaml"]):
        with pytest.raises(SystemExit) as exit_:
            main(argv)
        assert exit_.value.code == 2
    assert "not both" in capsys.readouterr().err


def test_an_empty_cluster_says_so(sim: KubesimServer, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["status", "--kubeconfig", str(sim.kubeconfig_path)]) == 0
    assert capsys.readouterr().out == "No exclusive Jobs or topology domains found in namespace default.\n"
    assert main(["status", "-A", "-o", "json", "--kubeconfig", str(sim.kubeconfig_path)]) == 0
    assert capsys.readouterr().out == '{\n  "domains": [],\n  "waiting": []\n}\n'


def test_the_namespace_defaults_to_the_contexts(
    sim: KubesimServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    config = kubeconfig_with(sim.kubeconfig_path, tmp_path / "kubeconfig", namespace="team-a")
    assert main(["explain", "job/train-0", "--kubeconfig", str(config)]) == 1
    assert capsys.readouterr().err == 'error: job "train-0" not found in namespace team-a\n'
    assert main(["explain", "jobset", "train", "-n", "team-b", "--kubeconfig", str(config)]) == 1
    assert capsys.readouterr().err == 'error: jobset "train" not found in namespace team-b\n'


def test_an_unknown_context_or_kubeconfig_is_one_line(
    sim: KubesimServer, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(["status", "--kubeconfig", str(tmp_path / "missing")]) == 1
    assert capsys.readouterr().err == f"error: kubeconfig {tmp_path / 'missing'} does not exist\n"
    assert main(["status", "--kubeconfig", str(sim.kubeconfig_path), "--context", "nope"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: kubeconfig ")
    assert "nope" in err
    assert err.count("\n") == 1


def test_an_unreachable_api_server_is_one_line(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = tmp_path / "kubeconfig"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": f"http://127.0.0.1:{free_port()}"}}],
                "users": [{"name": "u", "user": {"token": "t"}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u"}}],
                "current-context": "x",
            }
        )
    )
    assert main(["status", "--kubeconfig", str(config), "--request-timeout", "2"]) == 1
    err = capsys.readouterr().err
    assert err.startswith("error: cannot list nodes: the API server is unreachable")
    assert err.count("\n") == 1


def test_a_reader_that_goes_away_gets_no_traceback(sim: KubesimServer) -> None:
    """`kubectl exclusive-placement status -o json | head -1`: the pipe closes before the output ends."""
    read_end, write_end = os.pipe()
    os.close(read_end)
    try:
        result = subprocess.run(
            [sys.executable, "-m", "kubectl_plugin", "status", "-A", "-o", "json"],
            env={**os.environ, "KUBECONFIG": str(sim.kubeconfig_path)},
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


def test_watch_prints_a_document_per_change_and_ends_on_ctrl_c(sim: KubesimServer) -> None:
    watcher = subprocess.Popen(
        [sys.executable, "-m", "kubectl_plugin", "status", "-A", "-o", "json", "--watch"],
        env={**os.environ, "KUBECONFIG": str(sim.kubeconfig_path)},
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    lines: queue.Queue[str] = queue.Queue()

    def read() -> None:
        for line in watcher.stdout or ():
            lines.put(line)

    threading.Thread(target=read, daemon=True).start()
    try:
        assert json.loads(eventually(lambda: next_line(lines), "the first document")) == {
            "domains": [],
            "waiting": [],
        }
        job = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "metadata": {"name": "watched", "annotations": {TOPOLOGY_ANNOTATION: GKE_NODEPOOL_LABEL}},
            "spec": {
                "completionMode": "Indexed",
                "completions": 2,
                "parallelism": 2,
                "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "i"}]}},
            },
        }
        with KubeClient(sim.url) as client:
            client.create(job, namespace="default")
        changed = json.loads(eventually(lambda: next_line(lines), "a document after the Job was created"))
        assert [(w["job"], w["reason"]) for w in changed["waiting"]] == [("watched", "leader-not-created")]
        assert {d["domain"] for d in changed["domains"]} == {"pool-00", "pool-01"}
    finally:
        watcher.send_signal(signal.SIGINT)
        assert watcher.wait(30) == 0
    assert watcher.stderr is not None
    assert watcher.stderr.read() == ""


def next_line(lines: queue.Queue[str]) -> str | None:
    try:
        return lines.get_nowait()
    except queue.Empty:
        return None
