"""The leader pods of every all-or-nothing gang (docs/design.md, "All-or-nothing"), as the leaders' cache
shows them, with what this replica did to them applied over it.

Trust: a pod is grouped by the gang its labels claim, but counts as a member only while its controller
ownerReference is a Job the webhook admitted into that gang (`placement.gang.trusted_member`, against the
cache of admitted Jobs); the gang's size and place come from those Jobs' records alone. A pod claiming a gang
of its namespace it was not admitted into is simply not part of it.

A watch event older than our own patch or delete can put an older copy of a pod back into the cache for a
moment. A scheduling gate is never added back, so "this uid was ungated at t" stays true: the gang is built
with it applied, and a released leader cannot look queued again. What is noted about a pod lives in its
entry, so it goes with the pod: when the leader's cache loses it, or when the API server shows it gone.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from kubekit.informer import Store
from kubekit.keys import object_key
from placement.constants import JOBSET_UID_LABEL
from placement.gang import (
    Gang,
    GangId,
    GangRecord,
    admitted_gang,
    as_released,
    build_gang,
    gang_of,
    trusted_member,
)
from placement.objects import Obj, labels_of, owner_job_key, uid_of


@dataclass
class Member:
    uid: str
    released_at: str | None = None
    """When this replica removed the gang's gate (RFC 3339)."""


class GangIndex:
    def __init__(self, leaders: Store, jobs: Store) -> None:
        """`leaders`: the leader pods' cache; `jobs`: the admitted all-or-nothing Jobs' cache."""
        self._leaders = leaders
        self._jobs = jobs
        self._lock = threading.Lock()
        self._members: dict[GangId, dict[str, Member]] = {}
        """Leader pods by the gang they claim, then by `namespace/name`."""

    def track(self, pod: Obj, present: bool) -> GangId | None:
        """A leader pod was seen (`present`) or deleted; the gang it claims, None when it claims none."""
        gang = gang_of(pod)
        if gang is None:
            return None
        key, uid = object_key(pod), uid_of(pod)
        with self._lock:
            members = self._members.setdefault(gang, {})
            if present:
                if key not in members or members[key].uid != uid:
                    members[key] = Member(uid)
            else:
                members.pop(key, None)
            if not members:
                del self._members[gang]
        return gang

    def forget(self, gang: GangId, pod_key: str, uid: str) -> None:
        """The API server shows this pod gone, though the cache may still hold it for a moment."""
        with self._lock:
            members = self._members.get(gang, {})
            if pod_key in members and members[pod_key].uid == uid:
                del members[pod_key]
            if not members:
                self._members.pop(gang, None)

    def released(self, gang: GangId, pod: Obj, at: str) -> None:
        with self._lock:
            member = self._members.get(gang, {}).get(object_key(pod))
            if member is not None and member.uid == uid_of(pod):
                member.released_at = at

    # --- reading ---------------------------------------------------------------------------------------

    def __bool__(self) -> bool:
        with self._lock:
            return bool(self._members)

    def gang(self, gang: GangId) -> Gang | None:
        with self._lock:
            return build_gang(gang, *self._trusted(gang))

    def gang_of(self, obj: Obj) -> Gang | None:
        """The gang a Job or pod claims, None when it claims none or no admitted leader of it is cached."""
        gang = gang_of(obj)
        return None if gang is None else self.gang(gang)

    def gangs(self) -> list[Gang]:
        with self._lock:
            built = [build_gang(gang, *self._trusted(gang)) for gang in list(self._members)]
        return [gang for gang in built if gang is not None]

    def job_keys(self, gang: GangId) -> set[str]:
        """`namespace/name` of the Jobs whose leaders claim `gang`."""
        with self._lock:
            return {key for pod in self._pods(gang) if (key := owner_job_key(pod)) is not None}

    def jobset_uid(self, gang: GangId) -> str:
        """The uid of the gang's JobSet, from its leaders' `jobset.sigs.k8s.io/jobset-uid` label ("" when no
        cached leader carries it): what an Event about the JobSet needs to be shown by `kubectl describe`."""
        with self._lock:
            for pod in self._pods(gang):
                uid = labels_of(pod).get(JOBSET_UID_LABEL, "")
                if uid:
                    return uid
        return ""

    def footprint(self) -> dict[str, int]:
        with self._lock:
            gangs = len(self._members)
            members = [member for gang in self._members.values() for member in gang.values()]
        return {
            "gangs": gangs,
            "gang_leaders": len(members),
            "gang_leaders_released": sum(1 for member in members if member.released_at is not None),
        }

    def _trusted(self, gang: GangId) -> tuple[list[Obj], list[GangRecord]]:
        """The leaders of `gang` whose Job the webhook admitted into it, and those Jobs' records (call with
        the lock held)."""
        pods: list[Obj] = []
        records: dict[str, GangRecord] = {}
        for pod in self._pods(gang):
            job = self._jobs.get(owner_job_key(pod) or "")
            record = admitted_gang(job) if job is not None else None
            if record is not None and trusted_member(pod, gang, record):
                pods.append(pod)
                records[record.job_uid] = record
        return pods, list(records.values())

    def _pods(self, gang: GangId) -> list[Obj]:
        """The cached leader pods claiming `gang` as acted on (call with the lock held); forgets the pods the
        cache no longer holds, or holds with another uid."""
        members = self._members.get(gang, {})
        pods = []
        for key, member in list(members.items()):
            pod = self._leaders.get(key)
            if pod is None or uid_of(pod) != member.uid:
                del members[key]
                continue
            pods.append(as_released(pod, member.released_at) if member.released_at is not None else pod)
        if not members:
            self._members.pop(gang, None)
        return pods
