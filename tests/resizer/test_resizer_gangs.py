"""The all-or-nothing admission queue in the reconciler, against the in-memory API (fakes, not mocks):
release a whole JobSet, finish a release cut short, undo a reservation that timed out, grow only whole
JobSets."""

from __future__ import annotations

from collections.abc import Callable

from kubekit.events import EventType
from placement.constants import (
    JOB_KEY_LABEL,
    LEADER_SCHEDULED_GATE,
    RELEASED_AT_ANNOTATION,
    ROLE_LABEL,
    ROLE_LEADER,
)
from placement.gang import has_gang_gate, parse_time
from placement.objects import Obj
from placement.resize import has_gate
from resizer.gangs import GANG_KEY, WAKE_UP_MARGIN
from resizer.recorder import Reason
from tests.resizer.resizer_world import GANG_TIMEOUT, NS, POOL, T0, MakeWorld, World, gang_job, gang_pod
from tests.support.builders import make_node, make_pod
from tests.support.fake_api import Call


def four_pools(make_world: MakeWorld) -> World:
    """node-<i> in pool-<i>, i = 0..3."""
    return make_world(nodes={f"node-{i}": f"pool-{i}" for i in range(4)})


def bind(world: World, name: str, node: str) -> None:
    bound = world.api.stored("pods", NS, name)
    bound["spec"]["nodeName"] = node
    world.upsert("leaders", bound)
    world.upsert("holders", bound)


def gated(world: World, jobset: str, jobs: int = 3) -> list[bool]:
    return [has_gang_gate(world.api.stored("pods", NS, f"{jobset}-w-{job}-0")) for job in range(jobs)]


def test_the_queue_releases_one_whole_jobset_and_keeps_the_other_whole_in_line(make_world: MakeWorld) -> None:
    world = four_pools(make_world)
    for job in range(3):
        world.gang_leader("a", job)
        world.gang_leader("b", job, queued_at=T0 + 1)
    world.resizer.all_or_nothing.process(GANG_KEY)
    assert (gated(world, "a"), gated(world, "b")) == ([False] * 3, [True] * 3)
    released = world.api.stored("pods", NS, "a-w-0-0")
    assert parse_time(released["metadata"]["annotations"][RELEASED_AT_ANNOTATION]) == T0
    assert (world.metric("gang_admissions_total"), world.metric("leader_releases_total")) == (1, 3)
    assert world.metric("gangs_queued") == 1
    world.resizer.all_or_nothing.process(GANG_KEY)  # a's leaders are promised, not bound: b still waits
    assert gated(world, "b") == [True] * 3
    assert world.api.count("patch") == 3
    said = [(o.reason, o.regarding.kind, o.regarding.name, o.note) for o in world.recorder.outcomes]
    assert said == [  # b's wait is said once, not on every pass
        (Reason.ALL_OR_NOTHING_WAITING, "JobSet", "b", "waits for 3 free domains (1 free)"),
        (Reason.ALL_OR_NOTHING_RELEASED, "JobSet", "a", "released: 3 leaders ungated, one free domain each"),
    ]
    # with the JobSet's uid, from its leaders' label: `kubectl describe jobset` selects Events by it
    assert [o.regarding.uid for o in world.recorder.outcomes] == ["b-uid", "a-uid"]


def test_the_wait_is_said_again_when_the_free_domains_change(make_world: MakeWorld) -> None:
    world = four_pools(make_world)
    for job in range(3):
        world.gang_leader("a", job)
        world.gang_leader("b", job, queued_at=T0 + 1)
    world.resizer.all_or_nothing.process(GANG_KEY)  # a released into 3 pools, b waits with 1 free
    world.upsert("nodes", make_node("node-4").label(POOL, "pool-4").obj())
    world.resizer.all_or_nothing.process(GANG_KEY)
    world.resizer.all_or_nothing.process(GANG_KEY)  # nothing changed since
    waits = [o.note for o in world.recorder.outcomes if o.reason == Reason.ALL_OR_NOTHING_WAITING]
    assert waits == ["waits for 3 free domains (1 free)", "waits for 3 free domains (2 free)"]


def test_a_stale_watch_event_cannot_make_a_released_jobset_look_queued_again(make_world: MakeWorld) -> None:
    """An event older than the gate's removal puts the gated pod back into the cache for a moment; a gate is
    never added back, so the resizer keeps counting those domains as promised."""
    world = four_pools(make_world)
    stale = [world.gang_leader("a", job) for job in range(3)]
    world.gang_leader("b", 0, queued_at=T0 + 1)
    world.resizer.all_or_nothing.process(GANG_KEY)
    assert gated(world, "a") == [False] * 3
    for old in stale:
        assert old is not None
        world.deliver_late("leaders", old)
    world.gang_leader("b", 1, queued_at=T0 + 1)
    world.gang_leader("b", 2, queued_at=T0 + 1)
    world.resizer.all_or_nothing.process(GANG_KEY)
    assert gated(world, "b") == [True] * 3
    assert (world.api.count("patch"), world.metric("gang_admissions_total")) == (3, 1)


def test_a_release_cut_short_by_a_crash_is_finished_without_touching_what_was_done(
    make_world: MakeWorld,
) -> None:
    world = four_pools(make_world)
    world.gang_leader("a", 0, gate=None, released_at=T0)
    for job in (1, 2):
        world.gang_leader("a", job)
    for job in range(3):
        world.gang_leader("b", job, queued_at=T0 - 100)
    world.resizer.all_or_nothing.process(GANG_KEY)
    assert (gated(world, "a"), gated(world, "b")) == ([False] * 3, [True] * 3)
    assert sorted(what for verb, what in world.calls() if verb == "patch") == [
        "pods/a-w-1-0",
        "pods/a-w-2-0",
    ]
    assert world.metric("gang_admissions_total") == 0  # resumed, not admitted again
    assert not world.api.deleted


def test_a_reservation_that_does_not_bind_in_time_is_undone_by_suspending_its_jobs_and_the_next_goes(
    make_world: MakeWorld,
) -> None:
    """The safety net never deletes a leader (a deleted pod counts as a failure: a `backoffLimit: 0` JobSet
    fails): it suspends the Jobs, whose pods the Job controller deletes without counting a failure."""
    world = four_pools(make_world)
    for job in range(3):
        world.gang_leader("a", job)
        world.gang_leader("b", job, queued_at=T0 + 1)
    world.resizer.all_or_nothing.process(GANG_KEY)
    bind(world, "a-w-0-0", "node-0")  # two of a's leaders never bind (their domains were taken, say)
    world.epoch.advance(GANG_TIMEOUT - 1)
    world.resizer.all_or_nothing.process(GANG_KEY)
    assert not suspended(world, "a")
    world.epoch.advance(1)
    world.resizer.all_or_nothing.process(GANG_KEY)
    assert suspended(world, "a") == ["a-w-0", "a-w-1", "a-w-2"]
    assert (world.api.deleted, world.api.count("delete")) == ([], 0)
    assert world.metric("gang_timeouts_total") == 1
    timed_out = [o for o in world.recorder.outcomes if o.reason == Reason.ALL_OR_NOTHING_TIMED_OUT]
    said = [(o.regarding.name, o.regarding.uid, o.type) for o in timed_out]
    assert said == [("a", "a-uid", EventType.WARNING)]
    world.resizer.all_or_nothing.process(GANG_KEY)  # the Job controller has not deleted the pods yet
    assert (world.metric("gang_timeouts_total"), world.api.count("patch")) == (1, 3 + 3 + 3)
    assert gated(world, "b") == [False] * 3  # 3 pools free besides node-0's, which a's leader still holds
    assert world.metric("gang_admissions_total") == 2


def suspended(world: World, jobset: str) -> list[str]:
    return [
        f"{jobset}-w-{job}"
        for job in range(3)
        if world.api.stored("jobs", NS, f"{jobset}-w-{job}")["spec"].get("suspend") is True
    ]


def test_a_leader_claiming_a_gang_it_was_not_admitted_into_is_not_in_the_queue(make_world: MakeWorld) -> None:
    """Forged all-or-nothing annotations on a pod (or a Job the webhook never admitted) put nothing in the
    queue: the gang's record is its admitted Jobs', and its leaders are their pods."""
    world = four_pools(make_world)
    for job in range(4):  # a forged head: no admitted Job, queued "in 2000", needing 4 pools
        world.upsert("leaders", gang_pod("forged", job, queued_at=T0 - 10**9))
    world.upsert("gang_jobs", gang_job("a", 0))  # an admitted Job, and a pod of another Job claiming it
    world.upsert("leaders", gang_pod("b", 0) | {"metadata": {**gang_pod("a", 1)["metadata"]}})
    for job in range(3):
        world.gang_leader("c", job, queued_at=T0 + 1)
    world.resizer.all_or_nothing.process(GANG_KEY)
    assert gated(world, "c") == [False] * 3
    assert [o.regarding.name for o in world.recorder.outcomes] == ["c"]
    assert {gang.id.jobset for gang in world.resizer.gang_index.gangs()} == {"c"}


def test_pods_carrying_the_job_key_label_hold_their_domain_and_a_role_label_alone_holds_nothing(
    make_world: MakeWorld,
) -> None:
    world = four_pools(make_world)
    repelling = make_pod("squatter", "tenant").label(JOB_KEY_LABEL, "x").node("node-0").obj()
    world.upsert("holders", repelling)
    for job in range(3):
        world.gang_leader("a", job)
    world.resizer.all_or_nothing.process(GANG_KEY)
    assert gated(world, "a") == [False] * 3  # 3 of 4 pools free
    world = four_pools(make_world)
    world.upsert("holders", repelling)
    world.upsert("holders", make_pod("squatter-2", "tenant").label(JOB_KEY_LABEL, "y").node("node-1").obj())
    world.upsert(
        "leaders", make_pod("role-only", "tenant").label(ROLE_LABEL, ROLE_LEADER).node("node-2").obj()
    )
    for job in range(3):
        world.gang_leader("a", job)
    world.resizer.all_or_nothing.process(GANG_KEY)
    assert gated(world, "a") == [True] * 3  # 2 of 4 pools free: it is not released into pools it cannot get
    waits = [o.note for o in world.recorder.outcomes if o.reason == Reason.ALL_OR_NOTHING_WAITING]
    assert waits == ["waits for 3 free domains (2 free)"]


def test_a_head_that_does_not_fit_is_stepped_over_after_the_bound_and_keeps_its_place(
    make_world: MakeWorld,
) -> None:
    """A tenant's long Jobs hold 2 of 4 pools and its JobSet of 3 heads the queue: the JobSet of 2 behind
    it waits for the bound (the all-or-nothing timeout), then goes; the head is reported and stays first."""
    world = four_pools(make_world)
    for node in ("node-0", "node-1"):
        world.upsert("holders", make_pod(f"long-{node}", "tenant").label(JOB_KEY_LABEL, "x").node(node).obj())
    for job in range(3):
        world.gang_leader("big", job)
    for job in range(2):
        world.gang_leader("small", job, queued_at=T0 + 1, size=2)
    first = world.resizer.all_or_nothing.reconciler.reconcile(GANG_KEY)
    assert (gated(world, "big"), gated(world, "small", 2)) == ([True] * 3, [True] * 2)
    assert first.requeue_after == GANG_TIMEOUT + WAKE_UP_MARGIN  # it looks again when the bound is up
    world.epoch.advance(GANG_TIMEOUT - 1)
    world.resizer.all_or_nothing.process(GANG_KEY)
    assert gated(world, "small", 2) == [True] * 2
    world.epoch.advance(1)
    world.resizer.all_or_nothing.process(GANG_KEY)
    assert (gated(world, "big"), gated(world, "small", 2)) == ([True] * 3, [False] * 2)
    stepped = [o for o in world.recorder.outcomes if o.reason == Reason.ALL_OR_NOTHING_STEPPED_OVER]
    assert [(o.regarding.name, o.type) for o in stepped] == [("big", EventType.WARNING)]
    world.resizer.all_or_nothing.process(GANG_KEY)  # said once
    assert len([o for o in world.recorder.outcomes if o.reason == Reason.ALL_OR_NOTHING_STEPPED_OVER]) == 1


def test_an_elastic_job_grows_only_once_every_job_of_its_jobset_has_a_bound_leader(
    make_world: MakeWorld,
) -> None:
    world = four_pools(make_world)
    for job in range(3):
        world.add_job(gang_job("a", job))
        world.gang_leader("a", job)
    world.resizer.all_or_nothing.process(GANG_KEY)
    for job in range(2):
        bind(world, f"a-w-{job}-0", f"node-{job}")
        world.resizer.resize.process(f"{NS}/a-w-{job}")
    assert world.api.count("patch") == 3  # the three gate removals, no resize
    assert world.metric("skips_total", reason="gang-incomplete") == 2
    bind(world, "a-w-2-0", "node-2")
    for job in range(3):
        world.resizer.resize.process(f"{NS}/a-w-{job}")
    assert [world.api.stored("jobs", NS, f"a-w-{job}")["spec"]["completions"] for job in range(3)] == [
        4,
        4,
        4,
    ]


def binds_before_answering(world: World) -> Callable[[Call, Obj], None]:
    """The scheduler binds each leader the moment its gate is removed, and the bind's watch event reaches the
    resizer before the answer to its own patch does (seen on kube-apiserver under load)."""

    def bind(call: Call, answer: Obj) -> None:
        if (call.verb, call.resource) != ("patch", "pods"):
            return
        node = f"node-{call.name.split('-')[2]}"
        bound = world.api.put("pods", {**answer, "spec": {**answer["spec"], "nodeName": node}})
        world.caches.leaders.upsert(bound)  # what the leaders informer does with the bind's event

    return bind


def test_a_bind_seen_before_the_answer_to_the_gate_removal_is_not_forgotten(make_world: MakeWorld) -> None:
    world = make_world(nodes={f"node-{i}": f"pool-{i}" for i in range(4)})
    world.api.before_answering = binds_before_answering(world)
    for job in range(3):
        world.add_job(gang_job("a", job))
        world.gang_leader("a", job)
    world.resizer.all_or_nothing.process(GANG_KEY)
    cached = [world.caches.leaders.get(f"{NS}/a-w-{job}-0") or {} for job in range(3)]
    assert [pod.get("spec", {}).get("nodeName") for pod in cached] == ["node-0", "node-1", "node-2"]
    for job in range(3):
        world.resizer.resize.process(f"{NS}/a-w-{job}")
    assert [world.api.stored("jobs", NS, f"a-w-{job}")["spec"]["completions"] for job in range(3)] == [4] * 3


def test_scheduling_gate_followers_are_released_only_once_the_jobset_is_whole(make_world: MakeWorld) -> None:
    world = four_pools(make_world)
    for job in range(3):
        world.gang_leader("a", job)
    world.add_pod(gang_pod("a", 0, 1, gate=LEADER_SCHEDULED_GATE), "followers")
    world.resizer.all_or_nothing.process(GANG_KEY)
    bind(world, "a-w-0-0", "node-0")
    world.resizer.followers.process(f"{NS}/a-w-0")
    assert has_gate(world.api.stored("pods", NS, "a-w-0-1"))
    bind(world, "a-w-1-0", "node-1")
    bind(world, "a-w-2-0", "node-2")
    world.resizer.followers.process(f"{NS}/a-w-0")
    released = world.api.stored("pods", NS, "a-w-0-1")
    assert not has_gate(released)
    assert released["spec"]["nodeSelector"] == {POOL: "pool-0"}


def test_a_standby_replica_releases_nothing(make_world: MakeWorld) -> None:
    world = four_pools(make_world)
    world.leading.leader = False
    for job in range(3):
        world.gang_leader("a", job)
    world.resizer.all_or_nothing.process(GANG_KEY)
    assert gated(world, "a") == [True] * 3
    assert world.api.count("patch") == 0
