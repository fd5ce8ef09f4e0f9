"""Kueue on the local cluster: its CRDs, its manager as a local process, its webhooks called by URL.

As for JobSet (devstack.controlplane.jobset), everything comes from the pinned Kueue module, staged by
`make kube` into manifests/kueue/ from the module's own config/: the CRDs, the webhook configurations and the
manager's ClusterRole. As in a Kueue install (config/default), object names get the `kueue-` prefix and the
webhooks skip kube-system and kueue-system. Each `clientConfig.service` (the webhooks' and the CRDs'
conversion webhooks, the ones config/components/crd's kustomization patches in) becomes
`url: https://127.0.0.1:PORT/<path>` with the devstack CA; the manager serves them with the devstack serving
certificate (internal certificate management off).

Only the webhooks of Kueue's own kinds and of the integrations devstack turns on (batch/job and JobSet) are
installed: upstream installs one per integration and answers a disabled one with a no-op handler, which would
put every pod creation through Kueue for nothing.

The objects a user would create next to it (a ResourceFlavor, a ClusterQueue with an `nvidia.com/gpu` quota,
LocalQueues) are `queue_objects`.
"""

from __future__ import annotations

import contextlib
import copy
import os
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from devstack.controlplane.identities import Identity
from placement.constants import GKE_NODEPOOL_LABEL, HOSTNAME_LABEL, KUEUE_QUEUE_NAME_LABEL

Obj = dict[str, Any]

NAMESPACE = "kueue-system"
IDENTITY = Identity(NAMESPACE, "kueue-controller-manager")
NAME_PREFIX = "kueue-"
API_VERSION = "kueue.x-k8s.io/v1beta2"
QUEUE_NAME_LABEL = KUEUE_QUEUE_NAME_LABEL
INTEGRATIONS = ("batch/job", "jobset.x-k8s.io/jobset")
CONVERTED_CRDS = ("localqueues", "clusterqueues", "cohorts", "workloads", "multikueueclusters")
"""The CRDs config/components/crd/kustomization.yaml gives a conversion webhook (`webhook_in_*.yaml`)."""
_INSTALLED_WEBHOOK_PATHS = ("kueue-x-k8s-io", "-batch-v1-job", "-jobset-x-k8s-io-")
_SKIPPED_NAMESPACES = ["kube-system", NAMESPACE]
RESOURCE_FLAVOR = "default-flavor"
TOPOLOGY = "pools"
TOPOLOGY_LEVELS = (GKE_NODEPOOL_LABEL, HOSTNAME_LABEL)
"""The Topology of `--kueue-tas`: block = the node pool (the domain this project's examples are exclusive on),
then the node."""
TAS_FLAVOR_NODE_LABELS = {"cloud.google.com/gke-accelerator": "nvidia-h100-80gb"}
"""What a TAS ResourceFlavor needs (at least one node label): the GPU nodes' (devstack.shape)."""
CLUSTER_QUEUE = "cluster-queue"
LOCAL_QUEUE = "user-queue"
GPU = "nvidia.com/gpu"
METRICS_CERT_DIR = Path("/etc/kueue/metrics/certs")
"""Where Kueue v0.19's manager reads its metrics server's certificate whenever internal certificate
management is off (a fixed path in cmd/kueue/main.go, no flag): it exits at start when the pair is not
there, even with the metrics server off (`bindAddress: "0"`, as here, so the pair is never served)."""


@dataclass(frozen=True)
class WaitForPodsReady:
    """Kueue's `waitForPodsReady` (Configuration, v1beta2). Kueue v0.19 turns it on whenever the field is
    absent, with a 30 min timeout (apis/config/v1beta2/defaults.go); this sets it explicitly."""

    timeout_seconds: float
    """An admitted Workload not PodsReady this long after its admission is evicted and requeued."""
    block_admission: bool = False
    """No other Workload is admitted while an admitted one is not PodsReady."""
    backoff_base_seconds: int = 60
    """The requeue's backoff after the n-th eviction: base x 2^(n-1), at most `backoff_max_seconds`."""
    backoff_max_seconds: int = 3600

    def __post_init__(self) -> None:
        if self.timeout_seconds <= 0:
            raise ValueError(f"the PodsReady timeout must be > 0, got {self.timeout_seconds}")
        if not 0 <= self.backoff_base_seconds <= self.backoff_max_seconds:
            raise ValueError(
                f"need 0 <= backoff base <= backoff max, got {self.backoff_base_seconds}, "
                f"{self.backoff_max_seconds}"
            )

    def config(self) -> Obj:
        return {
            "timeout": f"{self.timeout_seconds:g}s",
            "blockAdmission": self.block_admission,
            "requeuingStrategy": {
                "timestamp": "Eviction",
                "backoffBaseSeconds": self.backoff_base_seconds,
                "backoffMaxSeconds": self.backoff_max_seconds,
            },
        }


class KueueSetupError(RuntimeError):
    """Something Kueue's manager needs outside the workdir cannot be provided; the message says what."""


def ensure_metrics_certificate(cert_dir: Path, target: Path = METRICS_CERT_DIR) -> None:
    """Put a certificate pair (devstack's serving pair from `cert_dir`) where Kueue's manager insists on
    reading one, unless a pair is there already (another stack's, or an operator's: never overwritten).
    Each file is written whole (a rename), so two stacks starting at once both find a valid pair."""
    names = ("tls.crt", "tls.key")
    if all((target / name).is_file() for name in names):
        return
    try:
        target.mkdir(parents=True, exist_ok=True)
        for name in names:
            if (target / name).is_file():
                continue
            handle, staged = tempfile.mkstemp(dir=target, prefix=f".{name}.")
            with os.fdopen(handle, "wb") as out:
                out.write((cert_dir / name).read_bytes())
            os.chmod(staged, 0o600 if name.endswith(".key") else 0o644)
            try:
                os.rename(staged, target / name)
            finally:
                with contextlib.suppress(FileNotFoundError):
                    os.unlink(staged)
    except OSError as err:
        raise KueueSetupError(
            f"Kueue's manager reads a metrics certificate from {target} (tls.crt, tls.key) and exits "
            f"without one; devstack cannot write it there ({err}): create that directory writable, or "
            "put any certificate pair there"
        ) from err


def crds(manifests_dir: Path, base_url: str, ca_bundle_b64: str) -> list[Obj]:
    documents: list[Obj] = []
    for path in sorted((manifests_dir / "kueue" / "crd").glob("*.yaml")):
        document: Obj = yaml.safe_load(path.read_text())
        plural = document["spec"]["names"]["plural"]
        if plural in CONVERTED_CRDS:
            document["spec"]["conversion"] = {
                "strategy": "Webhook",
                "webhook": {
                    "clientConfig": {"url": base_url.rstrip("/") + "/convert", "caBundle": ca_bundle_b64},
                    "conversionReviewVersions": ["v1"],
                },
            }
        documents.append(document)
    return documents


def crd_names(manifests_dir: Path) -> list[str]:
    return [
        yaml.safe_load(path.read_text())["metadata"]["name"]
        for path in sorted((manifests_dir / "kueue" / "crd").glob("*.yaml"))
    ]


def webhook_configurations(manifests_dir: Path, base_url: str, ca_bundle_b64: str) -> list[Obj]:
    """Kueue's Mutating/ValidatingWebhookConfiguration, by URL, restricted to the installed webhooks, each
    webhook named with the `kueue-` prefix too (`kueue-mjobset.kb.io`): upstream names Kueue's JobSet
    webhooks `mjobset.kb.io` and `vjobset.kb.io` as JobSet names its own, and kube-apiserver's admission
    metrics label a call by the webhook's name alone, so the benchmark could not tell them apart."""
    text = (manifests_dir / "kueue" / "webhook-manifests.yaml").read_text()
    configurations: list[Obj] = []
    for document in (d for d in yaml.safe_load_all(text) if d):
        configuration = copy.deepcopy(document)
        configuration["metadata"]["name"] = NAME_PREFIX + configuration["metadata"]["name"]
        webhooks: list[Obj] = []
        for webhook in configuration["webhooks"]:
            path = webhook["clientConfig"]["service"]["path"]
            if not any(part in path for part in _INSTALLED_WEBHOOK_PATHS):
                continue
            webhook["clientConfig"] = {"url": base_url.rstrip("/") + path, "caBundle": ca_bundle_b64}
            webhook["name"] = NAME_PREFIX + webhook["name"]
            if "kueue-x-k8s-io" not in path:  # config/components/webhook's patch and replacements
                webhook["namespaceSelector"] = {
                    "matchExpressions": [
                        {
                            "key": "kubernetes.io/metadata.name",
                            "operator": "NotIn",
                            "values": _SKIPPED_NAMESPACES,
                        }
                    ]
                }
            webhooks.append(webhook)
        configuration["webhooks"] = webhooks
        configurations.append(configuration)
    return configurations


def rbac(manifests_dir: Path) -> list[Obj]:
    """The manager's ServiceAccount, its module's ClusterRole (webhook configuration names prefixed, as
    config/default's name reference does) and the binding between them, and its module's Role on the
    Secrets of kueue-system (its manager watches them) with its binding."""
    role: Obj = copy.deepcopy(yaml.safe_load((manifests_dir / "kueue" / "manager-role.yaml").read_text()))
    role["metadata"] = {"name": NAME_PREFIX + role["metadata"]["name"]}
    for rule in role["rules"]:
        if "admissionregistration.k8s.io" in rule.get("apiGroups", []) and "resourceNames" in rule:
            rule["resourceNames"] = [NAME_PREFIX + name for name in rule["resourceNames"]]
    secrets: Obj = yaml.safe_load((manifests_dir / "kueue" / "manager-secrets-role.yaml").read_text())
    secrets["metadata"] = {"name": NAME_PREFIX + secrets["metadata"]["name"], "namespace": NAMESPACE}
    return [
        IDENTITY.service_account_object(),
        role,
        IDENTITY.binding(role),
        secrets,
        IDENTITY.binding(secrets),
    ]


def manager_config(
    *,
    webhook_port: int,
    health_port: int,
    cert_dir: Path,
    wait_for_pods_ready: WaitForPodsReady | None = None,
) -> str:
    """The manager's Configuration: webhooks on 127.0.0.1 with our certificate, no leader election, no
    metrics listener, no visibility server (an API server extension on a fixed port), the batch/job and
    JobSet integrations, and only Jobs that name a LocalQueue managed (upstream's default);
    `waitForPodsReady` when given (else Kueue's default: on, 30 min)."""
    config: Obj = {
        "apiVersion": "config.kueue.x-k8s.io/v1beta2",
        "kind": "Configuration",
        "namespace": NAMESPACE,
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
        "manageJobsWithoutQueueName": False,
        "integrations": {"frameworks": list(INTEGRATIONS)},
        "featureGates": {"VisibilityOnDemand": False},
    }
    if wait_for_pods_ready is not None:
        config["waitForPodsReady"] = wait_for_pods_ready.config()
    return yaml.safe_dump(config, sort_keys=False)


def topology_objects() -> list[Obj]:
    """The Topology of the pools (block = pool, then hostname) for a TAS ResourceFlavor."""
    return [
        {
            "apiVersion": API_VERSION,
            "kind": "Topology",
            "metadata": {"name": TOPOLOGY},
            "spec": {"levels": [{"nodeLabel": label} for label in TOPOLOGY_LEVELS]},
        }
    ]


def resource_flavor(*, tas: bool) -> Obj:
    flavor: Obj = {"apiVersion": API_VERSION, "kind": "ResourceFlavor", "metadata": {"name": RESOURCE_FLAVOR}}
    if tas:
        flavor["spec"] = {"nodeLabels": dict(TAS_FLAVOR_NODE_LABELS), "topologyName": TOPOLOGY}
    return flavor


def queue_objects(*, gpu_quota: int, namespaces: tuple[str, ...], tas: bool = False) -> list[Obj]:
    """One ResourceFlavor (with `tas`: a TAS flavor of `topology_objects`, created first), one ClusterQueue
    (any namespace) whose `nvidia.com/gpu` quota is `gpu_quota` (CPU and memory without a limit that
    matters), and a LocalQueue in each of `namespaces`."""
    quota = [
        {"name": "cpu", "nominalQuota": "100000"},
        {"name": "memory", "nominalQuota": "100000Gi"},
        {"name": GPU, "nominalQuota": str(gpu_quota)},
    ]
    objects: list[Obj] = [
        *(topology_objects() if tas else []),
        resource_flavor(tas=tas),
        {
            "apiVersion": API_VERSION,
            "kind": "ClusterQueue",
            "metadata": {"name": CLUSTER_QUEUE},
            "spec": {
                "namespaceSelector": {},
                "resourceGroups": [
                    {
                        "coveredResources": [entry["name"] for entry in quota],
                        "flavors": [{"name": RESOURCE_FLAVOR, "resources": quota}],
                    }
                ],
            },
        },
    ]
    objects += [
        {
            "apiVersion": API_VERSION,
            "kind": "LocalQueue",
            "metadata": {"name": LOCAL_QUEUE, "namespace": namespace},
            "spec": {"clusterQueue": CLUSTER_QUEUE},
        }
        for namespace in namespaces
    ]
    return objects
