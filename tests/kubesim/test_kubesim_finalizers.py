"""Graceful deletion and finalizers in the in-process ApiServer (k/k staging apiserver registry/rest/delete.go
BeforeDelete, registry/generic/registry/store.go ShouldDeleteDuringUpdate, pod strategy CheckGracefulDelete):
what the Job controller's tracking finalizer relies on."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable

from kubesim.apiserver.server import ApiServer
from kubesim.errors import ApiError

FINALIZER = "batch.kubernetes.io/job-tracking"


def run(body: Callable[[ApiServer], Awaitable[None]]) -> None:
    async def main() -> None:
        api = ApiServer()
        try:
            await body(api)
        finally:
            await api.aclose()

    asyncio.run(main())


async def held_pod(api: ApiServer, *, node: str | None = None, phase: str | None = None) -> None:
    await api.create(
        "pods",
        {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {"name": "p", "finalizers": [FINALIZER]},
            "spec": {"containers": [{"name": "c", "image": "busybox:1"}]},
        },
        namespace="default",
    )
    if node:
        binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": "p"}, "target": {"name": node}}
        await api.create("pods", binding, namespace="default", subresource="binding")
    if phase:
        await api.patch("pods", "p", {"status": {"phase": phase}}, namespace="default", subresource="status")


async def remove_finalizer(api: ApiServer) -> None:
    patch = {"metadata": {"$deleteFromPrimitiveList/finalizers": [FINALIZER]}}
    await api.patch("pods", "p", patch, patch_type="strategic", namespace="default")


async def exists(api: ApiServer) -> bool:
    try:
        await api.get("pods", "p", namespace="default")
    except ApiError as error:
        if error.status == 404:
            return False
        raise
    return True


def test_an_unbound_pod_is_held_with_a_zero_grace_period_and_goes_with_its_last_finalizer() -> None:
    async def body(api: ApiServer) -> None:
        await held_pod(api)
        marked = await api.delete("pods", "p", namespace="default")
        assert marked["metadata"]["deletionTimestamp"]
        assert marked["metadata"]["deletionGracePeriodSeconds"] == 0
        await remove_finalizer(api)
        assert not await exists(api)

    run(body)


def test_a_running_pod_stays_for_its_kubelet_after_the_finalizer_goes() -> None:
    async def body(api: ApiServer) -> None:
        await held_pod(api, node="n1", phase="Running")
        marked = await api.delete("pods", "p", namespace="default")
        assert marked["metadata"]["deletionGracePeriodSeconds"] == 30
        await remove_finalizer(api)
        assert await exists(api)
        await api.delete("pods", "p", namespace="default", grace_period_seconds=0)
        assert not await exists(api)

    run(body)


def test_the_kubelets_final_delete_shortens_the_grace_period_and_the_finalizer_removal_deletes() -> None:
    async def body(api: ApiServer) -> None:
        await held_pod(api, node="n1", phase="Running")
        await api.delete("pods", "p", namespace="default")
        again = await api.delete("pods", "p", namespace="default", grace_period_seconds=0)
        assert again["metadata"]["deletionGracePeriodSeconds"] == 0
        assert await exists(api)
        await remove_finalizer(api)
        assert not await exists(api)

    run(body)


def test_a_terminal_pod_is_deleted_without_grace() -> None:
    async def body(api: ApiServer) -> None:
        await held_pod(api, node="n1", phase="Succeeded")
        marked = await api.delete("pods", "p", namespace="default")
        assert marked["metadata"]["deletionGracePeriodSeconds"] == 0
        await remove_finalizer(api)
        assert not await exists(api)

    run(body)


def test_a_repeated_delete_with_a_longer_grace_period_changes_nothing() -> None:
    async def body(api: ApiServer) -> None:
        await held_pod(api, node="n1", phase="Running")
        first = await api.delete("pods", "p", namespace="default", grace_period_seconds=10)
        again = await api.delete("pods", "p", namespace="default", grace_period_seconds=20)
        assert again["metadata"]["resourceVersion"] == first["metadata"]["resourceVersion"]
        assert again["metadata"]["deletionGracePeriodSeconds"] == 10

    run(body)
