"""CronJobs and PriorityClasses are served and stored (CronJobs inert: no CronJob controller) with upstream's
defaults and the basics of its validation; the Priority admission plugin is in test_kubesim_priority.py."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kubesim.apiserver.discovery import api_resource_list
from kubesim.apiserver.server import ApiServer
from kubesim.errors import ApiError


def run(body: Callable[[ApiServer], Awaitable[Any]]) -> Any:
    async def main() -> Any:
        api = ApiServer()
        try:
            return await body(api)
        finally:
            await api.aclose()

    return asyncio.run(main())


def create(resource: str, obj: dict[str, Any]) -> dict[str, Any] | ApiError:
    """The created object, or the ApiError that refused it."""

    async def body(api: ApiServer) -> dict[str, Any] | ApiError:
        try:
            return await api.create(resource, obj, namespace="default")
        except ApiError as exc:
            return exc

    result: dict[str, Any] | ApiError = run(body)
    return result


def priority_class(name: str, value: int, **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **fields,
    }


def cron_job(name: str = "nightly", **spec: Any) -> dict[str, Any]:
    template = {
        "spec": {"restartPolicy": "OnFailure", "containers": [{"name": "c", "image": "busybox:1.36"}]}
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": name},
        "spec": {"schedule": "0 3 * * *", "jobTemplate": {"spec": {"template": template}}, **spec},
    }


def test_discovery_lists_cronjobs_and_priorityclasses() -> None:
    batch = {r["name"]: r for r in (api_resource_list("batch/v1") or {})["resources"]}
    assert batch["cronjobs"]["kind"] == "CronJob"
    assert batch["cronjobs"]["shortNames"] == ["cj"]
    assert "cronjobs/status" in batch
    scheduling = {r["name"]: r for r in (api_resource_list("scheduling.k8s.io/v1") or {})["resources"]}
    assert scheduling["priorityclasses"]["namespaced"] is False
    assert scheduling["priorityclasses"]["shortNames"] == ["pc"]


def test_priority_class_defaults_its_preemption_policy() -> None:
    created = create("priorityclasses", priority_class("batch-high", 1000))
    assert isinstance(created, dict)
    assert created["preemptionPolicy"] == "PreemptLowerPriority"
    assert "namespace" not in created["metadata"]


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (
            priority_class("too-high", 1_000_000_001),
            "value: Forbidden: maximum allowed value of a user defined priority is 1000000000",
        ),
        (
            priority_class("system-mine", 10),
            "metadata.name: Forbidden: priority class names with 'system-' prefix are reserved for system "
            "use only. error: system-mine is not a known system priority class",
        ),
        (
            priority_class("system-node-critical", 5),
            "error: value of system-node-critical PriorityClass must be 2000001000",
        ),
        (
            priority_class("system-cluster-critical", 2_000_000_000, globalDefault=True),
            "error: globalDefault of system-cluster-critical PriorityClass must be false",
        ),
        (
            priority_class("odd", 1, preemptionPolicy="Sometimes"),
            'preemptionPolicy: Unsupported value: "Sometimes": '
            'supported values: "PreemptLowerPriority", "Never"',
        ),
    ],
    ids=["above-user-maximum", "system-prefix", "system-value", "system-global-default", "preemption-policy"],
)
def test_priority_class_validation(obj: dict[str, Any], message: str) -> None:
    refused = create("priorityclasses", obj)
    assert isinstance(refused, ApiError)
    assert refused.status == 422
    assert message in refused.message


def test_system_priority_classes_exist_from_the_start() -> None:
    """AddSystemPriorityClasses (a post-start hook): creating one again is AlreadyExists."""

    async def body(api: ApiServer) -> dict[str, int]:
        listed, _ = await api.list("priorityclasses")
        return {c["metadata"]["name"]: c["value"] for c in listed}

    assert run(body) == {"system-cluster-critical": 2_000_000_000, "system-node-critical": 2_000_001_000}
    for name, value in (("system-node-critical", 2_000_001_000), ("system-cluster-critical", 2_000_000_000)):
        refused = create("priorityclasses", priority_class(name, value))
        assert isinstance(refused, ApiError)
        assert (refused.status, refused.reason) == (409, "AlreadyExists")


def test_priority_class_value_and_preemption_policy_are_immutable() -> None:
    async def body(api: ApiServer) -> list[str]:
        await api.create("priorityclasses", priority_class("steady", 100, description="before"))
        messages = []
        for change in ({"value": 200}, {"preemptionPolicy": "Never"}):
            try:
                await api.patch("priorityclasses", "steady", change, patch_type="merge")
            except ApiError as exc:
                messages.append(exc.message)
        described = await api.patch("priorityclasses", "steady", {"description": "after"}, patch_type="merge")
        assert described["description"] == "after"
        return messages

    value, policy = run(body)
    assert "value: Forbidden: may not be changed in an update." in value
    assert 'preemptionPolicy: Invalid value: "Never": field is immutable' in policy


def test_cron_job_defaults() -> None:
    created = create("cronjobs", cron_job())
    assert isinstance(created, dict)
    spec = created["spec"]
    assert (spec["concurrencyPolicy"], spec["suspend"]) == ("Allow", False)
    assert (spec["successfulJobsHistoryLimit"], spec["failedJobsHistoryLimit"]) == (3, 1)
    pod_spec = spec["jobTemplate"]["spec"]["template"]["spec"]
    assert pod_spec["dnsPolicy"] == "ClusterFirst"
    assert pod_spec["containers"][0]["terminationMessagePolicy"] == "File"
    assert "completions" not in spec["jobTemplate"]["spec"]  # SetDefaults_Job is for Jobs only


@pytest.mark.parametrize(
    ("obj", "message"),
    [
        (cron_job(schedule=""), "spec.schedule: Required value"),
        (
            cron_job(concurrencyPolicy="Sometimes"),
            'spec.concurrencyPolicy: Unsupported value: "Sometimes": '
            'supported values: "Allow", "Forbid", "Replace"',
        ),
        (cron_job(name="n" * 53), "must be no more than 52 characters"),
        (
            cron_job(jobTemplate={"spec": {"template": {"spec": {"restartPolicy": "Always"}}}}),
            "spec.jobTemplate.spec.template.spec.containers: Required value",
        ),
    ],
    ids=["schedule", "concurrency-policy", "name-length", "job-template"],
)
def test_cron_job_validation(obj: dict[str, Any], message: str) -> None:
    refused = create("cronjobs", obj)
    assert isinstance(refused, ApiError)
    assert refused.status == 422
    assert message in refused.message
