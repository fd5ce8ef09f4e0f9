"""The all-or-nothing admission queue in the reconciler, against the in-memory API (fakes, not mocks):
release a whole JobSet, finish a release cut short, undo a reservation that timed out, grow only whole
JobSets."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from kubekit.projection import FieldProjection
from placement.cached_fields import QUEUE_NODE_FIELDS
from placement.constants import (
    ALL_OR_NOTHING_ANNOTATION,
    ALL_OR_NOTHING_GATE,
    ALL_OR_NOTHING_TIMEOUT_REASON,
    GANG_QUEUED_AT_ANNOTATION,
    GANG_SIZE_ANNOTATION,
    GKE_NODEPOOL_LABEL,
    JOB_COMPLETION_INDEX_ANNOTATION,
    JOBSET_NAME_LABEL,
    JOBSET_RESTART_ATTEMPT_LABEL,
    LEADER_SCHEDULED_GATE,
    RELEASED_AT_ANNOTATION,
    RESIZE_LABEL,
    TARGET_COMPLETIONS_ANNOTATION,
    TARGET_PARALLELISM_ANNOTATION,
    TOPOLOGY_ANNOTATION,
)
from placement.gang import has_gang_gate, parse_time
from placement.resize import has_gate
from resizer.controller import GANG_KEY, Resizer, new_caches
from resizer.metrics import Metrics
from resizer.workqueue import WorkQueue
from tests.resizer.resizer_fakes import FakeClock, FakeKube

Obj = dict[str, Any]
NS = "team"
T0 = 1_800_000_000.0
TIMEOUT = 60.0


def stamp(seconds: float) -> str:
    return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


class Leading:
    def __init__(self) -> None:
        self.leader = True

    def is_leader(self) -> bool:
        return self.leader


def gang_annotations(queued_at: float = T0) -> dict[str, str]:
    return {
        TOPOLOGY_ANNOTATION: GKE_NODEPOOL_LABEL,
        ALL_OR_NOTHING_ANNOTATION: "true",
        GANG_SIZE_ANNOTATION: "3",
        GANG_QUEUED_AT_ANNOTATION: stamp(queued_at),
    }


def labels(jobset: str) -> dict[str, str]:
    return {JOBSET_NAME_LABEL: jobset, JOBSET_RESTART_ATTEMPT_LABEL: "0"}


def pod(
    jobset: str,
    job: int,
    index: int = 0,
    *,
    gate: str | None = ALL_OR_NOTHING_GATE,
    extra: dict[str, str] | None = None,
) -> Obj:
    name = f"{jobset}-w-{job}"
    spec: Obj = {"containers": [{"name": "c"}]}
    if gate:
        spec["schedulingGates"] = [{"name": gate}]
    return {
        "metadata": {
            "name": f"{name}-{index}",
            "namespace": NS,
            "uid": f"{name}-{index}-uid",
            "creationTimestamp": stamp(T0),
            "labels": labels(jobset),
            "annotations": {
                **gang_annotations(),
                JOB_COMPLETION_INDEX_ANNOTATION: str(index),
                **(extra or {}),
            },
            "ownerReferences": [{"kind": "Job", "name": name, "uid": f"{name}-uid", "controller": True}],
        },
        "spec": spec,
        "status": {"phase": "Pending"},
    }


def elastic_job(jobset: str, job: int) -> Obj:
    return {
        "kind": "Job",
        "metadata": {
            "name": f"{jobset}-w-{job}",
            "namespace": NS,
            "uid": f"{jobset}-w-{job}-uid",
            "labels": {RESIZE_LABEL: "pending", **labels(jobset)},
            "annotations": {
                TARGET_COMPLETIONS_ANNOTATION: "4",
                TARGET_PARALLELISM_ANNOTATION: "4",
                **gang_annotations(),
            },
        },
        "spec": {"completionMode": "Indexed", "completions": 1, "parallelism": 1},
    }


class World:
    def __init__(self, pools: int = 4) -> None:
        self.kube = FakeKube()
        self.caches = new_caches()
        self.metrics = Metrics()
        self.leading = Leading()
        self.epoch = FakeClock(T0)
        self.resizer = Resizer(
            self.kube,  # type: ignore[arg-type]
            self.caches,
            WorkQueue(base_delay=0.01),
            self.metrics,
            self.leading,
            wall_clock=lambda: stamp(self.epoch.now),
            epoch=self.epoch,
            gang_timeout=TIMEOUT,
        )
        for i in range(pools):
            node = {"metadata": {"name": f"node-{i}", "labels": {GKE_NODEPOOL_LABEL: f"pool-{i}"}}}
            self.kube.put("nodes", node)
            self.caches.nodes.upsert(FieldProjection(QUEUE_NODE_FIELDS)(node))

    def leader(self, obj: Obj) -> Obj:
        stored = self.kube.put("pods", obj)
        self.caches.leaders.upsert(stored)
        self.resizer.leader_seen(None, stored)
        return stored

    def sync_leaders(self) -> None:
        """What the watch would deliver: the API's leaders into the cache."""
        for (kind, _ns, _name), obj in list(self.kube.objects.items()):
            if kind == "pods" and obj["metadata"]["annotations"][JOB_COMPLETION_INDEX_ANNOTATION] == "0":
                self.caches.leaders.upsert(self.kube.stored("pods", NS, obj["metadata"]["name"]))

    def bind(self, name: str, node: str) -> None:
        stored = self.kube.objects[("pods", NS, name)]
        stored["spec"]["nodeName"] = node
        self.sync_leaders()
        self.resizer.leader_seen(None, self.kube.stored("pods", NS, name))

    def gated(self, jobset: str) -> list[bool]:
        return [has_gang_gate(self.kube.stored("pods", NS, f"{jobset}-w-{job}-0")) for job in range(3)]

    def metric(self, name: str) -> float:
        return self.metrics.registry.get_sample_value(f"exclusive_placement_resizer_{name}") or 0.0


def test_the_queue_releases_one_whole_jobset_and_keeps_the_other_whole_in_line() -> None:
    world = World()
    for job in range(3):
        world.leader(pod("a", job))
        world.leader(pod("b", job, extra={GANG_QUEUED_AT_ANNOTATION: stamp(T0 + 1)}))
    world.resizer.process(GANG_KEY)
    assert (world.gated("a"), world.gated("b")) == ([False] * 3, [True] * 3)
    released = world.kube.stored("pods", NS, "a-w-0-0")
    assert parse_time(released["metadata"]["annotations"][RELEASED_AT_ANNOTATION]) == T0
    assert (world.metric("gang_admissions_total"), world.metric("leader_releases_total")) == (1, 3)
    assert world.metric("gangs_queued") == 1
    world.resizer.process(GANG_KEY)  # a's leaders are promised, not bound: b still waits
    assert world.gated("b") == [True] * 3
    assert world.kube.count("patch") == 3


def test_a_stale_watch_event_cannot_make_a_released_jobset_look_queued_again() -> None:
    """An event older than the gate's removal puts the gated pod back into the cache for a moment; a gate is
    never added back, so the resizer keeps counting those domains as promised."""
    world = World()
    stale = [world.leader(pod("a", job)) for job in range(3)]
    world.leader(pod("b", 0, extra={GANG_QUEUED_AT_ANNOTATION: stamp(T0 + 1)}))
    world.resizer.process(GANG_KEY)
    assert world.gated("a") == [False] * 3
    for old in stale:
        world.caches.leaders.upsert(old)
    world.leader(pod("b", 1, extra={GANG_QUEUED_AT_ANNOTATION: stamp(T0 + 1)}))
    world.leader(pod("b", 2, extra={GANG_QUEUED_AT_ANNOTATION: stamp(T0 + 1)}))
    world.resizer.process(GANG_KEY)
    assert world.gated("b") == [True] * 3
    assert (world.kube.count("patch"), world.metric("gang_admissions_total")) == (3, 1)


def test_a_release_cut_short_by_a_crash_is_finished_without_touching_what_was_done() -> None:
    world = World()
    world.leader(pod("a", 0, gate=None, extra={RELEASED_AT_ANNOTATION: stamp(T0)}))
    for job in (1, 2):
        world.leader(pod("a", job))
    for job in range(3):
        world.leader(pod("b", job, extra={GANG_QUEUED_AT_ANNOTATION: stamp(T0 - 100)}))
    world.resizer.process(GANG_KEY)
    assert (world.gated("a"), world.gated("b")) == ([False] * 3, [True] * 3)
    assert sorted(what for verb, what in world.kube.calls if verb == "patch") == [
        "pods/a-w-1-0",
        "pods/a-w-2-0",
    ]
    assert world.metric("gang_admissions_total") == 0  # resumed, not admitted again
    assert not world.kube.deleted


def test_a_reservation_that_does_not_bind_in_time_is_undone_and_the_next_jobset_goes() -> None:
    world = World()
    for job in range(3):
        world.leader(pod("a", job))
        world.leader(pod("b", job, extra={GANG_QUEUED_AT_ANNOTATION: stamp(T0 + 1)}))
    world.resizer.process(GANG_KEY)
    world.bind("a-w-0-0", "node-0")  # two of a's leaders never bind (their domains were taken, say)
    world.epoch.advance(TIMEOUT - 1)
    world.resizer.process(GANG_KEY)
    assert not world.kube.deleted
    world.epoch.advance(1)
    world.resizer.process(GANG_KEY)
    assert sorted(pod["metadata"]["name"] for pod in world.kube.deleted) == ["a-w-0-0", "a-w-1-0", "a-w-2-0"]
    reasons = {c["reason"] for pod in world.kube.deleted for c in pod["status"]["conditions"]}
    assert reasons == {ALL_OR_NOTHING_TIMEOUT_REASON}
    assert world.metric("gang_timeouts_total") == 1
    for deleted in world.kube.deleted:  # a watch event older than the deletions: no second timeout
        world.caches.leaders.upsert(deleted)
    world.resizer.process(GANG_KEY)
    assert (world.metric("gang_timeouts_total"), world.kube.count("delete")) == (1, 3)
    assert world.gated("b") == [False] * 3  # 3 pools free besides node-0's, which a's leader still holds
    assert world.metric("gang_admissions_total") == 2


def test_an_elastic_job_grows_only_once_every_job_of_its_jobset_has_a_bound_leader() -> None:
    world = World()
    for job in range(3):
        stored = world.kube.put("jobs", elastic_job("a", job))
        world.caches.jobs.upsert(stored)
        world.leader(pod("a", job))
    world.resizer.process(GANG_KEY)
    for job in range(2):
        world.bind(f"a-w-{job}-0", f"node-{job}")
        world.resizer.process(f"{NS}/a-w-{job}")
    assert world.kube.count("patch") == 3  # the three gate removals, no resize
    assert world.metrics.registry.get_sample_value(
        "exclusive_placement_resizer_skips_total", {"reason": "gang-incomplete"}
    )
    world.bind("a-w-2-0", "node-2")
    for job in range(3):
        world.resizer.process(f"{NS}/a-w-{job}")
    assert [world.kube.stored("jobs", NS, f"a-w-{job}")["spec"]["completions"] for job in range(3)] == [
        4,
        4,
        4,
    ]


def test_scheduling_gate_followers_are_released_only_once_the_jobset_is_whole() -> None:
    world = World()
    for job in range(3):
        world.leader(pod("a", job))
    follower = world.kube.put("pods", pod("a", 0, 1, gate=LEADER_SCHEDULED_GATE))
    world.caches.followers.upsert(follower)
    world.resizer.process(GANG_KEY)
    world.bind("a-w-0-0", "node-0")
    world.resizer.process(f"{NS}/a-w-0")
    assert has_gate(world.kube.stored("pods", NS, "a-w-0-1"))
    world.bind("a-w-1-0", "node-1")
    world.bind("a-w-2-0", "node-2")
    world.resizer.process(f"{NS}/a-w-0")
    released = world.kube.stored("pods", NS, "a-w-0-1")
    assert not has_gate(released)
    assert released["spec"]["nodeSelector"] == {GKE_NODEPOOL_LABEL: "pool-0"}


def test_a_standby_replica_releases_nothing() -> None:
    world = World()
    world.leading.leader = False
    for job in range(3):
        world.leader(pod("a", job))
    world.resizer.process(GANG_KEY)
    assert world.gated("a") == [True] * 3
    assert world.kube.count("patch") == 0
