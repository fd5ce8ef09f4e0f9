"""Forged resize keys the resizer itself must refuse, as both e2e tiers replay them (SECURITY.md, "Only what
the webhook admitted is resized"): keys added by an update the webhook never sees (kubesim runs no
ValidatingAdmissionPolicy; on the real control plane the tests take the chart's resize-keys policy away,
as a cluster without it would be), and keys on a Job in a namespace the webhooks are exempt from.

Each forged Job's pods are labelled as leaders by its own template, so the one with completion index 0 is
a bound leader the resizer sees: before this check, every one of them grew to its forged target."""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager
from typing import Any

from devstack.commands import RELEASE_NAMESPACE
from devstack.kube import KubeError
from devstack.stack import Stack
from placement.constants import (
    RESIZE_DONE,
    RESIZE_LABEL,
    RESIZE_PENDING,
    ROLE_LABEL,
    ROLE_LEADER,
    TARGET_COMPLETIONS_ANNOTATION,
    TARGET_PARALLELISM_ANNOTATION,
    TOPOLOGY_ANNOTATION,
)
from resizer.events import REPORTING_CONTROLLER
from tests.e2e.jobset_e2e_support import plain_job, set_taint
from tests.support.metrics import resizer_metric
from tests.support.waiting import eventually

Obj = dict[str, Any]
FORGED_TARGET = "40"
ABSURD_TARGET = "100000"
HOLD = {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}
Forging = Callable[[Stack, str, str], AbstractContextManager[None]]
"""(stack, namespace, Job) -> a block in which the Job's resize keys can be updated by anyone."""


@contextlib.contextmanager
def updates_unchecked(stack: Stack, namespace: str, job: str) -> Iterator[None]:
    """kubesim runs no ValidatingAdmissionPolicy: anyone may update the keys already."""
    yield


def resize_keys(target: str) -> Obj:
    """A merge patch setting `resize: pending` and `target` as the Job webhook records them."""
    return {
        "metadata": {
            "labels": {RESIZE_LABEL: RESIZE_PENDING},
            "annotations": {TARGET_COMPLETIONS_ANNOTATION: target, TARGET_PARALLELISM_ANNOTATION: target},
        }
    }


def leaders_by_template(job: Obj) -> Obj:
    """`job` whose pods all carry the leader role label (its index 0 is then a leader to the resizer)."""
    job["spec"]["template"]["metadata"] = {"labels": {ROLE_LABEL: ROLE_LEADER}}
    return job


def unadmitted_job(name: str, namespace: str) -> Obj:
    """An Indexed Job of one pod without a topology annotation: the webhook never admits it as exclusive."""
    job = plain_job(name, namespace, 1)
    del job["metadata"]["annotations"][TOPOLOGY_ANNOTATION]
    return leaders_by_template(job)


def exempt_job(name: str, namespace: str) -> Obj:
    """An exclusive-looking Job of one pod carrying the resize keys from its creation, in a namespace the
    webhooks are exempt from (so nobody removes them)."""
    job = leaders_by_template(plain_job(name, namespace, 1))
    job["spec"]["template"]["metadata"]["annotations"] = {
        TOPOLOGY_ANNOTATION: job["metadata"]["annotations"][TOPOLOGY_ANNOTATION]
    }
    keys = resize_keys(FORGED_TARGET)["metadata"]
    job["metadata"]["labels"] = dict(keys["labels"])
    job["metadata"]["annotations"].update(keys["annotations"])
    return job


def sizes(stack: Stack, name: str, namespace: str) -> tuple[int, int, str | None]:
    job = stack.client.get("Job", name, namespace=namespace)
    return job["spec"]["completions"], job["spec"]["parallelism"], job["metadata"]["labels"].get(RESIZE_LABEL)


def leader_running(stack: Stack, job: str, namespace: str) -> bool:
    return any(
        pod["metadata"].get("labels", {}).get("batch.kubernetes.io/job-name") == job
        and pod.get("status", {}).get("phase") == "Running"
        for pod in stack.client.list("Pod", namespace=namespace)
    )


def honest_job_resized(stack: Stack, namespace: str) -> None:
    """An exclusive Job created now, resized: the resizer has worked past whatever came before it."""
    stack.client.create(plain_job("honest", namespace, 2))
    eventually(
        lambda: sizes(stack, "honest", namespace) == (2, 2, RESIZE_DONE),
        "the honest Job resized",
        90,
        ignoring=(KubeError,),
    )


def refusal_events(stack: Stack, job: str, namespace: str) -> list[Obj]:
    """The resizer's ResizeRefused Events about `job`, read as core/v1 Events (kubectl describe's view)."""
    return [
        event
        for event in stack.client.list("Event", namespace=namespace)
        if event.get("reportingComponent") == REPORTING_CONTROLLER
        and event.get("reason") == "ResizeRefused"
        and event["involvedObject"]["name"] == job
    ]


def running_leader(stack: Stack, job: str, namespace: str) -> None:
    eventually(
        lambda: leader_running(stack, job, namespace), f"{job}'s leader running", 60, ignoring=(KubeError,)
    )


def an_unadmitted_job_keeps_its_size(stack: Stack, namespace: str, forging: Forging) -> None:
    """`resize: pending` and a target of 40 on a Job the webhook never admitted, its leader bound."""
    stack.client.create(unadmitted_job("grow-me", namespace))
    running_leader(stack, "grow-me", namespace)
    with forging(stack, namespace, "grow-me"):
        stack.client.patch("Job", "grow-me", resize_keys(FORGED_TARGET), namespace=namespace)
        honest_job_resized(stack, namespace)
    assert sizes(stack, "grow-me", namespace) == (1, 1, RESIZE_PENDING)
    assert resizer_metric(stack, "skips_total", reason="not-admitted") >= 1  # it was looked at


def an_absurd_target_is_refused(stack: Stack, namespace: str, forging: Forging) -> Obj:
    """An admitted Job of 2 given a target of 100000 before its leader binds: it keeps its size, and its one
    ResizeRefused Event is returned."""
    nodes = [node["metadata"]["name"] for node in stack.client.list("Node")]
    set_taint(stack, nodes, HOLD)  # its leader binds only once the forged target is in place
    try:
        stack.client.create(plain_job("absurd", namespace, 2))
        assert sizes(stack, "absurd", namespace) == (1, 1, RESIZE_PENDING)
        with forging(stack, namespace, "absurd"):
            stack.client.patch("Job", "absurd", resize_keys(ABSURD_TARGET), namespace=namespace)
    finally:
        set_taint(stack, nodes, None)
    running_leader(stack, "absurd", namespace)
    (event,) = eventually(lambda: refusal_events(stack, "absurd", namespace), "the ResizeRefused Event", 30)
    assert event["type"] == "Warning"
    assert "100000 is more than the 2 the Job webhook recorded" in event["message"]
    honest_job_resized(stack, namespace)
    assert sizes(stack, "absurd", namespace) == (1, 1, RESIZE_PENDING)
    assert len(refusal_events(stack, "absurd", namespace)) == 1
    return event


def a_job_in_an_exempt_namespace_is_left_alone(stack: Stack, namespace: str) -> None:
    """Keys from its creation on a Job in the release namespace (the webhooks are exempt from it), its
    leader bound."""
    stack.client.create(exempt_job("exempt", RELEASE_NAMESPACE))
    try:
        running_leader(stack, "exempt", RELEASE_NAMESPACE)
        honest_job_resized(stack, namespace)
        assert sizes(stack, "exempt", RELEASE_NAMESPACE) == (1, 1, RESIZE_PENDING)
    finally:
        stack.client.delete("Job", "exempt", namespace=RELEASE_NAMESPACE)
