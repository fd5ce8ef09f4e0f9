"""Cluster access with the official client: config selection and the few raw calls the webhook makes.

Calls use `_preload_content=False` and parse JSON into plain dicts: the placement core works on dicts
shaped like the API's JSON, and skipping model deserialisation keeps informer threads cheap.
"""

from __future__ import annotations

import json
from typing import Any

import urllib3
from kubernetes import client, config

from placement.constants import JOB_NAME_LABEL, ROLE_LABEL, ROLE_LEADER
from placement.objects import Obj
from webhook.settings import Settings

LEADER_SELECTOR = f"{ROLE_LABEL}={ROLE_LEADER}"


class ClusterConfigError(RuntimeError):
    """No usable way to reach the API server."""


def api_client(settings: Settings) -> Any:
    """--server (no auth, for kubesim) > --kubeconfig > in-cluster service account.

    One attempt per call: urllib3's default retries a timed-out read 3 times, which would stretch a live
    lookup to 4x its timeout, past the API server's admission timeout. The informers retry by re-listing.
    """
    configuration = client.Configuration()
    if settings.server is not None:
        configuration.host = settings.server.rstrip("/")
    elif settings.kubeconfig is not None:
        if not settings.kubeconfig.exists():
            raise ClusterConfigError(f"kubeconfig {settings.kubeconfig} does not exist")
        config.load_kube_config(  # type: ignore[no-untyped-call]
            config_file=str(settings.kubeconfig), client_configuration=configuration
        )
    else:
        try:
            config.load_incluster_config(client_configuration=configuration)  # type: ignore[no-untyped-call]
        except config.ConfigException as err:
            raise ClusterConfigError(
                f"not running in a cluster ({err}); pass --kubeconfig or --server"
            ) from err
    configuration.retries = urllib3.Retry(total=0, redirect=False, raise_on_status=False)
    return client.ApiClient(configuration)


def read_json(response: Any) -> Obj:
    data: Obj = json.loads(response.data)
    return data


class KubeLiveApi:
    """The live fallback after a cache miss: one list of a Job's leader pods, one GET of a node."""

    def __init__(self, api: Any, request_timeout: float) -> None:
        self._core = client.CoreV1Api(api)
        self._timeout = request_timeout

    def list_leaders(self, namespace: str, job_name: str) -> list[Obj]:
        response = self._core.list_namespaced_pod(
            namespace,
            label_selector=f"{LEADER_SELECTOR},{JOB_NAME_LABEL}={job_name}",
            _preload_content=False,
            _request_timeout=self._timeout,
        )
        items: list[Obj] = read_json(response).get("items") or []
        return items

    def get_node(self, name: str) -> Obj | None:
        try:
            response = self._core.read_node(name, _preload_content=False, _request_timeout=self._timeout)
        except client.ApiException as err:
            if err.status == 404:
                return None
            raise
        return read_json(response)


def pod_list_call(api: Any) -> Any:
    return client.CoreV1Api(api).list_pod_for_all_namespaces


def node_list_call(api: Any) -> Any:
    return client.CoreV1Api(api).list_node
