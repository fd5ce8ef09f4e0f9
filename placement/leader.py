"""Which pod leads a Job: the one rule the webhook and the resizer both apply (docs/design.md, "The leader").

The leader of a Job is its completion-index-0 pod. Several candidates can share a Job's name: a leader
being deleted next to its replacement, a finished one, or leaders of an earlier Job of the same name (a
re-created Job has a new uid). `pick_leader(candidates, job)` picks the best candidate and
`leader_problem(pod, job)` says why that pod cannot (yet) place followers, or None when it can;
`rival_leaders(candidates, leader, job)` are the other live, bound leaders of the same Job.

A candidate belongs to `job` when its controlling Job has the same name and, where both uids are known,
the same uid (a pod admitted before its ownerReference is set only carries the Job's name label).
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from placement.objects import (
    JobRef,
    Obj,
    is_finished_pod,
    is_leader,
    is_terminating,
    job_ref_of_pod,
    node_name,
)

Placed = tuple[Obj, Obj | None]
"""A live leader bound to a node, and that Node (None when it is unknown)."""


class LeaderProblem(StrEnum):
    """Why no follower can be placed after this leader yet. Values are log words and metric labels."""

    NO_LEADER = "no-leader"
    NOT_A_LEADER = "not-a-leader"
    LEADER_OF_OTHER_JOB = "leader-of-other-job"
    LEADER_TERMINATING = "leader-terminating"
    LEADER_FINISHED = "leader-finished"
    LEADER_NOT_BOUND = "leader-not-bound"


def belongs_to(pod: Obj, job: JobRef) -> bool:
    owner = job_ref_of_pod(pod)
    if owner is None or owner.name != job.name:
        return False
    return not (job.uid and owner.uid and owner.uid != job.uid)


def is_live(pod: Obj) -> bool:
    return not is_terminating(pod) and not is_finished_pod(pod)


def leader_problem(pod: Obj | None, job: JobRef) -> LeaderProblem | None:
    """None when `pod` is a live leader of `job` bound to a node; otherwise the first reason it is not."""
    if pod is None:
        return LeaderProblem.NO_LEADER
    if not is_leader(pod):
        return LeaderProblem.NOT_A_LEADER
    if not belongs_to(pod, job):
        return LeaderProblem.LEADER_OF_OTHER_JOB
    if is_terminating(pod):
        return LeaderProblem.LEADER_TERMINATING
    if is_finished_pod(pod):
        return LeaderProblem.LEADER_FINISHED
    if node_name(pod) is None:
        return LeaderProblem.LEADER_NOT_BOUND
    return None


def pick_leader(candidates: Iterable[Obj], job: JobRef) -> Obj | None:
    """The best candidate for leader of `job`, None only when there is no candidate at all.

    Ranked by: a completion-index-0 pod, of this very Job, live, bound to a node. The winner may still
    be unusable (e.g. every candidate is terminating): `leader_problem` then says why, so callers can
    report the precise reason instead of "no leader".
    """

    def rank(pod: Obj) -> tuple[bool, bool, bool, bool]:
        return (is_leader(pod), belongs_to(pod, job), is_live(pod), node_name(pod) is not None)

    return max(candidates, key=rank, default=None)


def rival_leaders(candidates: Iterable[Obj], leader: Obj | None, job: JobRef) -> list[Obj]:
    """The other live, bound leaders of `job` besides `leader` (normally none: the Job controller removes
    a duplicate index, but until it has, the Job has two leaders that may sit in different domains)."""
    if leader is None:
        return []
    return [pod for pod in candidates if pod is not leader and leader_problem(pod, job) is None]
