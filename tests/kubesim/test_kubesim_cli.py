"""`python -m kubesim serve` as a real process: announce line, kubeconfig, TLS, clean SIGTERM exit."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from kubernetes import client

from kubesim.testing import REPO_ROOT, KubesimProcess
from tests.support.kube import kube_client, name_of


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
    import signal

    process = subprocess.Popen(
        [sys.executable, "-m", "kubesim", "serve", "--port", "0", "--nodes", "1", "--pools", "1",
         "--kubeconfig", str(tmp_path / "kc"), "--no-controllers"],
        cwd=REPO_ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )  # fmt: skip
    try:
        assert process.stdout is not None
        assert process.stdout.readline().startswith("kubesim listening on http://127.0.0.1:")
        process.send_signal(signal.SIGINT)
        assert process.wait(15) == 0
    finally:
        if process.poll() is None:
            process.kill()
            process.wait()
        process.communicate()
