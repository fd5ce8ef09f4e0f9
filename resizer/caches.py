"""What the resizer's informers keep: the caches every reconciler reads (and none owns)."""

from __future__ import annotations

from dataclasses import dataclass

from kubekit.informer import Store
from placement.constants import RESIZE_LABEL, RESIZE_PENDING
from placement.objects import Obj, labels_of, owner_job_key


def is_pending_job(job: Obj) -> bool:
    return labels_of(job).get(RESIZE_LABEL) == RESIZE_PENDING


@dataclass
class Caches:
    jobs: Store
    """Jobs labelled `resize: pending`, by `namespace/name`."""
    leaders: Store
    """Leader pods, indexed by their Job's `namespace/name`."""
    followers: Store
    """Unbound followers carrying our scheduling gate or pinned to a domain, indexed by their Job's
    `namespace/name` (`placement.resize.follower_to_watch`)."""
    nodes: Store
    """Nodes, projected to name, labels and spec.unschedulable (`placement.cached_fields.QUEUE_NODE_FIELDS`):
    the free domains of the all-or-nothing queue, and the leaders' domains."""
    gang_jobs: Store
    """Jobs the webhook admitted into an all-or-nothing gang (labelled so; `placement.gang.admitted_gang`),
    by `namespace/name`: the only records the queue trusts of a gang."""
    holders: Store
    """Bound pods carrying the job-key label (`placement.gang.held_nodes`): the domains taken against the
    queue's leaders."""


def new_caches() -> Caches:
    return Caches(
        jobs=Store(),
        leaders=Store(index=owner_job_key),
        followers=Store(index=owner_job_key),
        nodes=Store(),
        gang_jobs=Store(),
        holders=Store(),
    )
