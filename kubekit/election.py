"""Leader election on a coordination.k8s.io/v1 Lease (client-go's leaderelection, written for this client).

The released `kubernetes` Python client has no Lease lock, hence this module. Semantics follow client-go:
- A candidate takes the Lease when it does not exist, when its holder is empty (released), or when the
  record has not changed for `leaseDurationSeconds` as observed on the candidate's own monotonic clock
  (no cross-machine clock comparison).
- Every write carries the Lease's resourceVersion, so two candidates cannot both win.
- The holder renews every `retry_period`; if it has not renewed for `renew_deadline` (< lease duration) it
  stops acting at once, before any other replica can consider the Lease expired.
- On shutdown the holder releases the Lease (empty holder, 1 s duration) so a standby takes over at once.
"""

from __future__ import annotations

import logging
import random
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime

from kubekit.client import Kube, KubeError
from kubekit.objects import Obj

log = logging.getLogger(__name__)

MICRO_TIME_FORMAT = "%Y-%m-%dT%H:%M:%S.%fZ"
RELEASE_MIN_TIMEOUT = 1.0
"""Each call of a release on shutdown gets at least this long, s, even when the stop budget is spent."""


def format_micro_time(moment: datetime) -> str:
    """RFC 3339 with microseconds in UTC, the wire form of metav1.MicroTime."""
    return moment.astimezone(UTC).strftime(MICRO_TIME_FORMAT)


def parse_micro_time(text: str | None) -> datetime | None:
    if not text:
        return None
    return datetime.fromisoformat(text.replace("Z", "+00:00"))


@dataclass(frozen=True)
class LeaseRecord:
    holder: str
    lease_duration_seconds: int
    acquire_time: str | None
    renew_time: str | None
    transitions: int

    @classmethod
    def from_lease(cls, lease: Obj) -> LeaseRecord:
        spec = lease.get("spec") or {}
        return cls(
            holder=spec.get("holderIdentity") or "",
            lease_duration_seconds=int(spec.get("leaseDurationSeconds") or 0),
            acquire_time=spec.get("acquireTime"),
            renew_time=spec.get("renewTime"),
            transitions=int(spec.get("leaseTransitions") or 0),
        )

    def to_spec(self) -> Obj:
        return {
            "holderIdentity": self.holder,
            "leaseDurationSeconds": self.lease_duration_seconds,
            "acquireTime": self.acquire_time,
            "renewTime": self.renew_time,
            "leaseTransitions": self.transitions,
        }


def may_take(record: LeaseRecord, identity: str, observed_at: float, now: float) -> bool:
    """May `identity` write itself into this record? (Its own, released, or unchanged for a full duration.)"""
    if not record.holder or record.holder == identity:
        return True
    return observed_at + record.lease_duration_seconds <= now


def next_record(record: LeaseRecord | None, identity: str, lease_duration: int, now: str) -> LeaseRecord:
    """The record to write when taking or renewing the Lease."""
    if record is not None and record.holder == identity:
        return replace(record, lease_duration_seconds=lease_duration, renew_time=now)
    transitions = 0 if record is None else record.transitions + 1
    return LeaseRecord(identity, lease_duration, now, now, transitions)


@dataclass(frozen=True)
class ElectionConfig:
    namespace: str
    name: str
    identity: str
    lease_duration: int = 15
    renew_deadline: float = 10.0
    retry_period: float = 2.0

    def __post_init__(self) -> None:
        if not 0 < self.retry_period < self.renew_deadline < self.lease_duration:
            raise ValueError(
                "leader election needs 0 < retry period < renew deadline < lease duration, got "
                f"{self.retry_period} / {self.renew_deadline} / {self.lease_duration}"
            )


class LeaderElector:
    def __init__(
        self,
        kube: Kube,
        config: ElectionConfig,
        *,
        on_started_leading: Callable[[], None],
        on_stopped_leading: Callable[[], None],
        clock: Callable[[], float] = time.monotonic,
        wall_clock: Callable[[], datetime] = lambda: datetime.now(UTC),
    ) -> None:
        self.kube = kube
        self.config = config
        self._on_started = on_started_leading
        self._on_stopped = on_stopped_leading
        self._clock = clock
        self._wall = wall_clock
        self._lock = threading.Lock()
        self._leading = False
        self._last_renew = 0.0
        self._observed: LeaseRecord | None = None
        self._observed_at = 0.0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="leader-election", daemon=True)

    def is_leader(self) -> bool:
        """True only while the Lease was renewed within the renew deadline (checked on every action)."""
        with self._lock:
            return self._leading and self._clock() - self._last_renew < self.config.renew_deadline

    def start(self) -> None:
        self._thread.start()

    def is_alive(self) -> bool:
        return self._thread.is_alive()

    def stop(self, release: bool = True, timeout: float = 5.0) -> None:
        """Stop renewing and (optionally) hand the Lease back, within about `timeout` seconds in total.

        A renewal still in flight after that is abandoned: at worst it renews the Lease once more and a
        standby waits for it to expire instead of taking it at once."""
        deadline = time.monotonic() + timeout
        self._stop.set()
        self._thread.join(timeout)
        if release:
            self.release(timeout=max(RELEASE_MIN_TIMEOUT, deadline - time.monotonic()))

    def release(self, timeout: float | None = None) -> None:
        with self._lock:
            was_leading, self._leading = self._leading, False
        if not was_leading:
            return
        self._on_stopped()
        try:
            lease = self.kube.get_lease(self.config.namespace, self.config.name, timeout=timeout)
            record = LeaseRecord.from_lease(lease)
            if record.holder != self.config.identity:
                return
            now = format_micro_time(self._wall())
            released = LeaseRecord("", 1, now, now, record.transitions)
            self.kube.replace_lease(
                self.config.namespace, self.config.name, self._lease(lease, released), timeout=timeout
            )
            log.info("released lease %s/%s", self.config.namespace, self.config.name)
        except KubeError as error:
            log.warning("could not release lease %s/%s: %s", self.config.namespace, self.config.name, error)

    def step(self) -> None:
        """One attempt to acquire or renew, and the leadership change it implies."""
        started = self._clock()
        try:
            acquired = self.try_acquire_or_renew()
        except KubeError as error:
            log.warning("lease %s/%s: %s", self.config.namespace, self.config.name, error)
            acquired = False
        self._transition(acquired, started)

    def _run(self) -> None:
        while not self._stop.is_set():
            self.step()
            jitter = 1.0 if self.is_leader() else random.uniform(1.0, 1.2)
            self._stop.wait(self.config.retry_period * jitter)

    def _transition(self, acquired: bool, attempt_started: float) -> None:
        with self._lock:
            was_leading = self._leading
            if acquired:
                # Count from when the request left, not when it returned: conservative.
                self._last_renew = attempt_started
                self._leading = True
            elif was_leading and self._clock() - self._last_renew >= self.config.renew_deadline:
                self._leading = False
            now_leading = self._leading
        if now_leading and not was_leading:
            log.info(
                "became leader (lease %s/%s, identity %s)",
                self.config.namespace,
                self.config.name,
                self.config.identity,
            )
            self._on_started()
        elif was_leading and not now_leading:
            log.warning("lost leadership: lease not renewed within %.1fs", self.config.renew_deadline)
            self._on_stopped()

    def try_acquire_or_renew(self) -> bool:
        namespace, name, identity = self.config.namespace, self.config.name, self.config.identity
        now = format_micro_time(self._wall())
        try:
            lease = self.kube.get_lease(namespace, name, timeout=self._timeout)
        except KubeError as error:
            if not error.not_found:
                raise
            record = next_record(None, identity, self.config.lease_duration, now)
            try:
                self.kube.create_lease(
                    namespace, self._lease({"metadata": {"name": name}}, record), timeout=self._timeout
                )
            except KubeError as create_error:
                if create_error.conflict:
                    return False
                raise
            self._observe(record)
            return True

        record = LeaseRecord.from_lease(lease)
        if record != self._observed:
            self._observe(record)
        if not may_take(record, identity, self._observed_at, self._clock()):
            return False
        wanted = next_record(record, identity, self.config.lease_duration, now)
        try:
            self.kube.replace_lease(namespace, name, self._lease(lease, wanted), timeout=self._timeout)
        except KubeError as error:
            if error.conflict:
                return False
            raise
        self._observe(wanted)
        return True

    @property
    def _timeout(self) -> float:
        """A renewal that hangs past the renew deadline is worthless: give up on it before that."""
        return max(0.5, self.config.renew_deadline - self.config.retry_period)

    def _observe(self, record: LeaseRecord) -> None:
        self._observed = record
        self._observed_at = self._clock()

    def _lease(self, lease: Obj, record: LeaseRecord) -> Obj:
        metadata = dict(lease.get("metadata") or {})
        metadata["name"] = self.config.name
        metadata["namespace"] = self.config.namespace
        metadata.pop("managedFields", None)
        return {
            "apiVersion": "coordination.k8s.io/v1",
            "kind": "Lease",
            "metadata": metadata,
            "spec": record.to_spec(),
        }


class AlwaysLeader:
    """`--no-leader-elect`: one replica that always acts."""

    def __init__(self, on_started_leading: Callable[[], None]) -> None:
        self._on_started = on_started_leading

    def is_leader(self) -> bool:
        return True

    def start(self) -> None:
        self._on_started()

    def is_alive(self) -> bool:
        return True

    def stop(self, release: bool = True, timeout: float = 5.0) -> None:
        return None
