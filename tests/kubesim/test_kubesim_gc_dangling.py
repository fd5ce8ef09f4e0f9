"""Garbage collection of a dependent created after its owner is gone (a controller's create in flight while
the owner is deleted), as upstream's garbage collector verifies owner uids it has not seen."""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubesim.apiserver.server import ApiServer
from kubesim.clock import run_virtual
from kubesim.errors import ApiError


def _pod(name: str, ref: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "ownerReferences": [ref]},
        "spec": {"containers": [{"name": "c", "image": "busybox"}]},
    }


def _job(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name},
        "spec": {
            "template": {"spec": {"restartPolicy": "Never", "containers": [{"name": "c", "image": "b"}]}}
        },
    }


async def _exists(api: ApiServer, name: str) -> bool:
    try:
        await api.get("pods", name, namespace="default")
    except ApiError as error:
        if error.status == 404:
            return False
        raise
    return True


@pytest.mark.parametrize(
    ("owner", "collected"),
    [
        ("deleted", True),  # the owner's uid no longer exists
        ("recreated", True),  # same name, another uid: the dependent's owner is still gone
        ("alive", False),
        ("never-existed", False),  # deviation: upstream would collect it too (fixtures rely on keeping it)
    ],
)
def test_a_dependent_of_a_gone_owner_is_collected(owner: str, collected: bool) -> None:
    async def scenario() -> bool:
        api = ApiServer(seed=0)
        try:
            job = await api.create("jobs", _job("j"), namespace="default")
            ref = {"apiVersion": "batch/v1", "kind": "Job", "name": "j", "uid": job["metadata"]["uid"]}
            if owner in ("deleted", "recreated"):
                await api.delete("jobs", "j", namespace="default")
            if owner == "recreated":
                await api.create("jobs", _job("j"), namespace="default")
            if owner == "never-existed":
                ref = {**ref, "name": "other", "uid": "no-such-uid"}
            await api.create("pods", _pod("late", ref), namespace="default")
            # In virtual time this returns only once nothing else can run: whatever collection the create
            # started has finished.
            await asyncio.sleep(1)
            return not await _exists(api, "late")
        finally:
            await api.aclose()

    assert run_virtual(scenario()) is collected
