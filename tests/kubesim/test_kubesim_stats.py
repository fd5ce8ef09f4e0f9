"""`/debug/stats` attribution counters: requests per client (HTTP clients told apart by User-Agent) and
event writes per reason — what the strategy benchmark attributes its `wasted_requests` from."""

from __future__ import annotations

import asyncio
from typing import Any

import httpx
import pytest

from kubesim.apiserver.server import ApiServer
from kubesim.testing import KubesimServer

NAMESPACE = "stats"


def event(name: str, reason: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Event",
        "metadata": {"name": name, "namespace": NAMESPACE},
        "involvedObject": {"kind": "Pod", "name": "p", "namespace": NAMESPACE},
        "reason": reason,
        "message": "m",
        "count": 1,
        "type": "Warning",
    }


@pytest.mark.parametrize(
    ("headers", "client"),
    [
        ({"User-Agent": "exclusive-placement-webhook"}, "external:exclusive-placement-webhook"),
        ({"User-Agent": "kubectl/v1.31.0 (linux/amd64) kubernetes/abc"}, "external:kubectl"),
        ({"User-Agent": "weird agent!/1"}, "external:weird"),
        ({"User-Agent": "ca;f{x}/2"}, "external:ca_f_x_"),
        ({"User-Agent": "a" * 80}, "external:" + "a" * 64),
        ({"User-Agent": "/1.0"}, "external"),
        ({}, "external"),
    ],
)
def test_http_requests_are_counted_per_user_agent(
    api_only_sim: KubesimServer, headers: dict[str, str], client: str
) -> None:
    api_only_sim.reset_stats()
    with httpx.Client(base_url=api_only_sim.url, headers=headers) as http:
        if "User-Agent" not in headers:
            http.headers.pop("User-Agent")
        http.get("/api/v1/namespaces/default/pods").raise_for_status()
        http.get("/api/v1/nodes").raise_for_status()
        http.get("/api/v1/namespaces/default/pods").raise_for_status()
    requests = api_only_sim.stats()["requests"]
    assert requests["by_client"] == {client: 3}
    assert requests["by_client_verb_resource"] == {client: {"list pods": 2, "list nodes": 1}}


def test_in_process_clients_keep_their_names_per_verb_and_resource() -> None:
    async def body() -> dict[str, Any]:
        api = ApiServer()
        try:
            await api.create("namespaces", {"metadata": {"name": NAMESPACE}}, client="bootstrap")
            await api.list("pods", namespace=NAMESPACE, client="job-controller")
            await api.list("pods", namespace=NAMESPACE, client="job-controller")
            await api.get("namespaces", NAMESPACE, client="scheduler")
            figures: dict[str, Any] = api.stats.snapshot()["requests"]["by_client_verb_resource"]
            return figures
        finally:
            await api.aclose()

    assert asyncio.run(body()) == {
        "bootstrap": {"create namespaces": 1},
        "job-controller": {"list pods": 2},
        "scheduler": {"get namespaces": 1},
    }


def test_event_writes_are_counted_per_reason_creates_and_patches_alike() -> None:
    async def body() -> dict[str, Any]:
        api = ApiServer()
        try:
            await api.create("namespaces", {"metadata": {"name": NAMESPACE}})
            await api.create("events", event("a", "FailedCreate"), namespace=NAMESPACE)
            await api.patch("events", "a", {"count": 2}, namespace=NAMESPACE, patch_type="strategic")
            await api.patch("events", "a", {"count": 3}, namespace=NAMESPACE, patch_type="strategic")
            await api.create("events", event("b", "Scheduled"), namespace=NAMESPACE)
            await api.delete("events", "b", namespace=NAMESPACE)  # a delete is no event write
            # A pod write is no event write, whatever its fields.
            pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": "i"}]}}
            await api.create("pods", pod, namespace=NAMESPACE)
            figures: dict[str, Any] = api.stats.snapshot()["events"]
            return figures
        finally:
            await api.aclose()

    assert asyncio.run(body()) == {"writes_by_reason": {"FailedCreate": 3, "Scheduled": 1}}


def test_reset_clears_the_attribution_counters() -> None:
    async def body() -> dict[str, Any]:
        api = ApiServer()
        try:
            await api.create("namespaces", {"metadata": {"name": NAMESPACE}}, client="x")
            await api.create("events", event("a", "FailedCreate"), namespace=NAMESPACE)
            api.stats.reset()
            figures: dict[str, Any] = api.stats.snapshot()
            return figures
        finally:
            await api.aclose()

    snapshot = asyncio.run(body())
    assert snapshot["requests"]["by_client_verb_resource"] == {}
    assert snapshot["events"]["writes_by_reason"] == {}


def test_requests_are_counted_per_namespace_they_are_about() -> None:
    async def body() -> dict[str, Any]:
        api = ApiServer()
        try:
            for name in (NAMESPACE, "other"):
                await api.create("namespaces", {"metadata": {"name": name}})  # cluster-scoped: not counted
            await api.create("events", event("a", "FailedCreate"), namespace=NAMESPACE)
            await api.patch("events", "a", {"count": 2}, namespace=NAMESPACE, patch_type="strategic")
            in_body = {**event("b", "Scheduled"), "metadata": {"name": "b", "namespace": "other"}}
            await api.create("events", in_body)  # a controller naming the namespace in the body only
            await api.get("events", "a", namespace=NAMESPACE)
            await api.list("events", namespace=NAMESPACE)
            await api.list("events")  # across all namespaces: not counted
            await api.delete("events", "b", namespace="other")
            figures: dict[str, Any] = api.stats.snapshot()["requests"]["by_namespace"]
            return figures
        finally:
            await api.aclose()

    assert asyncio.run(body()) == {
        NAMESPACE: {"total": 4, "writes": 2},
        "other": {"total": 2, "writes": 2},
    }
