"""The resizer's eight informers: what each lists and watches, keeps, projects and tells its handler.

- `pending-jobs`: Jobs labelled `resize: pending`, kept while pending, into `caches.jobs`;
  `JobKeysHandler` of `resize`.
- `leaders`: pods labelled `role: leader`, projected to `LEADER_POD_FIELDS`, into `caches.leaders`;
  `LeaderHandler`.
- `unbound-followers`: unbound pods labelled `role: follower`, kept while gated or pinned, into
  `caches.followers`; `FollowerHandler`.
- `nodes`: every Node, projected to `QUEUE_NODE_FIELDS`, into `caches.nodes`; any change looks at the
  all-or-nothing queue again (`OnAnyChange`).
- `gang-jobs`: Jobs labelled `all-or-nothing=true` (the webhook's record), projected to `GANG_JOB_FIELDS`,
  into `caches.gang_jobs`; `GangJobHandler`.
- `domain-holders`: bound pods carrying the job-key label, projected to `HOLDER_POD_FIELDS`, into
  `caches.holders`, in every namespace even with `namespace` set (a leader's anti-affinity keeps it out of
  a domain held by an exclusive pod of any namespace, so the queue counts them all); any change looks at
  the all-or-nothing queue again.
- `finished-pinning-jobs`: Jobs labelled `pin-followers=true`, kept once finished, projected to
  `PINNING_JOB_FIELDS`, into `caches.finished_pinning`; `JobKeysHandler` of `retire`.
- `suspended-resized-jobs`: Jobs labelled `resize: done`, kept while suspended, projected to
  `REWIND_JOB_FIELDS`, into `caches.suspended_resized`; `JobKeysHandler` of `rewind`.

With `namespace` set, each informer lists and watches that namespace only, but `nodes` (cluster-scoped)
and `domain-holders` (every namespace): the resizer reads pods cluster-wide and Nodes, and reads Jobs and
writes only in `namespace` (the chart's `resizer.namespace` binds its writes there alone). The namespaced
ones leave out the namespaces the webhooks are exempt from (a field selector).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from kubekit.client import Resource
from kubekit.informer import Handler, Informer, ListWatch, OnAnyChange, Store, without_managed_fields
from kubekit.projection import FieldProjection
from placement.cached_fields import (
    GANG_JOB_FIELDS,
    HOLDER_POD_FIELDS,
    LEADER_POD_FIELDS,
    PINNING_JOB_FIELDS,
    QUEUE_NODE_FIELDS,
    REWIND_JOB_FIELDS,
)
from placement.constants import (
    ALL_OR_NOTHING_LABEL,
    JOB_KEY_LABEL,
    PIN_FOLLOWERS,
    PIN_FOLLOWERS_LABEL,
    RESIZE_DONE,
    RESIZE_LABEL,
    RESIZE_PENDING,
    ROLE_FOLLOWER,
    ROLE_LABEL,
    ROLE_LEADER,
)
from placement.objects import Obj
from placement.resize import follower_to_watch
from resizer.caches import is_finished_pinning_job, is_pending_job, is_suspended_resized_job
from resizer.handlers import (
    FollowerHandler,
    GangJobHandler,
    JobKeysHandler,
    LeaderHandler,
)
from resizer.manager import Resizer

UNBOUND_PODS = "spec.nodeName="
"""Gated pods are never bound, and a pin is only repaired before the follower binds: watching only unbound
followers skips most follower traffic."""
BOUND_PODS = "spec.nodeName!="
"""Only a bound pod holds a domain."""


def _ignore_restart(_informer: str, _reason: str) -> None:
    return None


def outside(exempt_namespaces: Sequence[str], *selectors: str) -> str | None:
    """A field selector: `selectors`, and none of the exempt namespaces (the API server filters them out,
    so the resizer never sees, let alone acts on, what is in them)."""
    excluded = [f"metadata.namespace!={namespace}" for namespace in exempt_namespaces]
    return ",".join([*selectors, *excluded]) or None


def resizer_informers(
    source: Callable[[str], ListWatch],
    resizer: Resizer,
    *,
    namespace: str | None,
    exempt_namespaces: Sequence[str] = (),
    on_restart: Callable[[str, str], None] = _ignore_restart,
) -> list[Informer]:
    """The informers filling `resizer.caches`; each lists and watches through `source(its name)` (the API
    client in the app, a test's `tests.support.fake_api.WatchFeed`), in `namespace` (None: all) but Nodes
    and domain holders (all namespaces), never in `exempt_namespaces` (the namespaces the webhooks are
    exempt from)."""
    caches = resizer.caches

    def informer(
        resource: Resource,
        name: str,
        label_selector: str | None,
        handler: Handler,
        *,
        store: Store,
        keep: Callable[[Obj], bool] = lambda _obj: True,
        field_selector: str | None = None,
        project: Callable[[Obj], Obj] = without_managed_fields,
        every_namespace: bool = False,
    ) -> Informer:
        return Informer(
            source(name),
            resource,
            name=name,
            namespace=None if every_namespace else namespace,
            label_selector=label_selector,
            field_selector=field_selector,
            handler=handler,
            keep=keep,
            project=project,
            store=store,
            on_restart=on_restart,
        )

    return [
        informer(
            "jobs",
            "pending-jobs",
            f"{RESIZE_LABEL}={RESIZE_PENDING}",
            JobKeysHandler(resizer.resize),
            keep=is_pending_job,
            store=caches.jobs,
            field_selector=outside(exempt_namespaces),
        ),
        informer(
            "pods",
            "leaders",
            f"{ROLE_LABEL}={ROLE_LEADER}",
            LeaderHandler(resizer),
            store=caches.leaders,
            project=FieldProjection(LEADER_POD_FIELDS),
            field_selector=outside(exempt_namespaces),
        ),
        informer(
            "pods",
            "unbound-followers",
            f"{ROLE_LABEL}={ROLE_FOLLOWER}",
            FollowerHandler(resizer),
            keep=follower_to_watch,
            store=caches.followers,
            field_selector=outside(exempt_namespaces, UNBOUND_PODS),
        ),
        informer(
            "nodes",
            "nodes",
            None,
            OnAnyChange(resizer.enqueue_gangs),  # a change can free or take a domain of the queue
            store=caches.nodes,
            project=FieldProjection(QUEUE_NODE_FIELDS),
            every_namespace=True,  # cluster-scoped
        ),
        informer(
            "jobs",
            "gang-jobs",
            f"{ALL_OR_NOTHING_LABEL}=true",
            GangJobHandler(resizer),
            store=caches.gang_jobs,
            project=FieldProjection(GANG_JOB_FIELDS),
            field_selector=outside(exempt_namespaces),
        ),
        informer(
            "pods",
            "domain-holders",
            JOB_KEY_LABEL,
            OnAnyChange(resizer.enqueue_gangs),  # a bound or finished holder takes or frees a domain
            store=caches.holders,
            project=FieldProjection(HOLDER_POD_FIELDS),
            field_selector=outside(exempt_namespaces, BOUND_PODS),
            every_namespace=True,  # a holder in any namespace keeps a leader out of its domain
        ),
        informer(
            "jobs",
            "finished-pinning-jobs",
            f"{PIN_FOLLOWERS_LABEL}={PIN_FOLLOWERS}",
            JobKeysHandler(resizer.retire),
            keep=is_finished_pinning_job,
            store=caches.finished_pinning,
            project=FieldProjection(PINNING_JOB_FIELDS),
            field_selector=outside(exempt_namespaces),
        ),
        informer(
            "jobs",
            "suspended-resized-jobs",
            f"{RESIZE_LABEL}={RESIZE_DONE}",
            JobKeysHandler(resizer.rewind),
            keep=is_suspended_resized_job,
            store=caches.suspended_resized,
            project=FieldProjection(REWIND_JOB_FIELDS),
            field_selector=outside(exempt_namespaces),
        ),
    ]
