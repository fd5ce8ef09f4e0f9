"""The leader pods of every all-or-nothing gang (docs/design.md, "All-or-nothing"), as the leaders' cache
shows them, with what this replica did to them applied over it.

A watch event older than our own patch or delete can put an older copy of a pod back into the cache for a
moment. A scheduling gate is never added back and a deleted pod never comes back, so "this uid was ungated
at t" and "this uid was deleted at t" stay true: the gang is built with them applied, and a released
leader cannot look queued again, nor a deleted one live. What is noted about a pod lives in its entry, so
it goes with the pod: when the leader's cache loses it, or when the API server shows it gone.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass

from kubekit.informer import Store
from kubekit.keys import object_key
from placement.gang import Gang, GangId, as_released, build_gang, gang_of
from placement.objects import Obj, metadata, owner_job_key, uid_of


@dataclass
class Member:
    uid: str
    released_at: str | None = None
    """When this replica removed the gang's gate (RFC 3339)."""
    deleted_at: str | None = None
    """When this replica deleted it after a time-out (RFC 3339)."""


class GangIndex:
    def __init__(self, leaders: Store) -> None:
        self._leaders = leaders
        self._lock = threading.Lock()
        self._members: dict[GangId, dict[str, Member]] = {}
        """Leader pods by gang, then by `namespace/name`."""

    def track(self, pod: Obj, present: bool) -> GangId | None:
        """A leader pod was seen (`present`) or deleted; its gang, None when it is in none."""
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
        member = self._member(gang, object_key(pod), uid_of(pod))
        if member is not None:
            member.released_at = at

    def deleted(self, gang: GangId, pod_key: str, uid: str, at: str) -> None:
        member = self._member(gang, pod_key, uid)
        if member is not None:
            member.deleted_at = at

    def _member(self, gang: GangId, pod_key: str, uid: str) -> Member | None:
        with self._lock:
            member = self._members.get(gang, {}).get(pod_key)
            return member if member is not None and member.uid == uid else None

    # --- reading ---------------------------------------------------------------------------------------

    def __bool__(self) -> bool:
        with self._lock:
            return bool(self._members)

    def gang(self, gang: GangId) -> Gang | None:
        with self._lock:
            return build_gang(gang, self._pods(gang))

    def gang_of(self, obj: Obj) -> Gang | None:
        """The gang of a Job or pod, None when it is in none or no leader of it is cached."""
        gang = gang_of(obj)
        return None if gang is None else self.gang(gang)

    def gangs(self) -> list[Gang]:
        with self._lock:
            built = [build_gang(gang, self._pods(gang)) for gang in list(self._members)]
        return [gang for gang in built if gang is not None]

    def job_keys(self, gang: GangId) -> set[str]:
        """`namespace/name` of the Jobs whose leaders are in `gang`."""
        with self._lock:
            return {key for pod in self._pods(gang) if (key := owner_job_key(pod)) is not None}

    def footprint(self) -> dict[str, int]:
        with self._lock:
            gangs = len(self._members)
            members = [member for gang in self._members.values() for member in gang.values()]
        return {
            "gangs": gangs,
            "gang_leaders": len(members),
            "gang_leaders_released": sum(1 for member in members if member.released_at is not None),
            "gang_leaders_deleted": sum(1 for member in members if member.deleted_at is not None),
        }

    def _pods(self, gang: GangId) -> list[Obj]:
        """The cached leader pods of `gang` as acted on (call with the lock held); forgets the pods the
        cache no longer holds, or holds with another uid."""
        members = self._members.get(gang, {})
        pods = []
        for key, member in list(members.items()):
            pod = self._leaders.get(key)
            if pod is None or uid_of(pod) != member.uid:
                del members[key]
                continue
            pods.append(as_acted_on(pod, member))
        if not members:
            self._members.pop(gang, None)
        return pods


def as_acted_on(pod: Obj, member: Member) -> Obj:
    if member.deleted_at is not None and not metadata(pod).get("deletionTimestamp"):
        return {**pod, "metadata": {**metadata(pod), "deletionTimestamp": member.deleted_at}}
    if member.released_at is not None:
        return as_released(pod, member.released_at)
    return pod
