"""What the resizer's informers keep: the caches every reconciler reads (and none owns)."""

from __future__ import annotations

from dataclasses import dataclass

from kubekit.informer import Store
from placement.constants import RESIZE_LABEL, RESIZE_PENDING
from placement.objects import Obj, is_finished_job, labels_of, owner_job_key
from placement.retire import pins_followers
from placement.rewind import is_resized, is_suspended


def is_pending_job(job: Obj) -> bool:
    return labels_of(job).get(RESIZE_LABEL) == RESIZE_PENDING


def is_finished_pinning_job(job: Obj) -> bool:
    """A Job still labelled `pin-followers` that has finished: one to retire from the follower policy's
    params (`placement.retire`)."""
    return pins_followers(job) and is_finished_job(job)


def is_suspended_resized_job(job: Obj) -> bool:
    """A Job the resizer resized that is suspended: one to rewind to size 1 (`placement.rewind`)."""
    return is_resized(job) and is_suspended(job)


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
    finished_pinning: Store
    """Finished Jobs still labelled `pin-followers` (`is_finished_pinning_job`), projected to
    `placement.cached_fields.PINNING_JOB_FIELDS`, by `namespace/name`: the label is to come off."""
    suspended_resized: Store
    """Suspended Jobs labelled `resize: done` (`is_suspended_resized_job`), projected to
    `placement.cached_fields.REWIND_JOB_FIELDS`, by `namespace/name`: to go back to size 1."""


def new_caches() -> Caches:
    return Caches(
        jobs=Store(),
        leaders=Store(index=owner_job_key),
        followers=Store(index=owner_job_key),
        nodes=Store(),
        gang_jobs=Store(),
        holders=Store(),
        finished_pinning=Store(),
        suspended_resized=Store(),
    )
