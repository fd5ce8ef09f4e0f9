"""JobSet on the local cluster: its CRD, its controller as a local process, its webhooks called by URL.

Everything comes from the pinned JobSet module (staged by `make kube` into manifests/jobset/): the CRD, the
webhook configurations with the patches JobSet's own kustomization applies (the pod webhooks' objectSelector
on `jobset.sigs.k8s.io/jobset-name`), and the controller's ClusterRole. As in a JobSet install, the object
names get the `jobset-` prefix. As envtest does, each webhook's `clientConfig.service` becomes
`url: https://127.0.0.1:PORT/<path>` with the devstack CA as caBundle; the controller serves them with the
devstack serving certificate (internal certificate management off).
"""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import jsonpatch
import yaml

from devstack.controlplane.identities import Identity

Obj = dict[str, Any]

NAMESPACE = "jobset-system"
IDENTITY = Identity(NAMESPACE, "jobset-controller-manager")
NAME_PREFIX = "jobset-"
CRD_NAME = "jobsets.jobset.x-k8s.io"
_PATCHES = {
    "MutatingWebhookConfiguration": "mutating-patch.yaml",
    "ValidatingWebhookConfiguration": "validating-patch.yaml",
}


def crd(manifests_dir: Path) -> Obj:
    document: Obj = yaml.safe_load((manifests_dir / "jobset" / "crd.yaml").read_text())
    return document


def webhook_configurations(manifests_dir: Path, base_url: str, ca_bundle_b64: str) -> list[Obj]:
    """JobSet's Mutating/ValidatingWebhookConfiguration, patched as its kustomization does, by URL."""
    jobset_dir = manifests_dir / "jobset"
    documents = [d for d in yaml.safe_load_all((jobset_dir / "webhook-manifests.yaml").read_text()) if d]
    configurations: list[Obj] = []
    for document in documents:
        patch = yaml.safe_load((jobset_dir / _PATCHES[document["kind"]]).read_text())
        patched: Obj = jsonpatch.apply_patch(document, patch)
        patched["metadata"]["name"] = NAME_PREFIX + patched["metadata"]["name"]
        for webhook in patched["webhooks"]:
            path = webhook["clientConfig"]["service"]["path"]
            webhook["clientConfig"] = {"url": base_url.rstrip("/") + path, "caBundle": ca_bundle_b64}
        configurations.append(patched)
    return configurations


def rbac(manifests_dir: Path) -> list[Obj]:
    """The controller's ServiceAccount, its module's ClusterRole and the binding between them."""
    role: Obj = copy.deepcopy(yaml.safe_load((manifests_dir / "jobset" / "manager-role.yaml").read_text()))
    role["metadata"] = {"name": NAME_PREFIX + role["metadata"]["name"]}
    return [IDENTITY.service_account_object(), role, IDENTITY.binding(role)]


def controller_config(*, webhook_port: int, health_port: int, cert_dir: Path) -> str:
    """The controller's Configuration: webhooks on 127.0.0.1 with our certificate, no leader election,
    no metrics listener, upstream's default client limits (500 qps, burst 500)."""
    config = {
        "apiVersion": "config.jobset.x-k8s.io/v1alpha1",
        "kind": "Configuration",
        "leaderElection": {"leaderElect": False},
        "internalCertManagement": {"enable": False},
        "webhook": {"host": "127.0.0.1", "port": webhook_port, "certDir": str(cert_dir)},
        "metrics": {"bindAddress": "0"},
        "health": {"healthProbeBindAddress": f"127.0.0.1:{health_port}"},
    }
    return yaml.safe_dump(config, sort_keys=False)
