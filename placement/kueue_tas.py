"""Kueue's Topology Aware Scheduling (TAS) next to exclusive placement (pure): when a workload would be placed
by TAS, which this project denies at admission.

TAS chooses the node of every pod of a PodSet itself (a `kueue.x-k8s.io/topology` scheduling gate, then node
selectors) and packs the pods by free resources, blind to exclusivity: on the kube tier it put all 8 pods of a
JobSet's 2 exclusive Jobs on one node, and the second Job waited Pending against the first's anti-affinity,
forever. Kueue v0.19.2 places a PodSet with TAS in two cases:

- explicitly, when the PodSet's template carries one of `KUEUE_TAS_ANNOTATIONS` (`tas_conflicts` for a
  JobSet's exclusive replicated Jobs, `job_tas_conflict` for a plain Job);
- implicitly, when every flavor of the workload's ClusterQueue is a TAS flavor (`isTASImplied`,
  `pkg/scheduler/flavorassigner/tas_flavorassigner.go`, and `isTASOnly`,
  `pkg/cache/scheduler/clusterqueue.go`: a flavor counts when it exists and names a Topology in
  `spec.topologyName`). Nothing on the workload says so: the webhook reads the LocalQueue the workload
  names, its ClusterQueue and that ClusterQueue's ResourceFlavors (`QueueFlavors`), and
  `implied_tas_conflict` says why that queue cannot take it. A
  ClusterQueue with one flavor that is not a TAS flavor is not TAS-only: Kueue gives a workload that asks for
  no topology a flavor without a Topology (`checkPodSetAndFlavorMatchForTAS` skips the TAS ones), so the
  remedy is such a flavor, or such a ClusterQueue, for the exclusive workloads.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

from placement.constants import KUEUE_QUEUE_NAME_LABEL
from placement.jobset import exclusive_replicated_jobs, owning_jobset
from placement.kueue import DEFAULT_LOCAL_QUEUE, DefaultQueue, queue_name
from placement.objects import Obj, annotations_of, items, labels_of, pod_template, section

LOCAL_QUEUES = "localqueues"
CLUSTER_QUEUES = "clusterqueues"
RESOURCE_FLAVORS = "resourceflavors"

KUEUE_TAS_ANNOTATIONS = (
    "kueue.x-k8s.io/podset-required-topology",
    "kueue.x-k8s.io/podset-preferred-topology",
    "kueue.x-k8s.io/podset-unconstrained-topology",
    "kueue.x-k8s.io/podset-slice-required-topology",
    "kueue.x-k8s.io/podset-slice-required-topology-constraints",
)
"""What asks Kueue's Topology Aware Scheduling to place a PodSet (a replicated Job's pods): each makes Kueue
v0.19.2 build the PodSet a topology request that counts as asking for TAS (`jobframework/tas.go`,
`workload.IsExplicitlyRequestingTAS`), `unconstrained` with any value, "false" included. TAS then chooses
every pod's node itself (its `kueue.x-k8s.io/topology` scheduling gate and node selectors), packing the pods,
and knows nothing of exclusivity."""


def tas_conflicts(jobset: Obj) -> list[str]:
    """One problem per TAS annotation on an exclusive replicated Job of a JobSet Kueue queues (its queue-name
    label): TAS assigns all of the replicated Job's pods to nodes of one domain without regard to other Jobs
    (on the kube tier: the 8 pods of 2 exclusive Jobs, all to one node), so the pods of every Job but one
    wait Pending forever against their leaders' anti-affinity."""
    if not labels_of(jobset).get(KUEUE_QUEUE_NAME_LABEL):
        return []
    exclusive = exclusive_replicated_jobs(jobset)
    return [
        _tas_conflict(path, key, value)
        for position, replicated in enumerate(items(section(jobset, "spec"), "replicatedJobs"))
        if any(replicated is candidate for candidate in exclusive)
        for path, found in _template_annotations(position, section(replicated, "template"))
        for key, value in found.items()
        if key in KUEUE_TAS_ANNOTATIONS
    ]


def job_tas_conflict(job: Obj) -> tuple[str, str] | None:
    """(field, why) when a plain exclusive Job Kueue queues asks its TAS for a topology: TAS chooses the
    Job's nodes by their free resources, not by the other Jobs' leaders, so it can put the Job in a domain
    another exclusive Job holds, where its pods would wait Pending forever. None otherwise."""
    if queue_name(job) is None:
        return None
    for path, found in (
        ("metadata", annotations_of(job)),
        ("spec.template.metadata", annotations_of(pod_template(job))),
    ):
        for key in KUEUE_TAS_ANNOTATIONS:
            if key in found:
                return f"{path}.annotations", _tas_conflict_why(key, found[key], "Job")
    return None


def _template_annotations(position: int, template: Obj) -> list[tuple[str, dict[str, str]]]:
    where = f"spec.replicatedJobs[{position}].template"
    return [
        (f"{where}.metadata", annotations_of(template)),
        (f"{where}.spec.template.metadata", annotations_of(pod_template(template))),
    ]


def _tas_conflict(path: str, key: str, value: str) -> str:
    return f"{path}.annotations: {_tas_conflict_why(key, value, 'replicated Job')}"


def _tas_conflict_why(key: str, value: str, what: str) -> str:
    return (
        f"{key}={value} asks Kueue's Topology Aware Scheduling to choose the nodes of this {what}'s pods, "
        "which it packs into one domain without regard to exclusivity, while exclusive placement puts each "
        "Job alone in a domain: a Job TAS packs next to another would wait Pending forever; remove one of "
        "the two (TAS's annotation, or the exclusive topology)"
    )


@dataclass(frozen=True)
class QueueFlavors:
    """A LocalQueue as the webhook read it: its ClusterQueue and that ClusterQueue's flavors, in order, each
    with the Topology it names (None: a flavor without `spec.topologyName`, or one that does not exist)."""

    local_queue: str
    """`<namespace>/<name>`."""
    cluster_queue: str
    flavors: tuple[tuple[str, str | None], ...]
    """Empty when the ClusterQueue does not exist (Kueue admits nothing from it, and says so on the
    workload)."""
    defaulted: bool = False
    """Read for a plain Job that names no LocalQueue: Kueue's LocalQueue defaulting labels it for this one."""

    @property
    def tas_only(self) -> bool:
        """Kueue places every workload of this ClusterQueue with TAS, asked or not."""
        return bool(self.flavors) and all(topology is not None for _, topology in self.flavors)


@dataclass(frozen=True)
class QueueUnread:
    """A LocalQueue (or its ClusterQueue, or a flavor) the webhook could not read: `why`."""

    local_queue: str
    why: str
    defaulted: bool = False
    """As `QueueFlavors.defaulted`."""


KueueQueue = QueueFlavors | QueueUnread | None
"""What the webhook knows of a workload's queue; None: it names none, or Kueue has no such LocalQueue or
ClusterQueue (Kueue then admits nothing from it, and says so on the workload)."""


def flavor_names(cluster_queue: Obj) -> list[str]:
    """The flavors of every resource group of a ClusterQueue, in order, each once."""
    names: list[str] = []
    for group in items(section(cluster_queue, "spec"), "resourceGroups"):
        for flavor in items(group, "flavors") if isinstance(group, dict) else []:
            name = flavor.get("name") if isinstance(flavor, dict) else None
            if isinstance(name, str) and name and name not in names:
                names.append(name)
    return names


def topology_of_flavor(flavor: Obj | None) -> str | None:
    """The Topology a ResourceFlavor names (None: none, or no such flavor)."""
    name = section(flavor or {}, "spec").get("topologyName")
    return name if isinstance(name, str) and name else None


def queue_flavors(local_queue: str, cluster_queue: str, flavors: Mapping[str, Obj | None]) -> QueueFlavors:
    """`flavors`: each flavor of the ClusterQueue (`flavor_names`) -> its ResourceFlavor (None: absent)."""
    topologies = tuple((name, topology_of_flavor(flavor)) for name, flavor in flavors.items())
    return QueueFlavors(local_queue, cluster_queue, topologies)


def jobset_queue_to_read(jobset: Obj) -> str | None:
    """The LocalQueue to read for a JobSet's CREATE: the one it names, if any replicated Job is exclusive."""
    name = labels_of(jobset).get(KUEUE_QUEUE_NAME_LABEL)
    return name if name and exclusive_replicated_jobs(jobset) else None


def job_queue_to_read(job: Obj) -> tuple[str, bool] | None:
    """The LocalQueue to read for a plain exclusive Job's CREATE, and whether it is the namespace's default
    one (`DEFAULT_LOCAL_QUEUE`, read for a Job that names none: Kueue's LocalQueue defaulting labels such a
    Job for it, in its own webhook, after this one). None for a JobSet's child Job (its JobSet's is read)."""
    if owning_jobset(job) is not None:
        return None
    name = queue_name(job)
    return (name, False) if name else (DEFAULT_LOCAL_QUEUE, True)


def default_queue_of(queue: KueueQueue) -> DefaultQueue | None:
    """The default LocalQueue a plain Job naming none will be queued in, as `kueue_elastic_problem` takes it
    (None: the queue was not read as a default, or there is none)."""
    if isinstance(queue, QueueUnread) and queue.defaulted:
        return DefaultQueue(queue.local_queue, queue.why)
    if isinstance(queue, QueueFlavors) and queue.defaulted:
        return DefaultQueue(queue.local_queue)
    return None


def implied_tas_conflict(queue: KueueQueue, what: str) -> str | None:
    """Why a workload with exclusive Jobs cannot be queued in `queue` (None: it can, or it is unknown)."""
    if not isinstance(queue, QueueFlavors) or not queue.tas_only:
        return None
    flavors = ", ".join(f"{name} (Topology {topology})" for name, topology in queue.flavors)
    how = " (none set: Kueue's LocalQueue defaulting sets it)" if queue.defaulted else ""
    return (
        f"{KUEUE_QUEUE_NAME_LABEL}={queue.local_queue.split('/', 1)[1]}{how}: "
        f"LocalQueue {queue.local_queue} feeds "
        f"ClusterQueue {queue.cluster_queue}, whose flavors are all Topology Aware Scheduling flavors "
        f"({flavors}), so Kueue places every {what} it admits with TAS, asked or not: TAS packs each Job's "
        "pods without regard to exclusivity, and a Job it packs next to another would wait Pending forever; "
        "queue exclusive workloads through a ClusterQueue that has a flavor without spec.topologyName for "
        "their resources"
    )


def unread_queue_warning(queue: KueueQueue) -> str | None:
    """The warning of a queue the webhook could not read (None: it could, or there is none to read)."""
    if not isinstance(queue, QueueUnread):
        return None
    return (
        f"exclusive placement: could not read Kueue's LocalQueue {queue.local_queue}, its ClusterQueue or "
        f"their flavors ({queue.why}): not checked whether Kueue places this workload with Topology Aware "
        "Scheduling, which packs pods without regard to exclusivity"
    )


def tas_levels(workload: Obj | None) -> list[str] | None:
    """The topology levels at which Kueue's TAS assigned the admitted Workload's pods to domains (None: the
    Workload has no topology assignment, or is not admitted)."""
    admission = section(section(workload or {}, "status"), "admission")
    for assignment in items(admission, "podSetAssignments"):
        topology = assignment.get("topologyAssignment") if isinstance(assignment, dict) else None
        if isinstance(topology, dict):
            return [str(level) for level in topology.get("levels") or []]
    return None


def placed_by_tas(workload_name: str, levels: list[str]) -> str:
    """Why an exclusive Job whose Workload TAS placed waits: what `status` and `explain` say of it."""
    at = f" at {', '.join(levels)}" if levels else ""
    return (
        f"Kueue placed its pods with Topology Aware Scheduling (Workload {workload_name} assigns them to "
        f"domains{at}), which packs them without regard to exclusivity: the scheduler finds no room for "
        "them where TAS put them, next to another exclusive Job. Exclusive workloads cannot use TAS: queue "
        "them through a ClusterQueue that has a flavor without spec.topologyName, and re-create this one "
        "(the webhook denies such a workload at creation; this one was created before, or its ClusterQueue "
        "changed since)"
    )
