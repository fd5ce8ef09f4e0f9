"""Object semantics of the in-process ApiServer (the same methods the HTTP layer and the controllers use)."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kubesim.apiserver.server import ApiServer
from kubesim.errors import ApiError
from tests.support.builders import make_job, make_pod
from tests.support.waiting import eventually_async


def run(body: Callable[[ApiServer], Awaitable[Any]], **kwargs: Any) -> Any:
    async def main() -> Any:
        api = ApiServer(**kwargs)
        try:
            return await body(api)
        finally:
            await api.aclose()

    return asyncio.run(main())


def pod(name: str = "p", **spec: Any) -> dict[str, Any]:
    return make_pod(name, None).label("app", "x").spec(**spec).obj()


def job(name: str = "j", completions: int = 2, parallelism: int = 2) -> dict[str, Any]:
    return make_job(name, None).indexed(completions, parallelism).obj()


async def status_of(call: Awaitable[Any]) -> tuple[int, str]:
    try:
        await call
    except ApiError as exc:
        return exc.status, exc.message
    return 0, ""


def test_create_stamps_metadata_and_resource_versions_increase() -> None:
    async def body(api: ApiServer) -> None:
        first = await api.create("pods", pod("a"), namespace="default")
        second = await api.create(
            "pods", {**pod(""), "metadata": {"generateName": "gen-"}}, namespace="default"
        )
        meta = first["metadata"]
        assert meta["uid"]
        assert meta["creationTimestamp"]
        assert meta["generation"] == 1
        assert int(second["metadata"]["resourceVersion"]) > int(meta["resourceVersion"])
        assert second["metadata"]["name"].startswith("gen-")
        assert len(second["metadata"]["name"]) == 9
        assert first["status"]["phase"] == "Pending"
        assert first["spec"]["schedulerName"] == "default-scheduler"

    run(body)


def test_conflicts_and_not_found() -> None:
    async def body(api: ApiServer) -> None:
        created = await api.create("pods", pod(), namespace="default")
        assert (await status_of(api.create("pods", pod(), namespace="default")))[0] == 409
        stale = dict(created, metadata={**created["metadata"], "labels": {"v": "1"}})
        await api.update("pods", stale, namespace="default")
        code, message = await status_of(api.update("pods", stale, namespace="default"))
        assert code == 409
        assert "the object has been modified" in message
        assert (await status_of(api.get("pods", "nope", namespace="default")))[0] == 404
        assert (await status_of(api.create("pods", pod(), namespace="missing-ns")))[0] == 404

    run(body)


def test_noop_update_keeps_resource_version_and_spec_change_bumps_generation() -> None:
    async def body(api: ApiServer) -> None:
        created = await api.create("jobs", job(), namespace="default")
        same = await api.patch("jobs", "j", {"spec": {"parallelism": 2}}, namespace="default")
        assert same["metadata"]["resourceVersion"] == created["metadata"]["resourceVersion"]
        grown = await api.patch(
            "jobs", "j", {"spec": {"completions": 4, "parallelism": 4}}, namespace="default"
        )
        assert grown["metadata"]["generation"] == 2
        labelled = await api.patch("jobs", "j", {"metadata": {"labels": {"a": "b"}}}, namespace="default")
        assert labelled["metadata"]["generation"] == 2

    run(body)


@pytest.mark.parametrize(
    ("patch", "allowed"),
    [
        ({"spec": {"completions": 5, "parallelism": 5}}, True),
        ({"spec": {"completions": 5}}, False),
        ({"spec": {"parallelism": 1}}, True),
        ({"spec": {"template": {"spec": {"nodeSelector": {"a": "b"}}}}}, False),
    ],
)
def test_job_update_rules(patch: dict[str, Any], allowed: bool) -> None:
    async def body(api: ApiServer) -> int:
        await api.create("jobs", job(), namespace="default")
        return (await status_of(api.patch("jobs", "j", patch, namespace="default")))[0]

    assert run(body) == (0 if allowed else 422)


@pytest.mark.parametrize(
    ("spec", "patch", "allowed"),
    [
        ({"schedulingGates": [{"name": "g"}]}, {"spec": {"schedulingGates": None}}, True),
        ({}, {"spec": {"schedulingGates": [{"name": "g"}]}}, False),
        ({"schedulingGates": [{"name": "g"}]}, {"spec": {"nodeSelector": {"pool": "a"}}}, True),
        ({}, {"spec": {"nodeSelector": {"pool": "a"}}}, False),
        ({"schedulingGates": [{"name": "g"}], "nodeSelector": {"pool": "a"}},
         {"spec": {"nodeSelector": {"pool": "b"}}}, False),
        ({}, {"spec": {"containers": [{"name": "c", "image": "busybox:2"}]}}, True),
        ({}, {"spec": {"restartPolicy": "Never"}}, False),
        ({}, {"spec": {"affinity": {"nodeAffinity": {}}}}, False),
    ],
)  # fmt: skip
def test_pod_update_rules(spec: dict[str, Any], patch: dict[str, Any], allowed: bool) -> None:
    async def body(api: ApiServer) -> int:
        await api.create("pods", pod(**spec), namespace="default")
        return (await status_of(api.patch("pods", "p", patch, patch_type="strategic", namespace="default")))[
            0
        ]

    assert run(body) == (0 if allowed else 422)


def test_binding_sets_node_and_rebinding_is_409() -> None:
    async def body(api: ApiServer) -> None:
        await api.create("pods", pod(), namespace="default")
        binding = {"metadata": {"name": "p"}, "target": {"kind": "Node", "name": "n1"}}
        await api.create("pods", binding, namespace="default", subresource="binding")
        bound = await api.get("pods", "p", namespace="default")
        assert bound["spec"]["nodeName"] == "n1"
        assert any(
            c["type"] == "PodScheduled" and c["status"] == "True" for c in bound["status"]["conditions"]
        )
        code, message = await status_of(
            api.create("pods", binding, namespace="default", subresource="binding")
        )
        assert code == 409
        assert "already assigned" in message
        assert api.stats.pods_bound == 1

    run(body)


def test_status_subresource_only_changes_status() -> None:
    async def body(api: ApiServer) -> None:
        created = await api.create("pods", pod(), namespace="default")
        changed = dict(
            created, status={"phase": "Running"}, metadata={**created["metadata"], "labels": {"z": "1"}}
        )
        await api.update("pods", changed, namespace="default", subresource="status")
        now = await api.get("pods", "p", namespace="default")
        assert now["status"] == {"phase": "Running"}
        assert now["metadata"]["labels"] == {"app": "x"}
        await api.update("pods", dict(now, status={"phase": "Failed"}), namespace="default")
        assert (await api.get("pods", "p", namespace="default"))["status"]["phase"] == "Running"

    run(body)


def test_dry_run_stores_nothing() -> None:
    async def body(api: ApiServer) -> None:
        result = await api.create("pods", pod(), namespace="default", dry_run=True)
        assert result["metadata"]["name"] == "p"
        assert (await status_of(api.get("pods", "p", namespace="default")))[0] == 404

    run(body)


def test_garbage_collection_deletes_dependents_in_background() -> None:
    async def body(api: ApiServer) -> None:
        owner = await api.create("jobs", job(), namespace="default")
        ref = {
            "apiVersion": "batch/v1",
            "kind": "Job",
            "name": "j",
            "uid": owner["metadata"]["uid"],
            "controller": True,
        }
        dependent = pod("d")
        dependent["metadata"]["ownerReferences"] = [ref]
        await api.create("pods", dependent, namespace="default")
        await api.create("pods", pod("free"), namespace="default")
        await api.delete("jobs", "j", namespace="default")

        async def dependent_gone() -> bool:
            return (await status_of(api.get("pods", "d", namespace="default")))[0] == 404

        await eventually_async(dependent_gone, "the dependent pod collected", 5)
        names = [p["metadata"]["name"] for p in (await api.list("pods", namespace="default"))[0]]
        assert names == ["free"]

    run(body)


def test_bound_pod_deletion_is_graceful() -> None:
    async def body(api: ApiServer) -> None:
        await api.create("pods", pod(), namespace="default")
        await api.create("pods", {"metadata": {"name": "p"}, "target": {"name": "n"}}, namespace="default",
                         subresource="binding")  # fmt: skip
        marked = await api.delete("pods", "p", namespace="default")
        assert marked["metadata"]["deletionTimestamp"]
        assert (await api.get("pods", "p", namespace="default"))["metadata"][
            "deletionGracePeriodSeconds"
        ] == 30
        await api.delete("pods", "p", namespace="default", grace_period_seconds=0)
        assert (await status_of(api.get("pods", "p", namespace="default")))[0] == 404

    run(body)


def test_list_selectors_and_pagination() -> None:
    async def body(api: ApiServer) -> None:
        for i in range(5):
            p = pod(f"p{i}")
            p["metadata"]["labels"] = {"even": str(i % 2 == 0).lower()}
            await api.create("pods", p, namespace="default")
        evens, _ = await api.list("pods", namespace="default", label_selector="even=true")
        assert [p["metadata"]["name"] for p in evens] == ["p0", "p2", "p4"]
        named, _ = await api.list("pods", field_selector="metadata.name=p3")
        assert [p["metadata"]["name"] for p in named] == ["p3"]
        seen: list[str] = []
        token = None
        while True:
            page, _, token = api.list_page("pods", namespace="default", limit=2, continue_token=token)
            seen += [p["metadata"]["name"] for p in page]
            assert len(page) <= 2
            if not token:
                break
        assert seen == ["p0", "p1", "p2", "p3", "p4"]

    run(body)


def test_watch_replays_from_resource_version_and_reports_selector_transitions() -> None:
    async def body(api: ApiServer) -> list[tuple[str, str]]:
        created = await api.create("pods", pod("a"), namespace="default")
        start = created["metadata"]["resourceVersion"]
        await api.patch("pods", "a", {"metadata": {"labels": {"app": "y"}}}, namespace="default")
        await api.patch("pods", "a", {"metadata": {"labels": {"app": "x"}}}, namespace="default")
        await api.delete("pods", "a", namespace="default")
        events: list[tuple[str, str]] = []
        stream = api.watch("pods", namespace="default", resource_version=start, label_selector="app=x")
        async for event in stream:
            events.append((event["type"], event["object"]["metadata"]["labels"]["app"]))
            if len(events) == 3:
                break
        await stream.aclose()  # type: ignore[attr-defined]
        return events

    assert run(body) == [("DELETED", "y"), ("ADDED", "x"), ("DELETED", "x")]


def test_watch_from_expired_resource_version_is_410() -> None:
    async def body(api: ApiServer) -> int:
        for i in range(10):
            await api.create("pods", pod(f"p{i}"), namespace="default")
        stream = api.watch("pods", resource_version="1")
        return (await status_of(stream.__anext__()))[0]

    assert run(body, history_size=4) == 410


def test_every_call_is_counted() -> None:
    async def body(api: ApiServer) -> dict[str, int]:
        await api.create("pods", pod(), namespace="default", client="job-controller")
        await api.get("pods", "p", namespace="default")
        await api.patch("pods", "p", {"metadata": {"labels": {"a": "b"}}}, namespace="default")
        return dict(api.stats.by_verb_resource) | {"patched": api.stats.pods_patched}

    counts = run(body)
    assert counts == {"create pods": 1, "get pods": 1, "patch pods": 1, "patched": 1}


def test_finalizers_hold_deletion_until_removed() -> None:
    async def body(api: ApiServer) -> None:
        held = pod()
        held["metadata"]["finalizers"] = ["example.com/hold"]
        await api.create("pods", held, namespace="default")
        marked = await api.delete("pods", "p", namespace="default")
        assert marked["metadata"]["deletionTimestamp"]
        await api.patch("pods", "p", {"metadata": {"finalizers": None}}, namespace="default")
        assert (await status_of(api.get("pods", "p", namespace="default")))[0] == 404

    run(body)


def test_deleting_a_namespace_deletes_its_contents() -> None:
    async def body(api: ApiServer) -> None:
        await api.create("namespaces", {"metadata": {"name": "team"}})
        await api.create("pods", pod(), namespace="team")
        await api.create("jobs", job(), namespace="team")
        await api.delete("namespaces", "team")

        async def emptied() -> bool:
            return (
                not (await api.list("pods", namespace="team"))[0]
                and not (await api.list("jobs", namespace="team"))[0]
            )

        await eventually_async(emptied, "the namespace's pods and Jobs deleted", 5)
        assert (await api.list("pods", namespace="team"))[0] == []
        assert (await api.list("jobs", namespace="team"))[0] == []
        assert (await status_of(api.create("pods", pod(), namespace="team")))[0] == 404

    run(body)


@pytest.mark.parametrize(("precondition", "expected_status"), [(False, 0), (True, 409)])
def test_write_racing_with_admission(precondition: bool, expected_status: int) -> None:
    """Another write lands while a patch awaits admission: re-applied if unconditional, else 409."""

    async def body(api: ApiServer) -> tuple[int, dict[str, str]]:
        created = await api.create("pods", pod(), namespace="default")
        original = api.admission.mutate
        raced = False

        async def racing_mutate(req: Any, warnings: list[str]) -> Any:
            nonlocal raced
            if req.operation == "UPDATE" and not raced:
                raced = True
                await api.patch("pods", "p", {"metadata": {"labels": {"other": "1"}}}, namespace="default")
            return await original(req, warnings)

        api.admission.mutate = racing_mutate  # type: ignore[method-assign]
        patch: dict[str, Any] = {"metadata": {"labels": {"mine": "1"}}}
        if precondition:
            patch["metadata"]["resourceVersion"] = created["metadata"]["resourceVersion"]
        code, _ = await status_of(api.patch("pods", "p", patch, namespace="default"))
        return code, (await api.get("pods", "p", namespace="default"))["metadata"]["labels"]

    code, labels = run(body)
    assert code == expected_status
    assert labels["other"] == "1"
    assert ("mine" in labels) is (not precondition)
