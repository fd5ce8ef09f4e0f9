"""What the control plane's guard prints when kwokctl could not bring the cluster up."""

from __future__ import annotations

from pathlib import Path

import pytest

from devstack.controlplane.guard import print_component_logs


def test_a_failed_create_prints_the_tail_of_every_components_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "etcd.log").write_text("".join(f"etcd line {n}\n" for n in range(40)))
    (logs / "kube-apiserver.log").write_text("bind: address already in use\n")

    print_component_logs(tmp_path, lines=3)

    out = capsys.readouterr().out.splitlines()
    assert out == [
        "--- last 3 lines of etcd.log",
        "etcd line 37",
        "etcd line 38",
        "etcd line 39",
        "--- last 1 lines of kube-apiserver.log",
        "bind: address already in use",
    ]


def test_a_cluster_without_logs_prints_nothing(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    print_component_logs(tmp_path)
    assert capsys.readouterr().out == ""
