"""The chart's RBAC, judged by kube-apiserver's real authorizer (Node,RBAC).

Every stack of the kube tier runs the webhook and the resizer as the chart's ServiceAccounts under the
chart's roles exactly as rendered: the other kube tests show that it grants enough for what they exercise,
and here the audit log shows that not one of their requests was refused. Then one rule at a time is
taken away from the live ClusterRole granting it, and the behaviour that needs it breaks, with the refusal
(403) for that process's user in the audit log: the rule is needed, so the chart grants no more than that.
"""

from __future__ import annotations

import contextlib
import copy
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest
import yaml

from devstack.manifests import exclusive_jobset
from devstack.stack import Stack
from kubekit.client import KubeError
from placement.constants import KUEUE_QUEUE_NAME_LABEL, RESIZE_LABEL, STRATEGY_ANNOTATION, Strategy
from tests.kube.kube_support import audit_log, kube_cluster
from tests.kube.test_kube_day2 import KUBECTL, kubectl
from tests.kube.workloads import pods_of, running_pods, set_taint
from tests.support.waiting import eventually

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-rbac")]

Obj = dict[str, Any]
JOBS, PODS = 2, 3
HOLD = {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}


@dataclass(frozen=True)
class Rule:
    component: str
    api_group: str
    resource: str
    verb: str


def user_of(stack: Stack, component: str) -> str:
    return kube_cluster(stack).identities[component].username


def refusals(stack: Stack, component: str, *, since: int) -> set[tuple[str, str, str]]:
    """(verb, resource, subresource) of every request of `component` refused by the authorizer."""
    user = user_of(stack, component)
    return {
        (r.verb, r.resource, r.subresource)
        for r in audit_log(stack).requests(since=since)
        if r.user == user and r.code == 403
    }


def cluster_roles(stack: Stack, component: str) -> list[Obj]:
    """The chart's ClusterRoles bound cluster-wide to `component`'s ServiceAccount, as the cluster has them
    now (the resizer's are two: its reads and its writes)."""
    identity = kube_cluster(stack).identities[component]
    names = {
        binding["roleRef"]["name"]
        for binding in stack.client.list("ClusterRoleBinding")
        for subject in binding.get("subjects") or []
        if (subject.get("name"), subject.get("namespace")) == (identity.service_account, identity.namespace)
    }
    assert names, f"no ClusterRole bound to {identity.username}"
    return [stack.client.get("ClusterRole", name) for name in sorted(names)]


def grants(role: Obj, rule: Rule) -> bool:
    return any(
        rule.api_group in granted.get("apiGroups", [])
        and rule.resource in granted.get("resources", [])
        and rule.verb in granted["verbs"]
        for granted in role["rules"]
    )


@contextlib.contextmanager
def without(stack: Stack, rule: Rule) -> Iterator[None]:
    """The live ClusterRole of `rule.component` that grants `rule` without that one verb, restored
    afterwards."""
    granting = [role for role in cluster_roles(stack, rule.component) if grants(role, rule)]
    assert len(granting) == 1, f"the chart grants {rule} in {len(granting)} ClusterRoles, not one"
    current = granting[0]
    original = {**current, "metadata": {"name": current["metadata"]["name"]}}
    trimmed = copy.deepcopy(original)
    for granted in trimmed["rules"]:
        if (
            rule.api_group in granted.get("apiGroups", [])
            and rule.resource in granted.get("resources", [])
            and rule.verb in granted["verbs"]
        ):
            granted["verbs"] = [v for v in granted["verbs"] if v != rule.verb]
    trimmed["rules"] = [r for r in trimmed["rules"] if r["verbs"]]
    stack.client.create_or_replace(trimmed)
    try:
        yield
    finally:
        stack.client.create_or_replace(original)


def create_jobset(stack: Stack, namespace: str, name: str, strategy: str) -> None:
    stack.client.create(
        exclusive_jobset(name, jobs=JOBS, pods_per_job=PODS, strategy=strategy, namespace=namespace)
    )


def test_nothing_the_processes_ask_for_is_refused(kube_stack: Stack, namespace: str) -> None:
    since = audit_log(kube_stack).mark()
    for strategy in (Strategy.ELASTIC, Strategy.SCHEDULING_GATE):
        create_jobset(kube_stack, namespace, strategy, strategy)
        eventually(
            lambda: running_pods(kube_stack, namespace) == JOBS * PODS,
            f"{strategy} running",
            90,
            ignoring=(KubeError,),
        )
        kube_stack.client.delete("JobSet", strategy, namespace=namespace)
        eventually(lambda: not pods_of(kube_stack, namespace), "pods gone", 90, ignoring=(KubeError,))
    assert refusals(kube_stack, "webhook", since=since) == set()
    assert refusals(kube_stack, "resizer", since=since) == set()


def test_without_patch_on_jobs_the_resizer_cannot_resize(kube_stack: Stack, namespace: str) -> None:
    since = audit_log(kube_stack).mark()
    with without(kube_stack, Rule("resizer", "batch", "jobs", "patch")):
        create_jobset(kube_stack, namespace, "stuck", Strategy.ELASTIC)
        eventually(
            lambda: ("patch", "jobs", "") in refusals(kube_stack, "resizer", since=since),
            "the resizer's Job patch refused",
            60,
        )
        jobs = kube_stack.client.list("Job", namespace=namespace)
        assert [j["spec"]["completions"] for j in jobs] == [1] * JOBS  # still shrunk
    eventually(  # the rule back: the resizer's retries go through
        lambda: all(
            j["metadata"]["labels"][RESIZE_LABEL] == "done"
            for j in kube_stack.client.list("Job", namespace=namespace)
        ),
        "every Job resized once the rule is back",
        90,
        ignoring=(KubeError,),
    )


def test_without_patch_on_pods_gated_followers_stay_gated(kube_stack: Stack, namespace: str) -> None:
    since = audit_log(kube_stack).mark()
    nodes = [node["metadata"]["name"] for node in kube_stack.client.list("Node")]
    with without(kube_stack, Rule("resizer", "", "pods", "patch")):
        set_taint(kube_stack, nodes, HOLD)  # no leader binds before every follower exists, gated
        try:
            create_jobset(kube_stack, namespace, "gated", Strategy.SCHEDULING_GATE)
            eventually(
                lambda: (
                    sum(1 for p in pods_of(kube_stack, namespace) if p["spec"].get("schedulingGates"))
                    == JOBS * (PODS - 1)
                ),
                "every follower created gated",
                60,
                ignoring=(KubeError,),
            )
        finally:
            set_taint(kube_stack, nodes, None)
        eventually(
            lambda: ("patch", "pods", "") in refusals(kube_stack, "resizer", since=since),
            "the resizer's follower release refused",
            60,
        )
        assert running_pods(kube_stack, namespace) < JOBS * PODS


def test_without_get_on_jobsets_child_jobs_are_not_shrunk(kube_stack: Stack, namespace: str) -> None:
    since = audit_log(kube_stack).mark()
    with without(kube_stack, Rule("webhook", "jobset.x-k8s.io", "jobsets", "get")):
        create_jobset(kube_stack, namespace, "unread", Strategy.ELASTIC)
        eventually(
            lambda: len(kube_stack.client.list("Job", namespace=namespace)) == JOBS,
            "the child Jobs created",
            60,
            ignoring=(KubeError,),
        )
    assert ("get", "jobsets", "") in refusals(kube_stack, "webhook", since=since)
    for job in kube_stack.client.list("Job", namespace=namespace):
        # the JobSet's startup order cannot be read: the safe fallback, never a shrink JobSet might misjudge
        assert job["spec"]["completions"] == PODS
        assert job["spec"]["template"]["metadata"]["annotations"][STRATEGY_ANNOTATION] == "gate"


def test_without_create_on_events_the_resize_happens_without_its_event(
    kube_stack: Stack, namespace: str
) -> None:
    """An Event the API server refuses never holds up, nor fails, the resize it reports."""
    since = audit_log(kube_stack).mark()
    with without(kube_stack, Rule("resizer", "events.k8s.io", "events", "create")):
        create_jobset(kube_stack, namespace, "unreported", Strategy.ELASTIC)
        eventually(
            lambda: running_pods(kube_stack, namespace) == JOBS * PODS,
            "every Job resized and running",
            90,
            ignoring=(KubeError,),
        )
        assert ("create", "events", "") in refusals(kube_stack, "resizer", since=since)
    events = kube_stack.client.list("Event", namespace=namespace)
    assert [e for e in events if e.get("reportingComponent") == "exclusive-placement.io/resizer"] == []


@pytest.mark.skipif(KUBECTL is None, reason="kubectl is not installed on this machine")
def test_without_get_on_kueue_queues_a_queued_exclusive_jobset_is_admitted_with_a_warning(
    kube_stack: Stack, namespace: str
) -> None:
    """The webhook reads the LocalQueue a queued exclusive JobSet names (this stack runs no Kueue: with the
    rule, the read finds nothing, which says nothing); refused, the JobSet is admitted with the warning."""
    jobset = exclusive_jobset("queued", jobs=JOBS, pods_per_job=PODS, strategy="elastic", namespace=namespace)
    jobset["metadata"]["labels"] = {KUEUE_QUEUE_NAME_LABEL: "user-queue"}
    manifest = yaml.safe_dump(jobset)
    unread = f"Warning: exclusive placement: could not read Kueue's LocalQueue {namespace}/user-queue"

    def dry_run_warnings() -> str:
        result = kubectl(kube_stack, "create", "--dry-run=server", "-f", "-", stdin=manifest)
        assert result.returncode == 0, result.stderr
        return result.stderr

    assert unread not in dry_run_warnings()
    since = audit_log(kube_stack).mark()
    with without(kube_stack, Rule("webhook", "kueue.x-k8s.io", "localqueues", "get")):
        # the authorizer sees the trimmed ClusterRole through its informer; until then the read finds nothing
        eventually(lambda: unread in dry_run_warnings(), "the JobSet admitted with the warning", 30)
    assert ("get", "localqueues", "") in refusals(kube_stack, "webhook", since=since)
