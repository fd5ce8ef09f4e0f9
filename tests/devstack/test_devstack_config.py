"""Command lines, option validation, manifests and the chart's webhook configurations pointed at a URL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devstack.commands import KubesimFlags, kubesim_command, resizer_command, webhook_command
from devstack.scenario import PlacementError, expected_jobs, load_manifests
from devstack.stack import StackOptions
from devstack.webhooks import local_webhook_configurations, point_at_url
from kubesim.__main__ import build_parser as kubesim_parser
from placement.constants import DEFAULT_STRATEGY
from resizer.settings import load_settings as load_resizer_settings
from webhook.settings import load_settings as load_webhook_settings

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def test_kubesim_command_carries_the_cluster_shape(tmp_path: Path) -> None:
    flags = KubesimFlags(
        nodes=8, pools=4, time_scale=0.05, pod_run_seconds=30, faults="drop-watch=0.1", seed=3
    )
    argv = kubesim_command(flags, port=0, kubeconfig=tmp_path / "kc", python="python")
    assert argv[:4] == ["python", "-m", "kubesim", "serve"]
    pairs = dict(zip(argv[4::2], argv[5::2], strict=True))
    assert pairs == {
        "--port": "0",
        "--nodes": "8",
        "--pools": "4",
        "--gpus-per-node": "8",
        "--time-scale": "0.05",
        "--pod-run-seconds": "30",
        "--faults": "drop-watch=0.1",
        "--seed": "3",
        "--kubeconfig": str(tmp_path / "kc"),
    }


def test_resizer_elects_a_leader_only_with_replicas() -> None:
    assert "--no-leader-elect" in resizer_command(server="http://x", metrics_port=1, leader_elect=False)
    assert "--leader-elect" in resizer_command(server="http://x", metrics_port=1, leader_elect=True)


def test_webhook_command_uses_tls_cert_dir(tmp_path: Path) -> None:
    argv = webhook_command(port=9443, cert_dir=tmp_path, server="http://s", default_strategy="gate")
    assert "--insecure-dev" not in argv
    assert argv[argv.index("--cert-dir") + 1] == str(tmp_path)
    assert argv[argv.index("--default-strategy") + 1] == "gate"
    assert "--no-jobset-takeover" not in argv


def test_webhook_command_turns_the_jobset_takeover_off(tmp_path: Path) -> None:
    argv = webhook_command(
        port=9443, cert_dir=tmp_path, server="http://s", default_strategy="gate", jobset_takeover=False
    )
    assert argv[-1] == "--no-jobset-takeover"
    assert load_webhook_settings(argv[3:]).jobset_takeover is False


def test_webhook_command_extra_args_reach_the_settings(tmp_path: Path) -> None:
    extra = ["--cert-reload-seconds", "0.2", "--max-inflight-admissions", "3"]
    argv = webhook_command(port=9443, cert_dir=tmp_path, server="http://s", extra_args=extra)
    assert "--default-strategy" not in argv  # the webhook's own default
    settings = load_webhook_settings(argv[3:])
    assert (settings.cert_reload_seconds, settings.max_inflight_admissions) == (0.2, 3)
    assert settings.default_strategy is DEFAULT_STRATEGY


def test_resizer_command_without_server_takes_a_kubeconfig_from_extra_args(tmp_path: Path) -> None:
    kubeconfig = str(tmp_path / "kc")
    argv = resizer_command(
        server=None, metrics_port=1, leader_elect=False, extra_args=["--kubeconfig", kubeconfig, "--dry-run"]
    )
    assert "--server" not in argv
    settings = load_resizer_settings(argv[3:])
    assert (settings.kubeconfig, settings.dry_run, settings.leader_elect) == (Path(kubeconfig), True, False)


def test_kubesim_command_extra_args_reach_the_parser(tmp_path: Path) -> None:
    argv = kubesim_command(KubesimFlags(), port=0, kubeconfig=tmp_path / "kc", extra_args=["--seed", "9"])
    assert kubesim_parser().parse_args(argv[3:]).seed == 9


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"nodes": 0}, "nodes and pools"),
        ({"nodes": 2, "pools": 4}, "cannot exceed"),
        ({"time_scale": 0}, "time scale"),
        ({"pod_run_seconds": -1}, "run time"),
    ],
)
def test_cluster_flags_reject_bad_values(kwargs: dict[str, float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        KubesimFlags(**kwargs)  # type: ignore[arg-type]


def test_stack_options_reject_unknown_strategy() -> None:
    with pytest.raises(ValueError, match="valid: elastic, gate"):
        StackOptions(default_strategy="spread")


def test_examples_load_and_count_jobs() -> None:
    assert expected_jobs(load_manifests(EXAMPLES / "jobset-exclusive.yaml")) == 4
    assert expected_jobs(load_manifests(EXAMPLES / "indexed-job.yaml")) == 1
    assert expected_jobs(load_manifests(EXAMPLES / "jobset-per-job-strategy.yaml")) == 2


@pytest.mark.parametrize(
    ("text", "message"),
    [("", "no Kubernetes objects"), ("kind: Job\n", "needs apiVersion"), ("a: [", "cannot read")],
)
def test_bad_manifests_are_rejected(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "m.yaml"
    path.write_text(text)
    with pytest.raises(PlacementError, match=message):
        load_manifests(path)


def test_point_at_url_replaces_the_service() -> None:
    config: dict[str, Any] = {
        "kind": "MutatingWebhookConfiguration",
        "webhooks": [
            {"name": "w", "clientConfig": {"service": {"name": "s", "path": "/mutate-pods"}, "caBundle": "X"}}
        ],
    }
    result = point_at_url(config, "https://127.0.0.1:8443/", "Q0E=")
    assert result["webhooks"][0]["clientConfig"] == {
        "url": "https://127.0.0.1:8443/mutate-pods",
        "caBundle": "Q0E=",
    }
    assert config["webhooks"][0]["clientConfig"]["caBundle"] == "X"


def test_chart_configurations_call_the_local_webhook_and_keep_the_scoping() -> None:
    configs = local_webhook_configurations("https://127.0.0.1:9443", "Q0E=", "elastic")
    webhooks = {w["name"]: w for c in configs for w in c["webhooks"]}
    urls = {w["clientConfig"]["url"] for w in webhooks.values()}
    paths = ("mutate-pods", "mutate-jobs", "validate-pods", "validate-jobsets")
    assert urls == {f"https://127.0.0.1:9443/{p}" for p in paths}
    for webhook in webhooks.values():
        assert webhook["clientConfig"]["caBundle"] == "Q0E="
        exempt = webhook["namespaceSelector"]["matchExpressions"][0]
        assert exempt["operator"] == "NotIn"
        assert "exclusive-placement" in exempt["values"]
        assert webhook["sideEffects"] == "None"


def test_exempt_namespaces_join_the_chart_exemptions_of_every_webhook() -> None:
    configs = local_webhook_configurations(
        "https://127.0.0.1:9443", "Q0E=", "elastic", exempt_namespaces=("bench-x-jobset",)
    )
    webhooks = [w for c in configs for w in c["webhooks"]]
    assert len(webhooks) == 4
    for webhook in webhooks:
        (exempt,) = webhook["namespaceSelector"]["matchExpressions"]
        assert exempt == {
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": ["exclusive-placement", "kube-system", "bench-x-jobset"],
        }
