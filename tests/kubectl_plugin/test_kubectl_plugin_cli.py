"""The plugin's command line without a cluster: kubectl's target forms, usage errors (exit 2), an
unreachable API server (exit 1, one line). Against kube-apiserver (kubeconfig and context, the default
namespace, `--watch`): tests/kube/test_kube_clients.py; what an operator sees of a placement:
tests/kube/test_kube_devstack.py."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from devstack.ports import free_port
from kubectl_plugin.cli import main, parse_target


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
