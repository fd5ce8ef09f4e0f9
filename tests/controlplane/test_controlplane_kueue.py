"""Kueue's pieces, from the pinned Kueue module's own config/ (staged by `make kube`): its CRDs with their
conversion webhooks by URL, the webhook configurations of its own kinds and the two integrations devstack
turns on, its manager's ClusterRole, its Configuration, and the queues devstack creates."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from devstack.__main__ import build_parser, describe_control_plane, options_from
from devstack.controlplane import kueue
from devstack.controlplane.binaries import require_built
from devstack.stack import StackOptions

URL = "https://127.0.0.1:9443"


@pytest.fixture(scope="module")
def manifests() -> Path:
    return require_built().manifests_dir


def test_kueues_crds_are_its_modules_with_conversion_webhooks_by_url(manifests: Path) -> None:
    crds = {crd["spec"]["names"]["plural"]: crd for crd in kueue.crds(manifests, URL, "Q0E=")}
    assert {"workloads", "clusterqueues", "localqueues", "resourceflavors", "topologies"} <= set(crds)
    assert set(kueue.crd_names(manifests)) == {crd["metadata"]["name"] for crd in crds.values()}
    for plural, crd in crds.items():
        served = [version["name"] for version in crd["spec"]["versions"] if version["served"]]
        assert "v1beta2" in served, plural
        conversion = crd["spec"].get("conversion")
        if plural in kueue.CONVERTED_CRDS:
            assert conversion["webhook"]["clientConfig"] == {"url": f"{URL}/convert", "caBundle": "Q0E="}
        else:
            assert conversion is None or conversion.get("strategy") == "None", plural


def test_only_kueues_own_and_the_enabled_integrations_webhooks_are_installed_by_url(manifests: Path) -> None:
    configurations = kueue.webhook_configurations(manifests, URL, "Q0E=")
    assert {c["metadata"]["name"] for c in configurations} == {
        "kueue-mutating-webhook-configuration",
        "kueue-validating-webhook-configuration",
    }
    webhooks = {w["name"]: w for c in configurations for w in c["webhooks"]}
    # upstream's names prefixed: its JobSet webhooks are named as JobSet's own (mjobset.kb.io, vjobset.kb.io)
    upstream = {"mjob.kb.io", "vjob.kb.io", "mjobset.kb.io", "vjobset.kb.io", "vclusterqueue.kb.io"}
    assert {f"kueue-{name}" for name in upstream} <= set(webhooks)
    assert not upstream & set(webhooks)
    skipped = {"mpod.kb.io", "vpod.kb.io", "mdeployment.kb.io", "mstatefulset.kb.io"}
    assert not {f"kueue-{name}" for name in skipped} & set(webhooks)
    for name in ("kueue-mjob.kb.io", "kueue-mjobset.kb.io"):
        values = webhooks[name]["namespaceSelector"]["matchExpressions"][0]["values"]
        assert set(values) == {"kube-system", kueue.NAMESPACE}
    for webhook in webhooks.values():
        assert webhook["clientConfig"]["url"].startswith(f"{URL}/")
        assert "service" not in webhook["clientConfig"]


def test_kueues_manager_runs_under_its_modules_cluster_role(manifests: Path) -> None:
    account, role, binding, secrets, secrets_binding = kueue.rbac(manifests)
    assert secrets["kind"] == "Role"
    assert secrets["metadata"]["namespace"] == kueue.NAMESPACE
    assert any("secrets" in rule["resources"] for rule in secrets["rules"])
    assert secrets_binding["roleRef"]["name"] == secrets["metadata"]["name"]
    assert secrets_binding["subjects"] == binding["subjects"]
    assert account["metadata"] == {"name": kueue.IDENTITY.service_account, "namespace": kueue.NAMESPACE}
    assert role["metadata"]["name"] == "kueue-manager-role"
    assert any("workloads" in rule.get("resources", []) for rule in role["rules"])
    assert any("jobsets" in rule.get("resources", []) for rule in role["rules"])
    webhook_names = {
        name
        for rule in role["rules"]
        if "admissionregistration.k8s.io" in rule.get("apiGroups", [])
        for name in rule.get("resourceNames", [])
    }
    assert webhook_names == {"kueue-mutating-webhook-configuration", "kueue-validating-webhook-configuration"}
    assert binding["roleRef"]["name"] == role["metadata"]["name"]


def test_the_manager_config_turns_on_the_job_and_jobset_integrations(tmp_path: Path) -> None:
    config = yaml.safe_load(kueue.manager_config(webhook_port=9443, health_port=8081, cert_dir=tmp_path))
    assert config["integrations"]["frameworks"] == ["batch/job", "jobset.x-k8s.io/jobset"]
    assert config["webhook"] == {"host": "127.0.0.1", "port": 9443, "certDir": str(tmp_path)}
    assert config["internalCertManagement"] == {"enable": False}
    assert config["leaderElection"] == {"leaderElect": False}
    assert config["manageJobsWithoutQueueName"] is False


def test_the_manager_config_leaves_wait_for_pods_ready_to_kueue_unless_given(tmp_path: Path) -> None:
    default = yaml.safe_load(kueue.manager_config(webhook_port=9443, health_port=8081, cert_dir=tmp_path))
    assert "waitForPodsReady" not in default
    given = kueue.WaitForPodsReady(timeout_seconds=20, block_admission=True, backoff_base_seconds=2)
    config = yaml.safe_load(
        kueue.manager_config(
            webhook_port=9443, health_port=8081, cert_dir=tmp_path, wait_for_pods_ready=given
        )
    )
    assert config["waitForPodsReady"] == {
        "timeout": "20s",
        "blockAdmission": True,
        "requeuingStrategy": {"timestamp": "Eviction", "backoffBaseSeconds": 2, "backoffMaxSeconds": 3600},
    }


@pytest.mark.parametrize(
    "fields",
    [{"timeout_seconds": 0}, {"timeout_seconds": 5, "backoff_base_seconds": 10, "backoff_max_seconds": 5}],
)
def test_a_wait_for_pods_ready_kueue_would_refuse_is_refused_first(fields: dict[str, float]) -> None:
    with pytest.raises(ValueError, match=r"must be > 0|backoff base"):
        kueue.WaitForPodsReady(**fields)  # type: ignore[arg-type]


def test_tas_puts_a_topology_of_the_pools_under_the_flavor() -> None:
    topology, flavor, cluster_queue, _ = kueue.queue_objects(gpu_quota=8, namespaces=("default",), tas=True)
    assert topology["kind"] == "Topology"
    assert [level["nodeLabel"] for level in topology["spec"]["levels"]] == [
        "cloud.google.com/gke-nodepool",
        "kubernetes.io/hostname",
    ]
    assert flavor["spec"]["topologyName"] == topology["metadata"]["name"]
    assert flavor["spec"]["nodeLabels"]  # a TAS flavor needs one (the CRD's rule)
    (group,) = cluster_queue["spec"]["resourceGroups"]
    assert [entry["name"] for entry in group["flavors"]] == [flavor["metadata"]["name"]]


def test_the_queues_give_the_cluster_queue_the_gpu_quota_and_each_namespace_a_local_queue() -> None:
    flavor, cluster_queue, *local_queues = kueue.queue_objects(gpu_quota=24, namespaces=("default", "team"))
    assert flavor["kind"] == "ResourceFlavor"
    (group,) = cluster_queue["spec"]["resourceGroups"]
    (flavor_quota,) = group["flavors"]
    assert flavor_quota["name"] == flavor["metadata"]["name"]
    quotas = {entry["name"]: entry["nominalQuota"] for entry in flavor_quota["resources"]}
    assert quotas[kueue.GPU] == "24"
    assert set(group["coveredResources"]) == set(quotas)
    assert [(q["metadata"]["namespace"], q["spec"]["clusterQueue"]) for q in local_queues] == [
        ("default", kueue.CLUSTER_QUEUE),
        ("team", kueue.CLUSTER_QUEUE),
    ]


def test_the_metrics_certificate_kueue_insists_on_is_written_once_and_never_overwritten(
    tmp_path: Path,
) -> None:
    certs = tmp_path / "certs"
    certs.mkdir()
    (certs / "tls.crt").write_text("ours-crt")
    (certs / "tls.key").write_text("ours-key")
    target = tmp_path / "etc" / "kueue" / "metrics" / "certs"
    kueue.ensure_metrics_certificate(certs, target)
    assert (target / "tls.crt").read_text() == "ours-crt"
    assert (target / "tls.key").stat().st_mode & 0o777 == 0o600
    (target / "tls.crt").write_text("operators")
    kueue.ensure_metrics_certificate(certs, target)
    assert (target / "tls.crt").read_text() == "operators"
    assert sorted(path.name for path in target.iterdir()) == ["tls.crt", "tls.key"]  # nothing staged left


def test_an_unwritable_metrics_certificate_directory_is_one_message_naming_it(tmp_path: Path) -> None:
    blocker = tmp_path / "etc"
    blocker.write_text("a file where a directory should be")
    with pytest.raises(kueue.KueueSetupError, match=r"metrics certificate from .*etc/kueue"):
        kueue.ensure_metrics_certificate(tmp_path, blocker / "kueue")


def test_devstack_run_takes_kueue_and_its_gpu_quota() -> None:
    args = build_parser().parse_args(["run", "--kueue", "--kueue-gpu-quota", "16", "--namespace", "team"])
    options = options_from(args)
    assert (options.kueue, options.kueue_gpu_quota, options.kueue_namespaces) == (
        True,
        16,
        ("default", "team"),
    )
    cluster = options.kube_cluster()
    assert (cluster.kueue, cluster.kueue_gpu_quota) == (True, 16)
    assert options_from(build_parser().parse_args(["demo"])).kueue is False
    assert "Kueue v0.19" in describe_control_plane(options)


def test_devstack_run_and_demo_take_kueues_pods_ready_timeout_and_tas() -> None:
    for command in ("run", "demo"):
        argv = [command, "--kueue", "--kueue-tas", "--kueue-pods-ready-timeout", "20"]
        options = options_from(build_parser().parse_args(argv))
        assert options.kueue_wait_for_pods_ready == kueue.WaitForPodsReady(timeout_seconds=20)
        cluster = options.kube_cluster()
        assert (cluster.kueue_tas, cluster.kueue_wait_for_pods_ready) == (
            True,
            options.kueue_wait_for_pods_ready,
        )
        assert "TAS" in describe_control_plane(options)
    plain = options_from(build_parser().parse_args(["run", "--kueue"]))
    assert (plain.kueue_tas, plain.kueue_wait_for_pods_ready) == (False, None)


def test_tas_without_kueue_is_refused() -> None:
    with pytest.raises(ValueError, match="needs kueue=True"):
        StackOptions(kueue_tas=True).kube_cluster()
