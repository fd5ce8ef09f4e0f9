"""Gang progress: a simulator workload model, not an upstream behaviour.

A distributed training job makes progress only while every one of its workers runs: a partial placement
holds its domains and computes nothing. kubesim models that for pods marked as gang members:

- `sim.exclusive-placement.io/gang: <name>` names the gang (per namespace);
- `sim.exclusive-placement.io/gang-size: <n>` is how many pods it has. The size comes from the pod, never
  from a Job: this project's `elastic` strategy shrinks Jobs at admission, so a Job's size says nothing
  about how many workers the program waits for.

A gang's clock runs while at least `size` of its members are Running (not being deleted); it stops when
one of them stops and resumes, from what it had accumulated, when the gang is whole again (the program
checkpoints continuously and a replaced worker rejoins it). Every member finishes once the gang's clock
reaches the kubelet's `pod_run_seconds`. A gang is forgotten, its progress with it, when its last member
pod is deleted. A pod whose size is not a positive integer is no gang member (it runs on its own clock).

Pure bookkeeping on simulated seconds; the kubelet (`kubelet.py`) feeds it pod states and acts on it.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Final

GANG_ANNOTATION: Final = "sim.exclusive-placement.io/gang"
GANG_SIZE_ANNOTATION: Final = "sim.exclusive-placement.io/gang-size"


@dataclass(frozen=True)
class Membership:
    gang: str
    """namespace/name of the gang."""
    size: int


def membership(pod: dict[str, Any]) -> Membership | None:
    """The pod's gang from its annotations; None when it names none or its size is not a positive integer."""
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    name = annotations.get(GANG_ANNOTATION)
    if not name:
        return None
    try:
        size = int(str(annotations.get(GANG_SIZE_ANNOTATION, "")))
    except ValueError:
        return None
    if size < 1:
        return None
    return Membership(f"{meta.get('namespace') or ''}/{name}", size)


@dataclass
class Gang:
    size: int
    members: set[str] = field(default_factory=set)
    """Pod keys of every existing member, whatever its phase."""
    running: set[str] = field(default_factory=set)
    accumulated: float = 0.0
    """Simulated seconds the gang was whole, up to `whole_since`."""
    whole_since: float | None = None

    @property
    def whole(self) -> bool:
        return len(self.running) >= self.size

    def elapsed(self, now: float) -> float:
        return self.accumulated + (now - self.whole_since if self.whole_since is not None else 0.0)

    def settle(self, now: float) -> bool:
        """Start or stop the clock after a change of `running`; True when it just started."""
        if self.whole and self.whole_since is None:
            self.whole_since = now
            return True
        if not self.whole and self.whole_since is not None:
            self.accumulated += now - self.whole_since
            self.whole_since = None
        return False


class GangProgress:
    """Every gang's members and clock. Feed each pod state (`observe`) and deletion (`forget`)."""

    def __init__(self) -> None:
        self._gangs: dict[str, Gang] = {}
        self._gang_of: dict[str, str] = {}

    def observe(self, key: str, member: Membership | None, running: bool, now: float) -> list[str]:
        """Record pod `key`'s state. Returns the running members, sorted, when this made its gang whole
        (their clocks resume: each is due `remaining` later), else []."""
        if member is None:
            return []
        gang = self._gangs.setdefault(member.gang, Gang(member.size))
        gang.size = member.size
        self._gang_of[key] = member.gang
        gang.members.add(key)
        if running:
            gang.running.add(key)
        else:
            gang.running.discard(key)
        return sorted(gang.running) if gang.settle(now) else []

    def forget(self, key: str, now: float) -> None:
        """Pod `key` is gone: it stops counting; its gang is forgotten with its last member."""
        name = self._gang_of.pop(key, None)
        if name is None:
            return
        gang = self._gangs[name]
        gang.members.discard(key)
        gang.running.discard(key)
        gang.settle(now)
        if not gang.members:
            del self._gangs[name]

    def is_member(self, key: str) -> bool:
        return key in self._gang_of

    def elapsed(self, key: str, now: float) -> float | None:
        """The simulated seconds pod `key`'s gang has been whole; None for a pod in no gang."""
        name = self._gang_of.get(key)
        return None if name is None else self._gangs[name].elapsed(now)

    def remaining(self, key: str, run_seconds: float, now: float) -> float | None:
        """Simulated seconds until pod `key` is done (0 when it is), or None while its gang is not whole
        and not done (paused: it resumes when the gang is whole again). None for a pod in no gang."""
        name = self._gang_of.get(key)
        if name is None:
            return None
        gang = self._gangs[name]
        left = run_seconds - gang.elapsed(now)
        if left <= 0:
            return 0.0
        return left if gang.whole_since is not None else None
