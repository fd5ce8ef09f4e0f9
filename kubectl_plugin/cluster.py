"""The plugin's reads from the API server: list, get and watch through kubekit's client, nothing else.

`status` needs three lists: the nodes, the exclusive pods of every namespace (the webhook labels each with
`exclusive-placement.io/job-key`: one label selector finds them all, and the leaders among them are the
all-or-nothing queue), and the Jobs in scope; and Kueue's Workloads in scope where Kueue is installed (a
cluster without its CRDs answers 404: no Workloads, no error). `explain` adds one object and the Events of
its namespace. `--watch` keeps the same three lists with informers and hands a fresh `Snapshot` on every
change, with the Workloads listed again.
"""

from __future__ import annotations

import os
import threading
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from kubernetes import config

from kubekit.client import CustomResource, Kube, KubeError, Resource, Timeouts, build_api_client
from kubekit.informer import Informer, OnAnyChange
from placement.constants import (
    ALL_OR_NOTHING_LABEL,
    ALL_OR_NOTHING_STEPPED_OVER_REASON,
    JOB_KEY_LABEL,
    JOB_NAME_LABEL,
    JOBSET_GROUP,
    JOBSET_NAME_LABEL,
    JOBSET_PLURAL,
    JOBSET_VERSION,
)
from placement.kueue import KUEUE_GROUP, KUEUE_VERSION, WORKLOADS
from placement.objects import Obj
from placement.status import Snapshot, stepped_over_jobsets

USER_AGENT = "kubectl-exclusive_placement"
JOBSETS = CustomResource(JOBSET_GROUP, JOBSET_VERSION, JOBSET_PLURAL)
KUEUE_WORKLOADS = CustomResource(KUEUE_GROUP, KUEUE_VERSION, WORKLOADS)
SERVICE_ACCOUNT_NAMESPACE = Path("/var/run/secrets/kubernetes.io/serviceaccount/namespace")
DEFAULT_NAMESPACE = "default"
HTTP_FORBIDDEN = 403
SYNC_SECONDS = 30.0
DEBOUNCE_SECONDS = 0.2


class ReadError(RuntimeError):
    """A read the plugin cannot do: one line for the user, naming what was read and why it failed."""


@dataclass(frozen=True)
class Connection:
    kubeconfig: Path | None = None
    context: str | None = None
    request_timeout: float = 10.0


def current_namespace(connection: Connection) -> str:
    """kubectl's default namespace: the kubeconfig context's, else the pod's own in a cluster, else
    `default`."""
    try:
        config_file = str(connection.kubeconfig) if connection.kubeconfig else None
        contexts, active = config.list_kube_config_contexts(config_file)  # type: ignore[no-untyped-call]
        chosen = next((c for c in contexts if c.get("name") == connection.context), None) or active
        namespace = (chosen or {}).get("context", {}).get("namespace")
        if namespace:
            return str(namespace)
    except (config.ConfigException, OSError, ValueError, TypeError):
        if SERVICE_ACCOUNT_NAMESPACE.is_file() and not os.environ.get("KUBECONFIG"):
            return SERVICE_ACCOUNT_NAMESPACE.read_text().strip() or DEFAULT_NAMESPACE
    return DEFAULT_NAMESPACE


def _describe(error: KubeError, what: str) -> str:
    if error.status == HTTP_FORBIDDEN:
        return (
            f"cannot {what}: {error.message or error.reason} (the plugin needs get, list and watch on nodes, "
            'pods, jobs, events and jobsets: docs/kubectl-plugin.md, "Permissions")'
        )
    if error.status is None:
        return f"cannot {what}: the API server is unreachable ({error.message or error.reason})"
    return f"cannot {what}: {error}"


class Cluster:
    def __init__(self, kube: Kube) -> None:
        self.kube = kube

    @classmethod
    def connect(cls, connection: Connection) -> Cluster:
        api_client = build_api_client(
            connection.kubeconfig, None, user_agent=USER_AGENT, context=connection.context
        )
        return cls(Kube(api_client, Timeouts(read=connection.request_timeout)))

    def close(self) -> None:
        self.kube.close()

    def _list(
        self, resource: Resource, namespace: str | None, label_selector: str | None = None
    ) -> list[Obj]:
        where = (
            "" if resource == "nodes" else f" in namespace {namespace}" if namespace else " in all namespaces"
        )
        try:
            items, _ = self.kube.list_objects(resource, namespace=namespace, label_selector=label_selector)
        except KubeError as error:
            raise ReadError(_describe(error, f"list {resource}{where}")) from error
        return items

    def snapshot(self, namespace: str | None, jobs: list[Obj] | None = None) -> Snapshot:
        """Nodes, exclusive pods of every namespace, and `jobs`, else the Jobs of `namespace` (None: every
        namespace); for the all-or-nothing queue, the admitted gang Jobs of every namespace and the JobSets
        the resizer reported stepped over."""
        return Snapshot(
            nodes=self._list("nodes", None),
            pods=self._list("pods", None, JOB_KEY_LABEL),
            jobs=jobs if jobs is not None else self._list("jobs", namespace),
            gang_jobs=self._list("jobs", None, f"{ALL_OR_NOTHING_LABEL}=true"),
            stepped_over=self._stepped_over(),
            workloads=self.workloads(namespace),
        )

    def workloads(self, namespace: str | None) -> list[Obj]:
        """Kueue's Workloads of `namespace` (None: every namespace); none where Kueue's CRDs are not
        installed (404) or the plugin may not list them (403: Kueue's reason is then not given)."""
        try:
            return self.kube.list_custom_objects(KUEUE_WORKLOADS, namespace=namespace)
        except KubeError as error:
            if error.not_found or error.status == HTTP_FORBIDDEN:
                return []
            where = f" in namespace {namespace}" if namespace else " in all namespaces"
            raise ReadError(_describe(error, f"list {KUEUE_WORKLOADS}{where}")) from error

    def _stepped_over(self) -> frozenset[tuple[str, str]]:
        try:
            events, _ = self.kube.list_objects(
                "events",
                namespace=None,
                label_selector=None,
                field_selector=f"reason={ALL_OR_NOTHING_STEPPED_OVER_REASON}",
            )
        except KubeError as error:
            raise ReadError(_describe(error, "list events in all namespaces")) from error
        return stepped_over_jobsets(events)  # which checks the reason: a server may ignore the selector

    def get(self, kind: str, namespace: str, name: str) -> Obj | None:
        """One Job, pod or JobSet; None when it does not exist."""
        readers: dict[str, Callable[[str, str], Obj]] = {
            "job": self.kube.get_job,
            "pod": self.kube.get_pod,
            "jobset": self._get_jobset,
        }
        try:
            return readers[kind](namespace, name)
        except KubeError as error:
            if error.not_found:
                return None
            raise ReadError(_describe(error, f"get {kind} {namespace}/{name}")) from error

    def _get_jobset(self, namespace: str, name: str) -> Obj:
        return self.kube.get_custom_object(JOBSETS, namespace, name)

    def jobs_of_jobset(self, namespace: str, jobset: str) -> list[Obj]:
        return self._list("jobs", namespace, f"{JOBSET_NAME_LABEL}={jobset}")

    def pods_of_job(self, namespace: str, job: str) -> list[Obj]:
        """Every pod of the Job, exclusive or not (a pod the webhook never saw has no job-key label)."""
        return self._list("pods", namespace, f"{JOB_NAME_LABEL}={job}")

    def events(self, namespace: str) -> list[Obj]:
        return self._list("events", namespace)

    def follow(
        self, namespace: str | None, on_change: Callable[[Snapshot], None], stop: threading.Event
    ) -> None:
        """Call `on_change` with a fresh snapshot whenever a node, exclusive pod or Job in scope changes,
        until `stop` is set. The caller has made one `snapshot` first: errors surface there, not here."""
        changed = threading.Event()
        signal = OnAnyChange(changed.set)
        informers = [
            Informer(self.kube, "nodes", name="nodes", namespace=None, label_selector=None, handler=signal),
            Informer(
                self.kube, "pods", name="pods", namespace=None, label_selector=JOB_KEY_LABEL, handler=signal
            ),
            Informer(
                self.kube, "jobs", name="jobs", namespace=namespace, label_selector=None, handler=signal
            ),
        ]
        for informer in informers:
            informer.start()
        try:
            while not stop.is_set():
                if not changed.wait(0.5) or not all(i.synced.is_set() for i in informers):
                    continue
                stop.wait(DEBOUNCE_SECONDS)  # a burst of events (a Job growing) makes one snapshot
                changed.clear()
                nodes, pods, jobs = (informer.store.items() for informer in informers)
                on_change(Snapshot(nodes=nodes, pods=pods, jobs=jobs, workloads=self.workloads(namespace)))
        finally:
            for informer in informers:
                informer.stop()
            for informer in informers:
                informer.join(SYNC_SECONDS)
