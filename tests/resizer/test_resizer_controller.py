"""The resize and follower reconcilers against an in-memory API (fakes, not mocks): resize once, conflicts,
retries, gates, repairs."""

from __future__ import annotations

import copy
import logging
from typing import Any

import pytest

from kubekit.controller import Permanent, Reconciler, Result
from kubekit.events import EventType
from placement.constants import (
    LEADER_DOMAIN_ANNOTATION,
    RESIZE_DONE,
    RESIZE_LABEL,
    TARGET_COMPLETIONS_ANNOTATION,
    TARGET_PARALLELISM_ANNOTATION,
    TOPOLOGY_ANNOTATION,
)
from placement.objects import Obj
from placement.resize import has_gate
from resizer.handlers import LeaderHandler
from resizer.recorder import Reason, pod_reference
from tests.resizer.resizer_world import KEY, POOL, MakeWorld, World, job, pod
from tests.support.fake_api import DROP


def test_pending_job_is_resized_once_when_leader_is_bound(make_world: MakeWorld) -> None:
    world = make_world()
    world.add_job(job())
    world.add_pod(pod(0, node="node-5"), "leaders")
    world.resizer.resize.process(KEY)
    world.resizer.resize.process(KEY)
    stored = world.api.stored("jobs", "team", "train-0")
    assert (stored["spec"]["completions"], stored["spec"]["parallelism"]) == (8, 8)
    assert stored["metadata"]["labels"][RESIZE_LABEL] == "done"
    assert world.api.count("patch") == 1
    assert world.metric("resizes_total") == 1
    ((outcome),) = world.recorder.outcomes
    assert (outcome.reason, outcome.regarding.kind, outcome.regarding.name) == (
        Reason.RESIZED,
        "Job",
        "train-0",
    )
    assert outcome.related == pod_reference(world.api.stored("pods", "team", "train-0-0"))
    assert outcome.note == (
        "resized from 1/1 to 8/8 (completions/parallelism): leader train-0-0 bound in "
        "cloud.google.com/gke-nodepool=pool-2 (node node-5)"
    )


def resize_lines(caplog: pytest.LogCaptureFixture) -> list[tuple[int, str]]:
    return [(r.levelno, r.getMessage()) for r in caplog.records if r.name == "resizer.resize"]


def test_a_target_beyond_the_webhooks_record_is_refused_once_with_a_log_line_and_an_event(
    make_world: MakeWorld, caplog: pytest.LogCaptureFixture
) -> None:
    world = make_world()
    forged = job()
    forged["metadata"]["annotations"].update(
        {TARGET_COMPLETIONS_ANNOTATION: "100000", TARGET_PARALLELISM_ANNOTATION: "100000"}
    )
    world.add_job(forged)
    world.add_pod(pod(0, node="node-5"), "leaders")
    with caplog.at_level(logging.INFO, logger="resizer.resize"):
        for _ in range(3):  # every change of the Job brings it back: it is said once
            world.resizer.resize.process(KEY)
    assert world.api.count("patch") == 0
    why = (
        f"{TARGET_COMPLETIONS_ANNOTATION}: 100000 is more than the 8 the Job webhook recorded (on the pod "
        "template) when it admitted the Job"
    )
    assert resize_lines(caplog) == [(logging.WARNING, f"not resizing: invalid-target: {why}")]
    ((outcome),) = world.recorder.outcomes
    assert (outcome.reason, outcome.type, outcome.regarding.name, outcome.note) == (
        Reason.RESIZE_REFUSED,
        EventType.WARNING,
        "train-0",
        f"not resized: {why}",
    )
    assert world.metric("skips_total", reason="invalid-target") == 3


def test_a_job_the_webhook_never_admitted_is_left_at_its_size_said_once(
    make_world: MakeWorld, caplog: pytest.LogCaptureFixture
) -> None:
    world = make_world()
    forged = job()
    del forged["spec"]["template"]["metadata"]["annotations"][TOPOLOGY_ANNOTATION]
    world.add_job(forged)
    world.add_pod(pod(0, node="node-5"), "leaders")
    with caplog.at_level(logging.INFO, logger="resizer.resize"):
        world.resizer.resize.process(KEY)
        world.resizer.resize.process(KEY)
    assert world.api.count("patch") == 0
    assert resize_lines(caplog) == [(logging.INFO, "not resizing: not-admitted")]
    assert world.recorder.outcomes == []


def test_waits_for_the_leader_to_bind(make_world: MakeWorld) -> None:
    world = make_world()
    world.add_job(job())
    world.add_pod(pod(0), "leaders")
    world.resizer.resize.process(KEY)
    assert world.api.count("patch") == 0
    assert world.metric("skips_total", reason="leader-not-bound") == 1
    LeaderHandler(world.resizer).on_upsert(None, world.add_pod(pod(0, node="node-5"), "leaders"))
    world.resizer.resize.process(KEY)
    assert world.api.stored("jobs", "team", "train-0")["spec"]["completions"] == 8
    assert world.metric("bind_to_resize_seconds_count") == 1


def test_conflict_rereads_and_decides_again(make_world: MakeWorld) -> None:
    world = make_world()
    cached = world.add_job(job())
    # Someone else changed the Job after our cache saw it (e.g. the Job controller's status write).
    world.api.put("jobs", copy.deepcopy(cached))
    world.add_pod(pod(0, node="node-5"), "leaders")
    world.resizer.resize.process(KEY)
    assert world.api.stored("jobs", "team", "train-0")["spec"]["completions"] == 8
    assert world.api.count("patch") == 2  # the stale one (409) and the fresh one
    assert world.metric("conflicts_total") == 1


def test_job_already_resized_elsewhere_is_not_patched_again(make_world: MakeWorld) -> None:
    world = make_world()
    cached = world.add_job(job())
    done = copy.deepcopy(cached)
    done["metadata"]["labels"][RESIZE_LABEL] = "done"
    done["spec"].update(completions=8, parallelism=8)
    world.api.put("jobs", done)
    world.add_pod(pod(0, node="node-5"), "leaders")
    world.resizer.resize.process(KEY)
    assert world.api.count("patch") == 1  # refused with 409, then re-read: already done
    assert world.metric("resizes_total") == 0
    assert world.caches.jobs.get(KEY) is None


@pytest.mark.parametrize(("status", "reason"), [(429, "429"), (500, "500"), (None, "connection")])
def test_transient_errors_are_retried_with_backoff(
    make_world: MakeWorld, status: int | None, reason: str
) -> None:
    world = make_world()
    world.add_job(job())
    world.add_pod(pod(0, node="node-5"), "leaders")
    world.api.fail_next(DROP if status is None else status)
    world.resizer.resize.process(KEY)
    assert world.metric("retries_total", reason=reason) == 1
    assert world.resizer.resize.queue.failures(KEY) == 1
    assert world.resizer.resize.queue.get(timeout=2) == KEY
    world.resizer.resize.process(KEY)
    assert world.api.stored("jobs", "team", "train-0")["spec"]["completions"] == 8
    assert world.resizer.resize.queue.failures(KEY) == 0


def test_job_deleted_meanwhile_is_dropped_quietly(make_world: MakeWorld) -> None:
    world = make_world()
    world.add_job(job())
    world.add_pod(pod(0, node="node-5"), "leaders")
    world.api.delete("jobs", job())
    world.resizer.resize.process(KEY)
    assert world.caches.jobs.get(KEY) is None
    assert world.resizer.resize.queue.failures(KEY) == 0
    assert world.metric("errors_total", reason="404") == 0


class FailsOnce:
    """A reconciler whose first reconcile raises `error` before it does anything: a bug in it, or a reason
    it gives up on a change (neither is an answer of the API server, which the fake API server gives)."""

    def __init__(self, reconciler: Reconciler, error: Exception) -> None:
        self.reconciler = reconciler
        self.error: Exception | None = error

    def reconcile(self, key: str) -> Result:
        if self.error is not None:
            error, self.error = self.error, None
            raise error
        return self.reconciler.reconcile(key)


def fail_once(world: World, failure: int | Exception) -> None:
    """The next resize fails: the API server answers `failure` (a status), or the reconciler raises it."""
    if isinstance(failure, int):
        world.api.fail_next(failure)
    else:
        wrapped = FailsOnce(world.resizer.resize.reconciler, failure)
        world.resizer.resize.reconciler = wrapped  # type: ignore[assignment]  # only reconcile() is called


@pytest.mark.parametrize(
    ("failure", "reason"),
    [
        (403, "403"),  # RBAC or a policy an operator then fixes
        (418, "418"),  # an answer the resizer does not know
        (RuntimeError("a bug met once"), "unexpected"),
    ],
)
def test_an_unknown_error_is_retried_with_backoff_and_the_job_still_resized(
    make_world: MakeWorld, failure: int | Exception, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    world = make_world()
    world.add_job(job())
    world.add_pod(pod(0, node="node-5"), "leaders")
    fail_once(world, failure)
    with caplog.at_level(logging.INFO, logger="kubekit.controller"):
        world.resizer.resize.process(KEY)
    assert world.metric("errors_total", reason=reason) == 1
    assert world.metric("retries_total", reason=reason) == 1
    assert [r.levelname for r in caplog.records] == ["WARNING"]  # one line, with the delay
    assert world.resizer.resize.queue.get(timeout=2) == KEY
    world.resizer.resize.process(KEY)
    assert world.api.stored("jobs", "team", "train-0")["spec"]["completions"] == 8


def _job_of_generation(world: World, generation: int) -> Obj:
    """train-0 cached at generation 1 with its leader bound; the API server's copy at `generation`, written
    since (a status write: a newer resourceVersion)."""
    cached = job()
    cached["metadata"]["generation"] = 1
    world.add_job(cached)
    world.add_pod(pod(0, node="node-5"), "leaders")
    stored = world.api.stored("jobs", "team", "train-0")
    stored["metadata"]["generation"] = generation
    stored["status"] = {"active": 1, "ready": 1}
    return world.api.put("jobs", stored)


def test_a_status_write_between_the_read_and_the_resize_refuses_nothing(make_world: MakeWorld) -> None:
    """The Job controller writes the Job's status when its leader binds, right when the resize comes: the
    resize tests the generation, not the resourceVersion, so the write costs no second read and patch."""
    world = make_world()
    _job_of_generation(world, 1)
    world.resizer.resize.process(KEY)
    assert world.api.stored("jobs", "team", "train-0")["spec"]["completions"] == 8
    assert (world.api.count("get"), world.api.count("patch")) == (0, 1)
    assert world.metric("conflicts_total") == 0


def test_a_spec_change_between_the_read_and_the_resize_is_read_and_decided_again(
    make_world: MakeWorld,
) -> None:
    world = make_world()
    _job_of_generation(world, 2)
    world.resizer.resize.process(KEY)
    assert world.api.stored("jobs", "team", "train-0")["spec"]["completions"] == 8
    assert (world.api.count("get"), world.api.count("patch")) == (1, 2)
    assert world.metric("conflicts_total") == 1


@pytest.mark.parametrize(
    ("failure", "reason"),
    [(415, "415"), (400, "400"), (Permanent("invalid-target"), "invalid-target")],
)
def test_a_permanent_error_ends_the_key(
    make_world: MakeWorld, failure: int | Exception, reason: str, caplog: pytest.LogCaptureFixture
) -> None:
    world = make_world()
    world.add_job(job())
    world.add_pod(pod(0, node="node-5"), "leaders")
    fail_once(world, failure)
    with caplog.at_level(logging.INFO, logger="kubekit.controller"):
        world.resizer.resize.process(KEY)
    assert world.metric("errors_total", reason=reason) == 1
    assert world.resizer.resize.queue.failures(KEY) == 0
    assert world.resizer.resize.queue.get(timeout=0) is None
    assert [r.levelname for r in caplog.records] == ["ERROR"]
    assert world.api.stored("jobs", "team", "train-0")["spec"]["completions"] == 1


def test_standby_and_dry_run_do_not_patch(make_world: MakeWorld) -> None:
    for world in (make_world(leader=False), make_world(dry_run=True)):
        world.add_job(job())
        world.add_pod(pod(0, node="node-5"), "leaders")
        world.resizer.resize.process(KEY)
        assert world.api.count("patch") == 0
        assert world.api.stored("jobs", "team", "train-0")["spec"]["completions"] == 1
        assert world.recorder.outcomes == []


def test_becoming_leader_enqueues_pending_and_gated_work(make_world: MakeWorld) -> None:
    world = make_world(leader=False)
    world.add_job(job())
    other = pod(1, gated=True)
    other["metadata"]["ownerReferences"][0]["name"] = "train-1"
    world.add_pod(other, "followers")
    world.resizer.enqueue_all()
    assert world.resizer.resize.queue.get(timeout=0) == KEY
    assert world.resizer.followers.queue.get(timeout=0) == "team/train-1"


def test_gated_followers_are_pinned_to_the_leader_domain_and_released(make_world: MakeWorld) -> None:
    world = make_world()
    world.add_pod(pod(0, node="node-5"), "leaders")
    for index in (1, 2, 3):
        world.add_pod(pod(index, gated=True), "followers")
    world.resizer.followers.process(KEY)
    for index in (1, 2, 3):
        stored = world.api.stored("pods", "team", f"train-0-{index}")
        assert stored["spec"]["nodeSelector"] == {POOL: "pool-2"}
        assert stored["spec"]["schedulingGates"] == []
    assert world.metric("gate_releases_total") == 3
    # kept, now pinned, until they bind: a leader re-created elsewhere would have them repaired
    assert not any(has_gate(follower) for follower in world.caches.followers.items())
    assert world.api.count("get") == 0  # the leader's node is the node informer's
    ((outcome),) = world.recorder.outcomes
    assert (outcome.reason, outcome.regarding.name, outcome.regarding.uid) == (
        Reason.FOLLOWERS_RELEASED,
        "train-0",
        "job-uid",
    )


def test_gate_release_retries_when_gates_changed_under_it(make_world: MakeWorld) -> None:
    world = make_world()
    world.add_pod(pod(0, node="node-5"), "leaders")
    cached = world.add_pod(pod(1, gated=True), "followers")
    changed = copy.deepcopy(cached)
    changed["spec"]["schedulingGates"].insert(0, {"name": "kueue.x-k8s.io/topology"})
    world.api.put("pods", changed)
    world.resizer.followers.process(KEY)
    stored = world.api.stored("pods", "team", "train-0-1")
    assert stored["spec"]["schedulingGates"] == [{"name": "kueue.x-k8s.io/topology"}]
    assert stored["spec"]["nodeSelector"] == {POOL: "pool-2"}
    assert world.metric("conflicts_total") == 1


def test_gated_followers_wait_for_the_leader(make_world: MakeWorld) -> None:
    world = make_world()
    world.add_pod(pod(0), "leaders")
    world.add_pod(pod(1, gated=True), "followers")
    world.resizer.followers.process(KEY)
    assert world.api.count("patch") == 0
    assert world.metric("skips_total", reason="leader-not-bound") == 1


def test_gated_elastic_followers_whose_leader_finished_are_released_into_the_domain_the_resize_recorded(
    make_world: MakeWorld,
) -> None:
    """Followers created gated because their admission did not see the resize yet, the leader finished
    since: one read of the Job, and they go where the pod policies pin its followers."""
    world = make_world()
    resized = job()
    resized["metadata"]["labels"][RESIZE_LABEL] = RESIZE_DONE
    resized["metadata"].setdefault("annotations", {})[LEADER_DOMAIN_ANNOTATION] = "pool-4"
    world.api.put("jobs", resized)
    finished = pod(0, node="node-5")
    finished["status"] = {"phase": "Succeeded"}
    world.add_pod(finished, "leaders")
    for index in (1, 2):
        world.add_pod(pod(index, gated=True), "followers")
    world.resizer.followers.process(KEY)
    for index in (1, 2):
        stored = world.api.stored("pods", "team", f"train-0-{index}")
        assert (stored["spec"]["nodeSelector"], stored["spec"]["schedulingGates"]) == ({POOL: "pool-4"}, [])
    assert world.metric("gate_releases_total") == 2
    assert world.api.count("get") == 1  # the Job, once for both


def test_gated_followers_of_a_job_never_resized_wait_for_their_leader(make_world: MakeWorld) -> None:
    """A scheduling-gate Job records no domain: its followers wait for a live, bound leader."""
    world = make_world()
    world.api.put("jobs", job())
    finished = pod(0, node="node-5")
    finished["status"] = {"phase": "Succeeded"}
    world.add_pod(finished, "leaders")
    world.add_pod(pod(1, gated=True), "followers")
    world.resizer.followers.process(KEY)
    assert world.api.count("patch") == 0
    assert world.metric("skips_total", reason="not-resized") == 1


# --- repair: JobSet's pod reconciler, for followers pinned to a domain their leader left ------------------


def pinned(index: int, pool: str) -> dict[str, Any]:
    follower = pod(index)
    follower["metadata"]["uid"] = f"pod-uid-{index}"
    follower["spec"]["nodeSelector"] = {POOL: pool}
    return follower


def repair_world(make_world: MakeWorld, *, dry_run: bool = False) -> World:
    """The leader was re-created and bound in pool-2; followers 1-2 still pinned to the old pool-1."""
    world = make_world(dry_run=dry_run)
    world.add_pod(pod(0, node="node-5"), "leaders")
    world.add_pod(pinned(1, "pool-1"), "followers")
    world.add_pod(pinned(2, "pool-1"), "followers")
    world.add_pod(pinned(3, "pool-2"), "followers")
    return world


def test_followers_pinned_where_the_leader_no_longer_is_are_marked_then_deleted(
    make_world: MakeWorld,
) -> None:
    world = repair_world(make_world)
    world.resizer.followers.process(KEY)
    assert sorted(p["metadata"]["name"] for p in world.api.deleted) == ["train-0-1", "train-0-2"]
    for deleted in world.api.deleted:
        (condition,) = deleted["status"]["conditions"]
        assert (condition["type"], condition["status"], condition["reason"]) == (
            "DisruptionTarget",
            "True",
            "ExclusivePlacementViolation",
        )
        assert condition["lastTransitionTime"] == "2026-05-01T10:00:00Z"
    assert world.api.stored("pods", "team", "train-0-3")["spec"]["nodeSelector"] == {POOL: "pool-2"}
    # the leader is read again before anything is deleted; each follower: status first, then delete
    verbs = [verb for verb, _ in world.calls()]
    assert verbs == ["get", "patch", "delete", "patch", "delete"]
    assert world.calls()[0] == ("get", "pods/train-0-0")
    assert sorted(what for verb, what in world.calls() if verb == "patch") == [
        "pods/status/train-0-1",
        "pods/status/train-0-2",
    ]
    assert world.metric("follower_repairs_total") == 2
    assert sorted(
        (o.reason, o.type, o.related.name if o.related else "") for o in world.recorder.outcomes
    ) == [
        (Reason.FOLLOWER_REPAIRED, EventType.WARNING, "train-0-1"),
        (Reason.FOLLOWER_REPAIRED, EventType.WARNING, "train-0-2"),
    ]
    assert len(world.caches.followers) == 1
    world.resizer.followers.process(KEY)
    assert world.metric("follower_repairs_total") == 2


def test_a_stale_copy_of_a_repaired_follower_is_not_counted_again(make_world: MakeWorld) -> None:
    world = repair_world(make_world)
    world.resizer.followers.process(KEY)
    # a late watch event (the status write) puts the deleted follower back into the cache
    (stale,) = [p for p in world.api.deleted if p["metadata"]["name"] == "train-0-1"]
    world.deliver_late("followers", stale)
    world.resizer.followers.process(KEY)
    assert world.metric("follower_repairs_total") == 2
    assert world.calls()[5:] == [("get", "pods/train-0-0"), ("get", "pods/train-0-1")]  # read, gone
    assert len(world.caches.followers) == 1


def test_a_stale_copy_of_a_follower_still_terminating_is_neither_deleted_nor_counted_again(
    make_world: MakeWorld,
) -> None:
    """A pod with a grace period stays, terminating, after the delete; a late watch event puts its copy
    from before the delete back into the cache. The status write returns the pod as it is: terminating."""
    world = repair_world(make_world)
    world.api.graceful_deletes = True
    world.resizer.followers.process(KEY)
    assert world.metric("follower_repairs_total") == 2
    stale = copy.deepcopy(world.api.deleted[0])
    assert "deletionTimestamp" not in stale["metadata"]
    world.deliver_late("followers", stale)
    deletes = world.api.count("delete")
    world.resizer.followers.process(KEY)
    assert world.api.count("delete") == deletes
    assert world.metric("follower_repairs_total") == 2
    assert stale["metadata"]["name"] not in {p["metadata"]["name"] for p in world.caches.followers.items()}


def test_a_leaders_node_the_node_informer_does_not_hold_yet_is_read_from_the_api_server(
    make_world: MakeWorld,
) -> None:
    world = repair_world(make_world)
    world.caches.nodes.delete("node-5")
    world.resizer.followers.process(KEY)
    assert world.api.count("delete") == 2
    assert ("get", "nodes/node-5") in world.calls()


def test_no_repair_when_the_api_server_shows_another_leader_than_the_cache(make_world: MakeWorld) -> None:
    world = repair_world(make_world)
    moved = pod(0, node="node-7")
    world.api.put("pods", moved)  # the cache still has it on node-5
    world.resizer.followers.process(KEY)
    assert world.api.deleted == []
    assert world.api.count("delete") == 0
    assert world.metric("follower_repairs_total") == 0


def test_no_repair_while_two_live_leaders_sit_in_different_domains(make_world: MakeWorld) -> None:
    world = repair_world(make_world)
    world.api.put("nodes", {"metadata": {"name": "node-7", "labels": {POOL: "pool-1"}}})
    duplicate = pod(0, node="node-7")
    duplicate["metadata"]["name"] = "train-0-0-dup"
    world.add_pod(duplicate, "leaders")
    world.resizer.followers.process(KEY)
    assert world.api.count("delete") == 0
    assert world.api.count("patch", "pods/status") == 0


def test_dry_run_deletes_nothing(make_world: MakeWorld) -> None:
    world = repair_world(make_world, dry_run=True)
    world.resizer.followers.process(KEY)
    assert world.api.count("delete") == 0
    assert world.api.count("patch", "pods/status") == 0
    assert world.metric("follower_repairs_total") == 0


def test_a_follower_gone_before_the_status_write_is_dropped_quietly(make_world: MakeWorld) -> None:
    world = repair_world(make_world)
    world.api.delete("pods", pinned(1, "pool-1"))
    world.resizer.followers.process(KEY)
    assert [p["metadata"]["name"] for p in world.api.deleted] == ["train-0-2"]
    assert world.metric("errors_total", reason="404") == 0
