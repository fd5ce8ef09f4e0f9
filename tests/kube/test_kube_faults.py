"""Each fault of `devstack.faults` on the real control plane: it does what it says, seen from a client of the
webhook's or the resizer's identity (through the fault proxy) or from the cluster's own components, and
the cluster is whole again after it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator

import httpx
import pytest

from devstack import faults
from devstack.commands import RELEASE_NAMESPACE
from devstack.controlplane.components import COMPONENTS, component_pid, is_running
from devstack.exclusivity import node_domains
from devstack.kinds import stack_client
from devstack.stack import Stack
from kubekit.client import KubeError
from kubekit.credentials import kubeconfig_credentials
from kubekit.generic import GenericClient
from placement.constants import GKE_NODEPOOL_LABEL
from tests.kube.conftest import kube_options
from tests.kube.kube_support import create_namespace, kube_cluster
from tests.support.waiting import eventually

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-faults")]

WATCH_RESTARTS = "exclusive_placement_resizer_watch_restarts_total"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with Stack(
        kube_options(
            tmp_path_factory.mktemp("kube-faults"),
            fault_proxy=True,
            control_plane_args=faults.SURVIVES_RESTARTS,
            jobset=False,
        )
    ) as started:
        yield started


def as_resizer(stack: Stack, *, timeout: float = 30.0) -> GenericClient:
    """A client with the resizer's kubeconfig: its ServiceAccount, through the fault proxy."""
    return stack_client(kube_cluster(stack).component_kubeconfig("resizer"), timeout=timeout)


def test_the_projects_processes_reach_kube_apiserver_through_the_proxy(stack: Stack) -> None:
    proxy = faults.fault_proxy(stack)
    for component in ("webhook", "resizer"):
        kubeconfig = kube_cluster(stack).component_kubeconfig(component).read_text()
        assert f"server: {proxy.server}" in kubeconfig
    assert proxy.server != stack.server
    with as_resizer(stack) as client:
        assert client.list("Node")  # TLS through the proxy, kube-apiserver's certificate verified


def test_slow_api_delays_every_answer_until_healed(stack: Stack) -> None:
    with as_resizer(stack) as client:
        with faults.slow_api(stack, latency_ms=400, jitter_ms=0):
            assert faults.fault_proxy(stack).toxics() == ["slow"]
            started = time.monotonic()
            client.text("/version")
            assert time.monotonic() - started >= 0.4
        assert faults.fault_proxy(stack).toxics() == []
        client.text("/version")


def test_stalled_api_times_requests_out(stack: Stack) -> None:
    with as_resizer(stack, timeout=1.0) as client:
        with faults.stalled_api(stack, close_after_ms=60_000), pytest.raises(KubeError) as stalled:
            client.text("/version")
        assert stalled.value.status is None, "a connection-level failure, not an answer"
        eventually(
            lambda: client.text("/version"),
            "an answer once the stall is over",
            30,
            ignoring=(KubeError,),
        )


def test_reset_api_resets_connections(stack: Stack) -> None:
    with as_resizer(stack) as client:
        with faults.reset_api(stack), pytest.raises(KubeError) as reset:
            client.text("/version")
        assert reset.value.status is None, "a connection-level failure, not an answer"
        eventually(
            lambda: client.text("/version"),
            "an answer once resets stop",
            30,
            ignoring=(KubeError,),
        )


def test_drop_connections_ends_an_open_watch(stack: Stack) -> None:
    server, credentials = kubeconfig_credentials(kube_cluster(stack).component_kubeconfig("resizer"))
    opened, ended = threading.Event(), threading.Event()
    headers = {"Authorization": f"Bearer {credentials.token}"}
    with httpx.Client(base_url=server, verify=credentials.ssl_context(), headers=headers) as http:
        _, version = stack.client.list_with_version("Node")

        def watch() -> None:
            params = {"watch": "true", "resourceVersion": version, "timeoutSeconds": "300"}
            try:
                with http.stream(
                    "GET", "/api/v1/nodes", params=params, timeout=httpx.Timeout(10, read=None)
                ) as answer:
                    opened.set()  # kube-apiserver answered: the watch is established through the proxy
                    for _ in answer.iter_lines():
                        pass
            except httpx.TransportError:
                pass
            finally:
                ended.set()

        threading.Thread(target=watch, daemon=True).start()
        assert opened.wait(30), "the watch did not open"
        faults.drop_connections(stack, down_seconds=0.5)
        assert ended.wait(30), "the watch outlived the dropped connection"
        assert http.get("/version").status_code == 200


def test_rejected_api_answers_429_to_the_project_but_not_its_leader_election(stack: Stack) -> None:
    lease = stack.client.list("Lease", namespace=RELEASE_NAMESPACE)[0]["metadata"]["name"]
    with as_resizer(stack) as client:
        with faults.rejected_api(stack):
            error = eventually(
                lambda: _status_of(lambda: client.list("Node")) == 429,
                "a 429 from API Priority and Fairness",
                30,
            )
            assert error
            assert _status_of(lambda: client.get("Lease", lease, namespace=RELEASE_NAMESPACE)) is None
            assert stack.client.list("Node")  # the admin is not throttled
        eventually(lambda: _status_of(lambda: client.list("Node")) is None, "answers again once lifted", 30)


def _status_of(call: object) -> int | None:
    try:
        call()  # type: ignore[operator]
    except KubeError as err:
        return err.status
    return None


def test_kill_resizer_and_webhook_start_new_processes(stack: Stack) -> None:
    resizer_pid, webhook_pid = stack.resizers[0].pid, stack.webhook.pid if stack.webhook else None
    faults.kill_resizer(stack)
    faults.kill_webhook(stack)
    assert stack.resizers[0].pid != resizer_pid
    assert stack.resizers[0].running
    assert stack.webhook is not None
    assert stack.webhook.pid != webhook_pid
    assert stack.webhook.running


def test_a_node_pool_not_ready_is_tainted_by_the_node_lifecycle_controller_then_deleted(stack: Stack) -> None:
    pool = sorted(node_domains(stack.client.list("Node"), GKE_NODEPOOL_LABEL).values())[-1]
    namespace = "faults-pool"
    create_namespace(stack, namespace)
    names = faults.node_pool_not_ready(stack, pool)
    assert names
    tainted = eventually(
        lambda: all(faults.is_tainted_not_ready(stack.client.get("Node", n)) for n in names),
        f"kube-controller-manager tainting {pool} not-ready",
        120,
    )
    assert tainted
    for name in names:  # kwok no longer runs these nodes: nothing made them Ready again
        node = stack.client.get("Node", name)
        ready = next(c for c in node["status"]["conditions"] if c["type"] == "Ready")
        assert ready["status"] != "True"
    stack.client.create(
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "bound-there", "namespace": namespace},
            "spec": {"nodeName": names[0], "containers": [{"name": "c", "image": "registry.example/c:1"}]},
        }
    )
    assert faults.delete_node_pool(stack, pool) == names
    assert not stack.client.list("Node", label_selector=f"{GKE_NODEPOOL_LABEL}={pool}")
    eventually(
        lambda: not stack.client.list("Pod", namespace=namespace),
        "the pod garbage collector deleting the pod bound to a deleted node",
        180,
        ignoring=(KubeError,),
    )


def test_restart_etcd_and_kube_apiserver(stack: Stack) -> None:
    cluster_dir = kube_cluster(stack).control_plane.cluster_dir
    for component in ("etcd", "kube-apiserver"):
        before = component_pid(cluster_dir, component)
        assert faults.restart_component(stack, component) == before
        after = component_pid(cluster_dir, component)
        assert after != before
        assert is_running(after)
        stack.client.create_or_replace(
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": f"after-{component}", "namespace": "default"},
            }
        )
    for component in COMPONENTS:  # none of the others died of the outage, or the guard started it again
        eventually(
            lambda name=component: is_running(component_pid(cluster_dir, name)),  # type: ignore[misc]
            f"{component} running",
            60,
        )


def test_expire_watches_makes_an_old_resource_version_gone_and_the_resizer_relists(stack: Stack) -> None:
    _, old_version = stack.client.list_with_version("Pod")
    stack.client.create_or_replace(
        {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": "moves-the-revision", "namespace": "default"},
        }
    )
    gone_before = _resizer_gone_restarts(stack)
    faults.expire_watches(stack)
    events = list(_watch_events(stack.client, old_version))
    assert events[:1] == [("ERROR", {"code": 410})], events[:1]
    eventually(
        lambda: _resizer_gone_restarts(stack) > gone_before,
        "the resizer's informers re-listing after 410 Gone",
        120,
    )


def _watch_events(client: GenericClient, version: str) -> Iterator[tuple[str, dict[str, object]]]:
    try:
        for kind, obj in client.watch("Pod", resource_version=version, timeout_seconds=5):
            yield (kind, {"code": obj.get("code")} if kind == "ERROR" else obj)
            return
    except KubeError as err:
        yield "ERROR", {"code": err.status}


def _resizer_gone_restarts(stack: Stack) -> float:
    total = 0.0
    for page in stack.resizer_metrics():
        for line in page.splitlines():
            if line.startswith(WATCH_RESTARTS) and 'reason="gone"' in line:
                total += float(line.rsplit(" ", 1)[1])
    return total
