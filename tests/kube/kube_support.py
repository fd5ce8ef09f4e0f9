"""What the kube tier reads off a stack on the real control plane: the audit log, kube-apiserver's
admission metrics, and namespaces emptied between tests."""

from __future__ import annotations

import contextlib
import copy
import json
import re
import ssl
import threading
import time
from collections import Counter
from collections.abc import Iterable, Iterator
from http.server import BaseHTTPRequestHandler
from typing import Any

from certs.files import ca_bundle_b64
from devstack.clusters import KubeCluster
from devstack.controlplane.audit import AuditLog, Request, pod_creations
from devstack.controlplane.kwok import run_time_annotations
from devstack.kinds import stack_client_at
from devstack.ports import free_port
from devstack.stack import Stack
from kubekit.client import KubeError
from kubekit.credentials import Credentials
from kubekit.generic import GenericClient
from tests.kube.workloads import running_pods
from tests.support.quiet_server import QuietHTTPServer
from tests.support.waiting import eventually

Obj = dict[str, Any]

JOBSET_POD_WEBHOOKS = ("mpod.kb.io", "vpod.kb.io")
_ADMISSION_COUNT = re.compile(
    r"^apiserver_admission_webhook_admission_duration_seconds_count\{(?P<labels>[^}]*)\} (?P<value>\S+)$"
)
_LABEL = re.compile(r'(\w+)="([^"]*)"')


def kube_cluster(stack: Stack) -> KubeCluster:
    assert isinstance(stack.cluster, KubeCluster), "a kube tier test needs a stack on the real control plane"
    return stack.cluster


def audit_log(stack: Stack) -> AuditLog:
    return AuditLog(kube_cluster(stack).control_plane.audit_log)


def pod_creates(stack: Stack, namespace: str, *, since: int) -> Counter[int]:
    """Response code -> pod creations in `namespace` since audit offset `since` (201 created, 403 denied)."""
    return pod_creations(audit_log(stack).requests(since=since), namespace)


def webhook_admissions(stack: Stack) -> Counter[tuple[str, bool]]:
    """(webhook name, rejected) -> admissions kube-apiserver sent it so far (its own metric)."""
    counts: Counter[tuple[str, bool]] = Counter()
    for line in stack.client.text("/metrics").splitlines():
        match = _ADMISSION_COUNT.match(line)
        if match:
            labels = dict(_LABEL.findall(match["labels"]))
            counts[(labels["name"], labels["rejected"] == "true")] += int(float(match["value"]))
    return counts


def jobset_webhook_calls(
    before: Counter[tuple[str, bool]], after: Counter[tuple[str, bool]]
) -> tuple[int, int]:
    """(calls, denials) of JobSet's pod webhooks between two `webhook_admissions` readings."""
    calls = sum(after[(name, r)] - before[(name, r)] for name in JOBSET_POD_WEBHOOKS for r in (False, True))
    denied = sum(after[(name, True)] - before[(name, True)] for name in JOBSET_POD_WEBHOOKS)
    return calls, denied


def with_run_time(jobset: Obj, seconds: float) -> Obj:
    """The JobSet with every pod completing `seconds` after it runs (kwok's pod-complete Stage)."""
    result = copy.deepcopy(jobset)
    for replicated in result["spec"]["replicatedJobs"]:
        pod_meta = replicated["template"]["spec"]["template"].setdefault("metadata", {})
        pod_meta.setdefault("annotations", {}).update(run_time_annotations(seconds))
    return result


def wait_running(stack: Stack, namespace: str, pods: int, what: str = "pods", timeout: float = 120) -> None:
    """Until `pods` pods of `namespace` run, the stack's processes still alive."""
    eventually(
        lambda: running_pods(stack, namespace) == pods,
        f"{pods} {what} running",
        timeout,
        ignoring=(KubeError,),
    )
    stack.check_alive()


def create_namespace(stack: Stack, name: str) -> None:
    """Create namespace `name` and wait for its default ServiceAccount (kube-controller-manager adds it; until
    then the ServiceAccount admission plugin refuses the namespace's pods)."""
    stack.client.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    eventually(
        lambda: stack.client.get("ServiceAccount", "default", namespace=name),
        f"the default ServiceAccount of {name}",
        30,
        ignoring=(KubeError,),
    )


def empty_namespace(stack: Stack, namespace: str, timeout: float = 90) -> None:
    """Delete every JobSet, Job and pod of `namespace`, wait until no pod is left (its domains are free
    again), then delete the namespace itself."""
    for kind in ("JobSet", "Job", "Pod"):
        for obj in stack.client.list(kind, namespace=namespace):
            stack.client.delete(kind, obj["metadata"]["name"], namespace=namespace)
    eventually(
        lambda: not stack.client.list("Pod", namespace=namespace),
        f"every pod of {namespace} gone",
        timeout,
        ignoring=(KubeError,),
    )
    stack.client.delete("Namespace", namespace)


class SlowAdmission:
    """A validating webhook that answers every pod UPDATE in `namespace` after `delay` seconds, allowing it:
    what a slow admission chain does to a client's writes, on the real API server. Serves TLS with the
    stack's serving certificate; registered with failurePolicy Ignore, removed on exit."""

    def __init__(self, stack: Stack, namespace: str, delay: float) -> None:
        self.stack = stack
        self.namespace = namespace
        self.delay = delay
        self.name = f"slow-admission-{namespace}"
        self._server: QuietHTTPServer | None = None

    def __enter__(self) -> SlowAdmission:
        delay = self.delay

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                review = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                time.sleep(delay)  # the point of this webhook: admission latency
                body = json.dumps(
                    {
                        "apiVersion": "admission.k8s.io/v1",
                        "kind": "AdmissionReview",
                        "response": {"uid": review["request"]["uid"], "allowed": True},
                    }
                ).encode()
                self.send_response(200)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, *_: object) -> None:
                return None

        server = QuietHTTPServer(("127.0.0.1", free_port()), Handler)
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        context.load_cert_chain(self.stack.cert_dir / "tls.crt", self.stack.cert_dir / "tls.key")
        server.socket = context.wrap_socket(server.socket, server_side=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        self._server = server
        port = server.server_address[1]
        self.stack.client.create(
            {
                "apiVersion": "admissionregistration.k8s.io/v1",
                "kind": "ValidatingWebhookConfiguration",
                "metadata": {"name": self.name},
                "webhooks": [
                    {
                        "name": f"{self.name}.test.example",
                        "admissionReviewVersions": ["v1"],
                        "sideEffects": "None",
                        "failurePolicy": "Ignore",
                        "timeoutSeconds": 5,
                        "clientConfig": {
                            "url": f"https://127.0.0.1:{port}/",
                            "caBundle": ca_bundle_b64(self.stack.ca_file),
                        },
                        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": self.namespace}},
                        "rules": [
                            {
                                "apiGroups": [""],
                                "apiVersions": ["v1"],
                                "operations": ["UPDATE"],
                                "resources": ["pods"],
                            }
                        ],
                    }
                ],
            }
        )
        return self

    def __exit__(self, *_: object) -> None:
        self.stack.client.delete("ValidatingWebhookConfiguration", self.name)
        if self._server is not None:
            self._server.shutdown()
            self._server.server_close()


@contextlib.contextmanager
def resizer_stopped(stack: Stack, index: int = 0) -> Iterator[None]:
    """Resizer `index` stopped for the block, started again (and ready) after it."""
    stack.resizers[index].stop()
    try:
        yield
    finally:
        stack.restart_resizer(index)


def preemptions(requests: Iterable[Request], namespace: str) -> int:
    """Pods of `namespace` that kube-scheduler deleted: the victims of its preemptions."""
    return sum(
        1
        for request in requests
        if request.verb == "delete"
        and request.resource == "pods"
        and not request.subresource
        and request.namespace == namespace
        and request.user_agent.startswith("kube-scheduler/")
    )


TENANT = "tenant"
TENANT_WORKLOADS = (("", "pods"), ("batch", "jobs"), ("jobset.x-k8s.io", "jobsets"))


def tenant_client(
    stack: Stack, namespace: str, role_ref: Obj, creates: Iterable[tuple[str, str]] = TENANT_WORKLOADS
) -> GenericClient:
    """A client as ServiceAccount `tenant` of `namespace`, bound there to `role_ref`, once the authorizer
    lets it create what `creates` lists ((API group, resource) pairs the role grants): kube-apiserver's RBAC
    authorizer reads bindings from an informer, so a binding just written may not authorize the next
    request yet."""
    stack.client.create(
        {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": {"name": TENANT}}, namespace=namespace
    )
    stack.client.create(
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": {"name": TENANT},
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", **role_ref},
            "subjects": [{"kind": "ServiceAccount", "name": TENANT, "namespace": namespace}],
        },
        namespace=namespace,
    )
    resources = tuple(creates)
    eventually(
        lambda: all(
            stack.client.service_account_may(namespace, TENANT, "create", resource, group)
            for group, resource in resources
        ),
        f"{namespace}/{TENANT} authorized to create {', '.join(resource for _, resource in resources)}",
    )
    token = stack.client.request_token(namespace, TENANT, seconds=3600)
    ca_file = kube_cluster(stack).control_plane.ca_file
    return stack_client_at(stack.client.server, Credentials(ca_file=ca_file, token=token))
