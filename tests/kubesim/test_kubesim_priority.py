"""The Priority admission plugin (k/k plugin/pkg/admission/priority/admission.go) on kubesim's API server:
pods get `spec.priority` and `spec.preemptionPolicy` from their class before any mutating webhook."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from kubesim.apiserver.server import ApiServer
from kubesim.errors import ApiError
from kubesim.interface import WebhookReply
from tests.support.builders import make_pod

CLASSES: dict[str, dict[str, Any]] = {
    "batch-high": {"value": 1000},
    "batch-low": {"value": 10, "preemptionPolicy": "Never"},
}


def priority_class(name: str, value: int, **fields: Any) -> dict[str, Any]:
    return {
        "apiVersion": "scheduling.k8s.io/v1",
        "kind": "PriorityClass",
        "metadata": {"name": name},
        "value": value,
        **fields,
    }


def pod(name: str = "p", **spec: Any) -> dict[str, Any]:
    return make_pod(name, None).spec(**spec).obj()


def run(body: Callable[[ApiServer], Awaitable[Any]], classes: dict[str, dict[str, Any]] = CLASSES) -> Any:
    async def main() -> Any:
        api = ApiServer()
        try:
            for name, fields in classes.items():
                await api.create("priorityclasses", priority_class(name, **fields))
            return await body(api)
        finally:
            await api.aclose()

    return asyncio.run(main())


def create_pod(
    the_pod: dict[str, Any], classes: dict[str, dict[str, Any]] = CLASSES
) -> dict[str, Any] | ApiError:
    async def body(api: ApiServer) -> dict[str, Any] | ApiError:
        try:
            return await api.create("pods", the_pod, namespace="default")
        except ApiError as error:
            return error

    result: dict[str, Any] | ApiError = run(body, classes)
    return result


# (pod spec, classes) -> (priorityClassName, priority, preemptionPolicy) after admission
RESOLVED = [
    pytest.param(
        {"priorityClassName": "batch-high"}, CLASSES, ("batch-high", 1000, "PreemptLowerPriority"), id="class"
    ),
    pytest.param({"priorityClassName": "batch-low"}, CLASSES, ("batch-low", 10, "Never"), id="class-never"),
    pytest.param({}, CLASSES, (None, 0, "PreemptLowerPriority"), id="no-class-no-default"),
    pytest.param(
        {},
        {**CLASSES, "everyone": {"value": 5, "globalDefault": True, "preemptionPolicy": "Never"}},
        ("everyone", 5, "Never"),
        id="global-default",
    ),
    pytest.param(
        {"priorityClassName": "system-cluster-critical"},
        {},
        ("system-cluster-critical", 2_000_000_000, "PreemptLowerPriority"),
        id="system-class",
    ),
    pytest.param(
        {"priorityClassName": "batch-high", "priority": 1000, "preemptionPolicy": "PreemptLowerPriority"},
        CLASSES,
        ("batch-high", 1000, "PreemptLowerPriority"),
        id="same-values-given",
    ),
]


@pytest.mark.parametrize(("spec", "classes", "expected"), RESOLVED)
def test_pod_priority_comes_from_its_class(
    spec: dict[str, Any], classes: dict[str, dict[str, Any]], expected: tuple[str | None, int, str]
) -> None:
    created = create_pod(pod(**spec), classes)
    assert isinstance(created, dict)
    got = created["spec"]
    assert (got.get("priorityClassName"), got["priority"], got["preemptionPolicy"]) == expected


REFUSED = [
    pytest.param(
        {"priorityClassName": "missing"},
        'pods "p" is forbidden: no PriorityClass with name missing was found',
        id="unknown",
    ),
    pytest.param(
        {"priorityClassName": "batch-high", "priority": 7},
        'pods "p" is forbidden: the integer value of priority (7) must not be provided in pod spec; priority '
        "admission controller computed 1000 from the given PriorityClass name",
        id="priority-given",
    ),
    pytest.param(
        {"priority": 7},
        "the integer value of priority (7) must not be provided in pod spec; priority admission controller "
        "computed 0 from the given PriorityClass name",
        id="priority-without-class",
    ),
    pytest.param(
        {"priorityClassName": "batch-low", "preemptionPolicy": "PreemptLowerPriority"},
        "the string value of PreemptionPolicy (PreemptLowerPriority) must not be provided in pod spec; "
        "priority admission controller computed Never from the given PriorityClass name",
        id="policy-given",
    ),
]


@pytest.mark.parametrize(("spec", "message"), REFUSED)
def test_pod_priority_refusals_are_forbidden(spec: dict[str, Any], message: str) -> None:
    refused = create_pod(pod(**spec))
    assert isinstance(refused, ApiError)
    assert (refused.status, refused.reason) == (403, "Forbidden")
    assert message in refused.message


def test_a_generated_name_is_named_in_the_refusal() -> None:
    the_pod = pod(priorityClassName="missing")
    the_pod["metadata"] = {"generateName": "worker-"}
    refused = create_pod(the_pod)
    assert isinstance(refused, ApiError)
    assert refused.message.startswith('pods "worker-" is forbidden')


def test_mutating_webhooks_see_the_resolved_priority() -> None:
    """The plugin runs before the mutating webhooks: an in-process webhook reads spec.priority."""
    seen: list[Any] = []

    async def observe(obj: dict[str, Any]) -> WebhookReply:
        seen.append(obj["spec"].get("priority"))
        return WebhookReply(obj=obj)

    configuration = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": "observer"},
        "webhooks": [
            {
                "name": "observe.example.com",
                "admissionReviewVersions": ["v1"],
                "sideEffects": "None",
                "failurePolicy": "Fail",
                "rules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                    }
                ],
            }
        ],
    }

    async def body(api: ApiServer) -> None:
        api.admission.serve_in_process(configuration, {"observe.example.com": observe}, mutating=True)
        await api.create("pods", pod(priorityClassName="batch-high"), namespace="default")

    run(body)
    assert seen == [1000]


def test_updates_keep_the_priority_and_may_not_change_it() -> None:
    async def body(api: ApiServer) -> tuple[dict[str, Any], ApiError | None]:
        await api.create("pods", pod(priorityClassName="batch-high"), namespace="default")
        stored = await api.get("pods", "p", namespace="default")
        relabelled = {**stored, "metadata": {**stored["metadata"], "labels": {"a": "b"}}}
        del relabelled["spec"]["priority"]
        kept = await api.update("pods", relabelled, namespace="default")
        changed = {**kept, "spec": {**kept["spec"], "priority": 5}}
        try:
            await api.update("pods", changed, namespace="default")
        except ApiError as error:
            return kept, error
        return kept, None

    kept, error = run(body)
    assert kept["spec"]["priority"] == 1000
    assert error is not None
    assert error.status == 422


@pytest.mark.parametrize(
    ("existing", "operation", "allowed"),
    [
        ({}, "create", True),
        ({"first": {"value": 1, "globalDefault": True}}, "create", False),
        ({"first": {"value": 1, "globalDefault": True}}, "update-same", True),
        ({"first": {"value": 1, "globalDefault": True}, "second": {"value": 2}}, "update-other", False),
    ],
)
def test_only_one_priority_class_is_the_global_default(
    existing: dict[str, dict[str, Any]], operation: str, allowed: bool
) -> None:
    async def body(api: ApiServer) -> ApiError | None:
        try:
            if operation == "create":
                await api.create("priorityclasses", priority_class("new", 3, globalDefault=True))
            else:
                name = "first" if operation == "update-same" else "second"
                await api.patch(
                    "priorityclasses", name, {"globalDefault": True, "description": "x"}, patch_type="merge"
                )
        except ApiError as error:
            return error
        return None

    error = run(body, existing)
    if allowed:
        assert error is None
    else:
        assert error is not None
        assert (error.status, error.reason) == (403, "Forbidden")
        assert "PriorityClass first is already marked as default. Only one default can exist" in error.message
