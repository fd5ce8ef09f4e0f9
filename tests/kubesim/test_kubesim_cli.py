"""`python -m kubesim serve` as a real process: announce line, kubeconfig, TLS, clean SIGTERM exit."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from devstack.clusters import KUBESIM_LISTENING
from devstack.commands import KubesimFlags, kubesim_command
from devstack.processes import ManagedProcess
from devstack.readiness import wait_for_log_line
from kubesim.testing import REPO_ROOT, KubesimProcess
from tests.support.kube import kube_client, name_of
from tests.support.waiting import eventually


def test_serve_writes_a_kubeconfig_and_exits_zero_on_sigterm(tmp_path: Path) -> None:
    kubeconfig = tmp_path / "kc"
    process = KubesimProcess(nodes=3, pools=1, kubeconfig_path=kubeconfig, controllers=False).start()
    try:
        assert process.kubeconfig_path == kubeconfig.resolve()
        document = yaml.safe_load(kubeconfig.read_text())
        assert document["clusters"][0]["cluster"]["server"] == process.url
        assert oct(kubeconfig.stat().st_mode & 0o777) == "0o600"
        with kube_client(kubeconfig) as api_client:
            assert len(client.CoreV1Api(api_client).list_node().items) == 3
    finally:
        code = process.stop()
    assert code == 0


def test_tls_serving_with_the_ca_in_the_kubeconfig() -> None:
    with KubesimProcess(nodes=1, pools=1, tls=True, controllers=False) as process:
        assert process.url.startswith("https://127.0.0.1:")
        with kube_client(process.kubeconfig_path) as api_client:
            namespaces = {name_of(n) for n in client.CoreV1Api(api_client).list_namespace().items}
        assert {"default", "kube-system"} <= namespaces
        assert process.stats()["requests"]["by_verb_resource"]["list namespaces"] == 1


@pytest.mark.parametrize(
    ("args", "message"),
    [
        (["--faults", "error-rate=7"], "error-rate"),
        (["--pools", "9", "--nodes", "2"], "pools"),
    ],
)
def test_bad_arguments_fail_with_a_clear_message(tmp_path: Path, args: list[str], message: str) -> None:
    # The CLI's own parser is under test, so the line is written out here: devstack's builder would refuse
    # `--pools 9 --nodes 2` itself (KubesimFlags) before kubesim ever saw it.
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "kubesim",
            "serve",
            "--port",
            "0",
            "--kubeconfig",
            str(tmp_path / "kc"),
            *args,
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert result.returncode == 2
    assert message in result.stderr


def test_sigint_also_exits_zero(tmp_path: Path) -> None:
    flags = KubesimFlags(nodes=1, pools=1)
    argv = kubesim_command(flags, port=0, kubeconfig=tmp_path / "kc", extra_args=["--no-controllers"])
    process = ManagedProcess("kubesim", argv, tmp_path / "kubesim.log")
    process.start()
    try:
        announced = wait_for_log_line(process, KUBESIM_LISTENING, 60)
        assert announced["url"].startswith("http://127.0.0.1:")
        process.signal(signal.SIGINT)
        eventually(lambda: not process.running, "kubesim to exit after SIGINT", 15)
        assert process.returncode == 0
    finally:
        process.stop()
