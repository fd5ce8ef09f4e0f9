"""Deployments, RBAC, PDB and Service: Pod Security "restricted", probes, exact RBAC verbs, HA settings."""

from __future__ import annotations

import pytest

from placement.constants import HOSTNAME_LABEL
from tests.chart.chart_rendering import NAMESPACE, Obj, grants_of, merged, of_component, of_kind, render

APP_VERSION = "0.1.0"


@pytest.fixture(scope="module")
def objects(mode_values: dict[str, Obj]) -> list[Obj]:
    return render(mode_values["generate"])


def pod_spec(objects: list[Obj], component: str) -> Obj:
    spec: Obj = of_component(objects, "Deployment", component)["spec"]["template"]["spec"]
    return spec


def container(objects: list[Obj], component: str) -> Obj:
    containers = pod_spec(objects, component)["containers"]
    assert len(containers) == 1
    result: Obj = containers[0]
    return result


def args_of(objects: list[Obj], component: str) -> dict[str, str]:
    """`--flag=value` arguments as a map; bare flags map to ""."""
    parsed = {}
    for arg in container(objects, component)["args"]:
        flag, _, value = arg.partition("=")
        parsed[flag] = value
    return parsed


@pytest.mark.parametrize("component", ["webhook", "resizer"])
def test_pods_meet_pod_security_restricted(objects: list[Obj], component: str) -> None:
    spec = pod_spec(objects, component)
    assert spec["securityContext"]["runAsNonRoot"] is True
    assert spec["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    assert spec["securityContext"]["runAsUser"] != 0
    for host_namespace in ("hostNetwork", "hostPID", "hostIPC"):
        assert not spec.get(host_namespace)
    context = container(objects, component)["securityContext"]
    assert context["readOnlyRootFilesystem"] is True
    assert context["allowPrivilegeEscalation"] is False
    assert context["capabilities"] == {"drop": ["ALL"]}
    assert context.get("privileged", False) is False
    assert all("hostPath" not in volume for volume in spec.get("volumes", []))


@pytest.mark.parametrize(
    ("component", "port_name", "scheme"), [("webhook", "https", "HTTPS"), ("resizer", "metrics", "HTTP")]
)
def test_probes_use_livez_and_readyz(objects: list[Obj], component: str, port_name: str, scheme: str) -> None:
    c = container(objects, component)
    assert port_name in [p["name"] for p in c["ports"]]
    for probe, path in (("livenessProbe", "/livez"), ("readinessProbe", "/readyz")):
        get = c[probe]["httpGet"]
        assert (get["path"], get["port"], get.get("scheme", "HTTP")) == (path, port_name, scheme)


def test_webhook_serves_tls_from_the_mounted_certificate_secret(objects: list[Obj]) -> None:
    args = args_of(objects, "webhook")
    c = container(objects, "webhook")
    mounts = {m["name"]: m for m in c["volumeMounts"]}
    volumes = {v["name"]: v for v in pod_spec(objects, "webhook")["volumes"]}
    assert mounts["certs"]["mountPath"] == args["--cert-dir"]
    assert mounts["certs"]["readOnly"] is True
    assert "subPath" not in mounts["certs"], "a subPath mount never sees rotated certificates"
    secret = of_kind(objects, "Secret")[0]
    assert volumes["certs"]["secret"]["secretName"] == secret["metadata"]["name"]
    assert int(args["--port"]) == c["ports"][0]["containerPort"]


def test_component_settings_come_from_values(mode_values: dict[str, Obj]) -> None:
    values = merged(
        mode_values["generate"],
        {
            "placement": {"defaultStrategy": "scheduling-gate"},
            "logFormat": "text",
            "webhook": {"replicas": 3},
            "resizer": {"concurrency": 16, "replicas": 3, "leaseName": "resizer-lock"},
        },
    )
    objects = render(values)
    assert args_of(objects, "webhook")["--default-strategy"] == "scheduling-gate"
    assert args_of(objects, "webhook")["--log-format"] == "text"
    assert of_component(objects, "Deployment", "webhook")["spec"]["replicas"] == 3
    resizer = args_of(objects, "resizer")
    assert resizer["--concurrency"] == "16"
    assert resizer["--log-format"] == "text"
    assert resizer["--lease-name"] == "resizer-lock"
    assert of_component(objects, "Deployment", "resizer")["spec"]["replicas"] == 3


def test_resizer_elects_a_leader_through_a_lease_in_its_own_namespace(objects: list[Obj]) -> None:
    args = args_of(objects, "resizer")
    assert "--leader-elect" in args
    assert "--lease-namespace" not in args  # the pod's own: POD_NAMESPACE, from the downward API
    env = {e["name"]: e for e in container(objects, "resizer")["env"]}
    assert env["POD_NAMESPACE"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.namespace"}}
    assert env["POD_NAME"]["valueFrom"] == {"fieldRef": {"fieldPath": "metadata.name"}}
    assert args["--lease-name"] == "exclusive-placement-resizer"
    assert of_component(objects, "Deployment", "resizer")["spec"]["replicas"] == 2


@pytest.mark.parametrize("component", ["webhook", "resizer"])
def test_replicas_spread_across_nodes(
    objects: list[Obj], component: str, mode_values: dict[str, Obj]
) -> None:
    deployment = of_component(objects, "Deployment", component)
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    soft = pod_spec(objects, component)["affinity"]["podAntiAffinity"][
        "preferredDuringSchedulingIgnoredDuringExecution"
    ]
    assert soft[0]["podAffinityTerm"]["topologyKey"] == HOSTNAME_LABEL
    selector = soft[0]["podAffinityTerm"]["labelSelector"]["matchLabels"]
    assert selector  # an empty selector would match every pod
    assert selector.items() <= pod_labels.items()
    hard_values = merged(mode_values["generate"], {component: {"antiAffinity": "hard"}})
    hard = pod_spec(render(hard_values), component)["affinity"]["podAntiAffinity"]
    assert hard["requiredDuringSchedulingIgnoredDuringExecution"][0]["topologyKey"] == HOSTNAME_LABEL


def test_webhook_disruption_budget_and_rollout_keep_admissions_served(objects: list[Obj]) -> None:
    deployment = of_component(objects, "Deployment", "webhook")
    pdb = of_component(objects, "PodDisruptionBudget", "webhook")
    pod_labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert pdb["spec"]["selector"]["matchLabels"]  # an empty selector would cover every pod
    assert pdb["spec"]["selector"]["matchLabels"].items() <= pod_labels.items()
    assert pdb["spec"]["maxUnavailable"] == 1
    assert deployment["spec"]["replicas"] == 2
    assert deployment["spec"]["strategy"]["rollingUpdate"]["maxUnavailable"] == 0


def test_services_select_their_component_pods_by_named_port(objects: list[Obj]) -> None:
    for component, port_name in (("webhook", "https"), ("resizer", "metrics")):
        service = of_component(objects, "Service", component)
        pod_labels = of_component(objects, "Deployment", component)["spec"]["template"]["metadata"]["labels"]
        assert service["spec"]["selector"].items() <= pod_labels.items()
        assert service["spec"]["ports"][0]["targetPort"] == port_name
        other = "resizer" if component == "webhook" else "webhook"
        other_labels = of_component(objects, "Deployment", other)["spec"]["template"]["metadata"]["labels"]
        assert not service["spec"]["selector"].items() <= other_labels.items()


@pytest.mark.parametrize(
    ("values", "expected"),
    [
        ({}, f"ghcr.io/exclusive-placement/{{}}:{APP_VERSION}"),
        ({"image": {"tag": "2.0.1"}}, "ghcr.io/exclusive-placement/{}:2.0.1"),
        ({"image": {"registry": "registry.example.com/ml/"}}, f"registry.example.com/ml/{{}}:{APP_VERSION}"),
        ({"image": {"registry": ""}}, f"{{}}:{APP_VERSION}"),
    ],
)
def test_image_tag_defaults_to_app_version(values: Obj, expected: str, mode_values: dict[str, Obj]) -> None:
    objects = render(merged(mode_values["generate"], values))
    for component in ("webhook", "resizer"):
        assert container(objects, component)["image"] == expected.format(component)


# --- RBAC ------------------------------------------------------------------------------------------------


def test_webhook_may_only_list_pods_read_nodes_and_get_jobsets_and_kueue_queues(objects: list[Obj]) -> None:
    account = pod_spec(objects, "webhook")["serviceAccountName"]
    assert grants_of(objects, account) == {
        "cluster": {
            ("", "pods"): {"list", "watch"},
            ("", "nodes"): {"get", "list", "watch"},
            ("jobset.x-k8s.io", "jobsets"): {"get"},
            ("kueue.x-k8s.io", "localqueues"): {"get"},
            ("kueue.x-k8s.io", "clusterqueues"): {"get"},
            ("kueue.x-k8s.io", "resourceflavors"): {"get"},
        }
    }


def test_resizer_has_exactly_its_listed_permissions(objects: list[Obj]) -> None:
    account = pod_spec(objects, "resizer")["serviceAccountName"]
    assert grants_of(objects, account) == {
        "cluster": {
            ("", "pods"): {"get", "list", "watch", "patch", "delete"},
            ("", "pods/status"): {"patch"},
            ("batch", "jobs"): {"get", "list", "watch", "patch"},
            ("events.k8s.io", "events"): {"create", "patch"},
            ("", "nodes"): {"get", "list", "watch"},
        },
        NAMESPACE: {("coordination.k8s.io", "leases"): {"get", "create", "update"}},  # get, update: by name
    }


def test_the_lease_role_names_the_one_lease_the_resizer_uses(objects: list[Obj]) -> None:
    (role,) = [
        r for r in of_kind(objects, "Role") if any("leases" in rule["resources"] for rule in r["rules"])
    ]
    lease = args_of(objects, "resizer")["--lease-name"]
    by_verbs = {tuple(sorted(rule["verbs"])): rule.get("resourceNames") for rule in role["rules"]}
    assert by_verbs == {("get", "update"): [lease], ("create",): None}  # create has no name to narrow by


def test_client_ca_is_mounted_and_passed_only_when_set(mode_values: dict[str, Obj]) -> None:
    assert "--client-ca-file" not in args_of(render(mode_values["generate"]), "webhook")
    objects = render(
        merged(mode_values["generate"], {"webhook": {"clientCA": {"secretName": "apiserver-ca"}}})
    )
    mounts = {m["name"]: m for m in container(objects, "webhook")["volumeMounts"]}
    volumes = {v["name"]: v for v in pod_spec(objects, "webhook")["volumes"]}
    assert args_of(objects, "webhook")["--client-ca-file"] == mounts["client-ca"]["mountPath"] + "/ca.crt"
    assert volumes["client-ca"]["secret"] == {
        "secretName": "apiserver-ca",
        "items": [{"key": "ca.crt", "path": "ca.crt"}],
    }


def test_no_wildcards_anywhere_in_rbac(objects: list[Obj]) -> None:
    roles = of_kind(objects, "ClusterRole") + of_kind(objects, "Role")
    assert len(roles) >= 3, [role["metadata"]["name"] for role in roles]  # webhook, resizer, resizer's Lease
    for role in roles:
        assert role["rules"], role["metadata"]["name"]
        for rule in role["rules"]:
            for field in ("apiGroups", "resources", "verbs"):
                assert "*" not in rule[field], (role["metadata"]["name"], rule)
            assert "nonResourceURLs" not in rule
