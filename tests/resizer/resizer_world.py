"""One resizer, as the resizer's unit tests drive it: its API calls made by the real client
(`kubekit.client.Kube`) to the fake API server (`tests.support.fake_api.FakeKubeApi`), its caches filled
by its own informers (`resizer.informers`) over watch feeds the test pushes events into
(`tests.support.fake_api.WatchFeed`: a test decides when each informer hears of a change), its
controllers worked key by key."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime
from types import TracebackType
from typing import Any, Self

from kubekit.keys import object_key
from kubekit.workqueue import WorkQueue
from placement.constants import (
    ALL_OR_NOTHING_GATE,
    ALL_OR_NOTHING_LABEL,
    GKE_NODEPOOL_LABEL,
    JOB_KEY_LABEL,
    LEADER_DOMAIN_ANNOTATION,
    PIN_FOLLOWERS,
    PIN_FOLLOWERS_LABEL,
    RELEASED_AT_ANNOTATION,
    RESIZE_DONE,
    RESIZE_LABEL,
    TOPOLOGY_ANNOTATION,
)
from placement.objects import job_key
from resizer.caches import new_caches
from resizer.informers import resizer_informers
from resizer.manager import Resizer
from resizer.metrics import Metrics
from tests.resizer.resizer_fakes import FakeClock, Recording
from tests.support.builders import make_job, make_node, make_pod
from tests.support.fake_api import FakeKubeApi, WatchFeed
from tests.support.fixtures import kube_of
from tests.support.metrics import RESIZER_PREFIX, sample

Obj = dict[str, Any]

POOL = GKE_NODEPOOL_LABEL
NS = "team"
T0 = datetime(2026, 5, 1, 10, tzinfo=UTC).timestamp()
GANG_TIMEOUT = 60.0
KEY = f"{NS}/train-0"
"""The Job of `job()` and `pod()`."""
ROUTES = {
    "jobs": ("pending-jobs", "jobs"),
    "leaders": ("leaders", "pods"),
    "followers": ("unbound-followers", "pods"),
    "nodes": ("nodes", "nodes"),
    "gang_jobs": ("gang-jobs", "jobs"),
    "holders": ("domain-holders", "pods"),
    "pinning": ("finished-pinning-jobs", "jobs"),
    "suspended": ("suspended-resized-jobs", "jobs"),
}
"""A test's name for each informer: (the informer, the kind of object it watches)."""


def stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


# --- one Job, train-0 -------------------------------------------------------------------------------------


def job() -> Obj:
    """train-0 as the webhook leaves it: 1/1, to grow to 8."""
    return make_job("train-0", NS).uid("job-uid").indexed(1).pending(8).obj()


def resized_job(name: str = "train-0", *, finished: str | None = "Complete", uid: str = "") -> Obj:
    """Job `name` as the resizer leaves it on the policy path (resized to 8, its leader's domain and the
    pin-followers label recorded), with the terminal condition `finished` (None: running)."""
    built = (
        make_job(name, NS)
        .uid(uid or f"{name}-uid")
        .indexed(8)
        .label(RESIZE_LABEL, RESIZE_DONE)
        .label(PIN_FOLLOWERS_LABEL, PIN_FOLLOWERS)
        .annotation(LEADER_DOMAIN_ANNOTATION, "pool-2")
    )
    return (built.condition(finished) if finished else built).obj()


def pod(index: int, node: str | None = None, gated: bool = False) -> Obj:
    """Completion index `index` of train-0, exclusive on node pools."""
    built = (
        make_pod(f"train-0-{index}", NS).owned_by("train-0", "job-uid").index(index).topology(POOL).node(node)
    )
    return (built.gated() if gated else built).obj()


# --- all-or-nothing JobSets of 3 Jobs ------------------------------------------------------------------


def gang_pod(
    jobset: str,
    job: int,
    index: int = 0,
    *,
    gate: str | None = ALL_OR_NOTHING_GATE,
    queued_at: float = T0,
    released_at: float | None = None,
    size: int = 3,
) -> Obj:
    """Completion index `index` of Job `<jobset>-w-<job>` of an all-or-nothing JobSet of `size` Jobs (a
    leader carries the all-or-nothing gate until the queue releases it, at `released_at`)."""
    name = f"{jobset}-w-{job}"
    built = (
        make_pod(f"{name}-{index}", NS)
        .uid(f"{name}-{index}-uid")
        .created(stamp(T0))
        .owned_by(name, f"{name}-uid")
        .index(index)
        .topology(POOL, TOPOLOGY_ANNOTATION)
        .label(JOB_KEY_LABEL, job_key(NS, name))
        .in_gang(jobset, size, queued_at=stamp(queued_at))
    )
    if released_at is not None:
        built.annotation(RELEASED_AT_ANNOTATION, stamp(released_at))
    return (built.gated(gate) if gate else built).obj()


def gang_job(jobset: str, job: int, *, queued_at: float = T0, size: int = 3) -> Obj:
    """Job `<jobset>-w-<job>` of an all-or-nothing JobSet of `size` (created at `queued_at`), as the webhook
    admitted it, elastic: 1/1, to grow to 4."""
    name = f"{jobset}-w-{job}"
    return (
        make_job(name, NS)
        .uid(f"{name}-uid")
        .indexed(1)
        .pending(4)
        .annotation(TOPOLOGY_ANNOTATION, POOL)
        .in_gang(jobset, size, queued_at=stamp(queued_at))
        .label(ALL_OR_NOTHING_LABEL, "true")
        .controlled_by_jobset(jobset, f"{jobset}-uid")
        .obj()
    )


# --- the world -----------------------------------------------------------------------------------------


class Leading:
    """The Lease, as far as a test is concerned: held or not."""

    def __init__(self, leader: bool = True) -> None:
        self.leader = leader

    def is_leader(self) -> bool:
        return self.leader


class World:
    def __init__(
        self,
        *,
        leader: bool = True,
        dry_run: bool = False,
        nodes: Mapping[str, str] | None = None,
        pin_followers: bool = True,
        listed: Mapping[str, Sequence[Obj]] | None = None,
    ) -> None:
        """`nodes`: node name to node pool, in the API and in the node informer's cache (default: node-5
        in pool-2). `listed`: objects in the API before the resizer starts, by route: its informers' first
        list returns them (a resizer started after they changed)."""
        self.api = FakeKubeApi().start()
        self.kube = kube_of(self.api)
        self.caches = new_caches()
        self.metrics = Metrics()
        self.leading = Leading(leader)
        self.epoch = FakeClock(T0)
        self.recorder = Recording()
        self.resizer = Resizer(
            self.kube,
            self.caches,
            self.metrics,
            self.leading,
            dry_run=dry_run,
            recorder=self.recorder,
            new_queue=lambda: WorkQueue(base_delay=0.01),
            wall_clock=lambda: stamp(self.epoch.now),
            epoch=self.epoch,
            gang_timeout=GANG_TIMEOUT,
            pin_followers=pin_followers,
        )
        listed = listed or {}
        for route, objects in listed.items():
            for obj in objects:
                self.api.put(ROUTES[route][1], obj)
        self.feeds = {
            informer: WatchFeed(listed.get(route, ())) for route, (informer, _kind) in ROUTES.items()
        }
        self.informers = resizer_informers(self.feeds.__getitem__, self.resizer, namespace=None)
        for informer in self.informers:
            informer.start()
        for informer in self.informers:
            assert informer.synced.wait(10), f"informer {informer.name} never listed"
        for name, pool in ({"node-5": "pool-2"} if nodes is None else nodes).items():
            self.upsert("nodes", make_node(name).label(POOL, pool).obj())

    def close(self) -> None:
        for informer in self.informers:
            informer.stop()
        for informer in self.informers:
            informer.join(10)
        self.kube.close()
        self.api.close()

    def __enter__(self) -> Self:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.close()

    # --- the API and the caches ------------------------------------------------------------------------

    def add_job(self, obj: Obj) -> Obj:
        """Into the API and the pending cache, without telling the resizer (a test then works the key)."""
        stored = self.api.put("jobs", obj)
        self.caches.jobs.upsert(stored)
        return stored

    def add_pod(self, obj: Obj, store: str) -> Obj:
        stored = self.api.put("pods", obj)
        getattr(self.caches, store).upsert(stored)
        return stored

    def upsert(self, route: str, obj: Obj) -> Obj | None:
        """Into the API, then to the informer `route` as a watch event; what its cache holds now."""
        informer, kind = ROUTES[route]
        existed = self.api.find(kind, obj["metadata"].get("namespace"), obj["metadata"]["name"]) is not None
        stored = self.api.put(kind, obj)
        self.feeds[informer].push("MODIFIED" if existed else "ADDED", stored)
        (cache,) = [each.store for each in self.informers if each.name == informer]
        return cache.get(object_key(stored))

    def gang_leader(
        self, jobset: str, job: int, *, queued_at: float = T0, size: int = 3, **pod: Any
    ) -> Obj | None:
        """Job `<jobset>-w-<job>` as the webhook admitted it (JobSet of `size` created at `queued_at`) into
        the API and the admitted Jobs' cache, and its leader (`gang_pod(..., **pod)`) into the leaders'."""
        self.upsert("gang_jobs", gang_job(jobset, job, queued_at=queued_at, size=size))
        return self.upsert("leaders", gang_pod(jobset, job, queued_at=queued_at, size=size, **pod))

    def deliver_late(self, route: str, obj: Obj) -> None:
        """A watch event to the informer `route` carrying `obj` as it was before a later change (a late
        event: the API is not touched)."""
        informer, _kind = ROUTES[route]
        self.feeds[informer].push("MODIFIED", obj)

    def leave(self, route: str, obj: Obj) -> None:
        """`obj` no longer matches the label selector of the informer `route` (a label removed): its watch
        says DELETED; the API keeps the object."""
        informer, kind = ROUTES[route]
        meta = obj["metadata"]
        self.feeds[informer].push("DELETED", self.api.stored(kind, meta.get("namespace"), meta["name"]))

    def delete(self, route: str, obj: Obj) -> None:
        """Out of the API, then to the informer `route` as a DELETED watch event."""
        informer, kind = ROUTES[route]
        gone = self.api.delete(kind, obj)
        self.feeds[informer].push("DELETED", obj if gone is None else gone)

    # --- the controllers -------------------------------------------------------------------------------

    def drain(self, rounds: int = 1000) -> None:
        """Work every controller's keys as its workers do until none is queued, waiting for the keys that
        are retried with backoff (not for the all-or-nothing queue's wake-up at a time-out)."""
        controllers = self.resizer.controllers
        for _ in range(rounds):
            if any([controller.process_next(0) is not None for controller in controllers]):
                continue
            retrying = [controller for controller in controllers if controller.queue.footprint()["failures"]]
            if not any([controller.process_next(1.0) is not None for controller in retrying]):
                return
        raise AssertionError(f"the controllers still had work after {rounds} rounds")

    def calls(self) -> list[tuple[str, str]]:
        """The resizer's API calls so far: (verb, `resource/name`), `pods/status/name` for a status write."""
        return [(call.verb, call.what) for call in self.api.calls]

    def metric(self, name: str, **labels: str) -> float:
        return sample(self.metrics.registry, f"{RESIZER_PREFIX}_{name}", **labels)


MakeWorld = Callable[..., World]
"""The `make_world` fixture (tests/resizer/conftest.py): a `World` closed after the test."""
