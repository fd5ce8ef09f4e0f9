"""Forged resize keys the resizer itself must refuse, as both e2e tiers replay them (SECURITY.md, "Only what
the webhook admitted is resized"): keys added by an update the webhook never sees (kubesim runs no
ValidatingAdmissionPolicy; on the real control plane the tests take the chart's resize-keys policy away,
as a cluster without it would be), and keys on a Job in a namespace the webhooks are exempt from.

Each forged Job's pods are labelled as leaders by its own template, so the one with completion index 0 is
a bound leader the resizer sees: before this check, every one of them grew to its forged target."""

from __future__ import annotations

from typing import Any

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
from tests.e2e.jobset_e2e_support import plain_job
from tests.support.waiting import eventually

Obj = dict[str, Any]
FORGED_TARGET = "40"
ABSURD_TARGET = "100000"


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
