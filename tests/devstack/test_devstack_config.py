"""Command lines, option validation, manifests and the chart's webhook configurations pointed at a URL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from devstack.__main__ import main as devstack_main
from devstack.commands import resizer_command, webhook_command
from devstack.scenario import PlacementError, load_manifests
from devstack.stack import StackOptions
from devstack.webhooks import (
    admission_policies,
    chart_values,
    local_webhook_configurations,
    point_at_url,
    render_chart,
    resizer_pin_followers_flag,
    webhook_configurations,
    webhook_follower_shards_flag,
)
from placement.constants import DEFAULT_STRATEGY
from resizer.settings import load_settings as load_resizer_settings
from webhook.settings import load_settings as load_webhook_settings

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


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
    paths = ("mutate-pods", "mutate-jobs", "validate-jobsets")
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
    assert len(webhooks) == 3
    for webhook in webhooks:
        (exempt,) = webhook["namespaceSelector"]["matchExpressions"]
        assert exempt == {
            "key": "kubernetes.io/metadata.name",
            "operator": "NotIn",
            "values": ["exclusive-placement", "kube-system", "bench-x-jobset"],
        }


def test_demo_rejects_a_bad_manifest_before_starting_anything(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    manifest = tmp_path / "bad.yaml"
    manifest.write_text("kind: JobSet\n")
    assert devstack_main(["demo", "-f", str(manifest), "--workdir", str(tmp_path / "w")]) == 2
    assert "needs apiVersion" in capsys.readouterr().err
    assert not (tmp_path / "w").exists()


def test_pod_admission_defaults_to_the_policies() -> None:
    assert StackOptions().pod_admission_path == "policy"
    assert StackOptions(pod_admission="webhook").pod_admission_path == "webhook"
    with pytest.raises(ValueError, match="unknown pod admission path 'cel'"):
        StackOptions(pod_admission="cel")


def test_the_policy_path_renders_the_pod_policies_and_narrows_the_pod_webhook() -> None:
    objects = render_chart(chart_values("Q0E=", "elastic", pod_admission="policy"))
    names = [(o["kind"], o["metadata"]["name"]) for o in admission_policies(objects)]
    assert ("MutatingAdmissionPolicy", "exclusive-placement-pod-followers") in names
    kinds = [kind for kind, _ in names]
    assert kinds.index("MutatingAdmissionPolicyBinding") > kinds.index("MutatingAdmissionPolicy")
    pod_webhook = next(
        w
        for c in webhook_configurations(objects, "https://127.0.0.1:9443", "Q0E=")
        for w in c["webhooks"]
        if w["name"] == "pods.mutate.exclusive-placement.io"
    )
    assert "not-admitted-by-policy" in [c["name"] for c in pod_webhook["matchConditions"]]


@pytest.mark.parametrize(("path", "label"), [("policy", True), ("webhook", False)])
def test_devstacks_resizer_labels_pin_followers_as_the_charts_does(path: str, label: bool) -> None:
    """The label is the follower policy's params: set on the policy path only, as the chart says."""
    flag = resizer_pin_followers_flag(render_chart(chart_values("Q0E=", "elastic", pod_admission=path)))
    settings = load_resizer_settings(["--no-leader-elect", flag])
    assert settings.pin_followers_label is label


def test_devstacks_webhook_shards_followers_as_the_charts_does() -> None:
    """The pin-shard labels the webhook writes are those the chart's follower policy bindings match."""
    values = chart_values("Q0E=", "elastic", pod_admission="policy")
    values["webhook"]["admission"]["pods"]["followerShards"] = 5
    flag = webhook_follower_shards_flag(render_chart(values))
    assert flag == "--follower-shards=5"
    assert load_webhook_settings(["--insecure-dev", flag]).follower_shards == 5
