"""JobSet's pod webhooks (kubernetes-sigs/jobset `pkg/webhooks/pod_webhook.go`), served in-process.

A JobSet install registers `mpod.kb.io` (in `jobset-mutating-webhook-configuration`) and `vpod.kb.io` (in
`jobset-validating-webhook-configuration`): CREATE of pods carrying the `jobset.sigs.k8s.io/jobset-name`
label, failurePolicy Fail, sideEffects None. kubesim's API server calls them at exactly that place in its
admission chain (`WebhookServing.serve_in_process`).

- mutating (podWebhook.Default): JobSet pods (jobset-name annotation) not in node-selector mode get the
  `jobset.sigs.k8s.io/priority` label from spec.priority; with exclusive-topology, the leader (completion
  index 0) gets the required pod affinity + priority-scoped anti-affinity, and a follower gets a
  nodeSelector on the leader's domain once the leader is scheduled (silently nothing before).
- validating (podWebhook.ValidateCreate): an exclusive-topology follower is denied while its nodeSelector
  lacks the topology key or while its leader is not scheduled.

Both read pods and nodes from the JobSet manager's cache only (its own informers, which lag the API server
by the watch delivery), looking the leader up by the `podName` index as JobSet does. Denials carry JobSet's
messages with controller-runtime's status (403 Forbidden; a node missing from the cache is 404 NotFound).
Calls and denials are counted in `Stats.jobset_webhook_calls` / `jobset_webhook_denied`.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from kubesim.interface import WebhookHandler, WebhookReply
from kubesim.stats import Stats
from placement.constants import JOBSET_NAME_LABEL

from .informer import Informer
from .jobset_constants import (
    MUTATING_CONFIGURATION,
    MUTATING_POD_WEBHOOK,
    VALIDATING_CONFIGURATION,
    VALIDATING_POD_WEBHOOK,
)
from .jobset_placement import (
    LEADER_NOT_SCHEDULED,
    NodeNotFound,
    PlacementError,
    add_exclusive_affinities,
    add_priority_label,
    exclusive_topology,
    follower_selector_problem,
    in_namespace,
    index_pod_name,
    is_jobset_pod,
    is_leader_pod,
    is_scheduled,
    leader_pod_name,
    node_topology,
    select_leader,
    set_follower_node_selector,
    uses_node_selector_strategy,
)
from .objects import Obj

log = logging.getLogger(__name__)

POD_NAME_INDEX = "podName"
"""controllers.PodNameKey: pods by name without the random suffix (exclusive-placement pods only)."""


def _pod_rules() -> list[dict[str, Any]]:
    return [{"apiGroups": [""], "apiVersions": ["v1"], "operations": ["CREATE"], "resources": ["pods"]}]


def _pod_webhook(name: str) -> dict[str, Any]:
    """A pod webhook entry as config/components/webhook (with its objectSelector patch) declares it."""
    return {
        "name": name,
        "admissionReviewVersions": ["v1"],
        "failurePolicy": "Fail",
        "sideEffects": "None",
        "rules": _pod_rules(),
        "objectSelector": {"matchExpressions": [{"key": JOBSET_NAME_LABEL, "operator": "Exists"}]},
    }


def pod_webhook_configurations() -> list[tuple[dict[str, Any], bool]]:
    """(configuration, mutating) for JobSet's pod webhooks; its JobSet webhooks are not modelled."""
    mutating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "MutatingWebhookConfiguration",
        "metadata": {"name": MUTATING_CONFIGURATION},
        "webhooks": [_pod_webhook(MUTATING_POD_WEBHOOK)],
    }
    validating = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingWebhookConfiguration",
        "metadata": {"name": VALIDATING_CONFIGURATION},
        "webhooks": [_pod_webhook(VALIDATING_POD_WEBHOOK)],
    }
    return [(mutating, True), (validating, False)]


def _denied(error: PlacementError) -> WebhookReply:
    """controller-runtime: a plain error is Denied (403 Forbidden); an API status error keeps its own."""
    if isinstance(error, NodeNotFound):
        status = {
            "code": 404,
            "reason": "NotFound",
            "message": error.message,
            "details": {"name": error.name, "kind": "nodes"},
        }
    else:
        status = {"code": 403, "reason": "Forbidden", "message": error.message}
    return WebhookReply(allowed=False, status=status)


class JobSetPodWebhooks:
    """JobSet's podWebhook on the JobSet manager's pod and node caches."""

    def __init__(self, *, pods: Informer, nodes: Informer, stats: Stats) -> None:
        self._pods = pods
        self._nodes = nodes
        self._stats = stats
        pods.add_index(POD_NAME_INDEX, lambda pod: in_namespace(index_pod_name(pod), pod))

    def handlers(self) -> dict[str, WebhookHandler]:
        return {MUTATING_POD_WEBHOOK: self.mutate, VALIDATING_POD_WEBHOOK: self.validate}

    async def mutate(self, pod: Obj) -> WebhookReply:
        self._stats.jobset_webhook_calls += 1
        await self._cache_synced()
        try:
            self.default(pod)
        except PlacementError as error:
            self._stats.jobset_webhook_denied += 1
            return _denied(error)
        return WebhookReply(obj=pod)  # the admission chain compares it with what it sent

    async def validate(self, pod: Obj) -> WebhookReply:
        self._stats.jobset_webhook_calls += 1
        await self._cache_synced()
        try:
            self.validate_create(pod)
        except PlacementError as error:
            self._stats.jobset_webhook_denied += 1
            return _denied(error)
        return WebhookReply()

    async def _cache_synced(self) -> None:
        """controller-runtime's cache reader blocks until the informer has synced."""
        if not (self._pods.synced.is_set() and self._nodes.synced.is_set()):
            await asyncio.gather(self._pods.synced.wait(), self._nodes.synced.wait())

    def default(self, pod: Obj) -> None:
        """podWebhook.Default on `pod` in place. Raises PlacementError (the webhook's denial) only when
        the leader's node cannot give its domain."""
        if not is_jobset_pod(pod) or uses_node_selector_strategy(pod):
            return
        add_priority_label(pod)
        topology_key = exclusive_topology(pod)
        if topology_key is not None:
            if is_leader_pod(pod):
                add_exclusive_affinities(pod)
            else:
                self._pin_follower(pod, topology_key)

    def _pin_follower(self, pod: Obj, topology_key: str) -> None:
        """setNodeSelector: no leader (or several) or an unscheduled one leaves the pod for the validating
        webhook to deny; a scheduled leader's node gives the follower's nodeSelector."""
        try:
            leader = self.leader_for_follower(pod)
        except PlacementError as error:
            log.debug("jobset pod webhook: no leader for follower: %s", error.message)
            return
        if not is_scheduled(leader):
            return
        node_name = str(leader["spec"]["nodeName"])
        node = self._nodes.get(node_name)
        if node is None:
            raise NodeNotFound(node_name)
        set_follower_node_selector(pod, topology_key, node_topology(node, topology_key))

    def validate_create(self, pod: Obj) -> None:
        """podWebhook.ValidateCreate: raises PlacementError (upstream's message) to deny."""
        if not is_jobset_pod(pod) or uses_node_selector_strategy(pod):
            return
        topology_key = exclusive_topology(pod)
        if topology_key is None or is_leader_pod(pod):
            return
        problem = follower_selector_problem(pod, topology_key)
        if problem is not None:
            raise PlacementError(problem)
        if not is_scheduled(self.leader_for_follower(pod)):
            raise PlacementError(LEADER_NOT_SCHEDULED)

    def leader_for_follower(self, pod: Obj) -> Obj:
        """leaderPodForFollower: the follower's leader from the cache's podName index."""
        name = leader_pod_name(pod)
        namespace = str((pod.get("metadata") or {}).get("namespace") or "")
        candidates = self._pods.by_index(POD_NAME_INDEX, f"{namespace}/{name}")
        return select_leader(pod, name, candidates)
