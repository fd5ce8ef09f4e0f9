"""What this project reads of JobSet, as pure functions (docs/jobset-parity.md).

- `owning_jobset(job)`: the JobSet that controls a child Job (its controller ownerReference), or None.
- `jobset_startup(jobset)`: the parts of a JobSet's spec that make JobSet wait for a child Job's readiness
  (`startupPolicy: InOrder`, `dependsOn` with status Ready). They are immutable in JobSet's API, so what was
  read once for a JobSet uid stays true for it.
- `JobSetStartup.early_readiness(replicated_job)`: why a child Job of that replicated Job must keep its
  size. JobSet counts a child Job ready when its ready + succeeded pods reach min(parallelism,
  completions) of the Job's *current* spec (jobset_controller.go, calculateReplicatedJobStatuses); at size
  1 that is its leader alone, so JobSet would start what waits for it while the followers do not exist yet.
- `JobSetStartup.strategy`: the JobSet's own `exclusive-placement.io/strategy`, the default of its child
  Jobs that name none (honoured as all-or-nothing is).
- `JobSetStartup.all_or_nothing` / `exclusive_jobs` / `created`: what all-or-nothing placement needs
  (docs/design.md, "All-or-nothing"): the JobSet's `exclusive-placement.io/all-or-nothing` annotation
  (None when absent or not a boolean), how many of its Jobs are exclusive (each needs one domain), and its
  creationTimestamp (its place in the resizer's FIFO). Read with the startup order, once per JobSet uid:
  the strategy and all-or-nothing annotations may not change after creation (`placement.jobset_validation`
  denies such an UPDATE), so the answer kept by uid stays true.
- `uses_node_selector_mode(annotations)`: JobSet's node-selector mode (pools pre-labelled by the user),
  which this project leaves to the pods' own nodeSelector and tolerations, as JobSet's webhooks do.
- `take_over_exclusive_topology(annotations)`: JobSet's exclusive-topology annotation replaced by ours,
  so JobSet's pod webhooks and pod reconciler, which key on JobSet's annotation, leave the pods alone.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from placement.constants import (
    ALL_OR_NOTHING_ANNOTATION,
    JOBSET_DEPENDENCY_READY,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    JOBSET_GROUP,
    JOBSET_IN_ORDER,
    JOBSET_KIND,
    JOBSET_NODE_SELECTOR_ANNOTATION,
    JOBSET_REPLICATED_JOB_NAME_LABEL,
    STRATEGY_ANNOTATION,
    TOPOLOGY_ANNOTATION,
)
from placement.objects import (
    Obj,
    annotations_of,
    items,
    labels_of,
    metadata,
    namespace_of,
    pod_template,
    section,
    topology_key_from_annotations,
)


@dataclass(frozen=True)
class JobSetRef:
    namespace: str
    name: str
    uid: str

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


@dataclass(frozen=True)
class JobSetStartup:
    """What of a JobSet decides whether its child Jobs may be shrunk."""

    in_order: bool = False
    """startupPolicy InOrder: each replicated Job waits for the previous one's readiness."""
    ready_dependencies: frozenset[str] = field(default_factory=frozenset)
    """Replicated Jobs another replicated Job `dependsOn` with status Ready."""
    all_or_nothing: bool | None = None
    """The JobSet's all-or-nothing annotation; None: absent (the webhook's default applies)."""
    exclusive_jobs: int = 0
    """Child Jobs that ask for exclusive placement: the domains the JobSet needs at once."""
    created: str = ""
    """The JobSet's creationTimestamp."""
    strategy: str | None = None
    """The JobSet's own `exclusive-placement.io/strategy` (unchecked): its child Jobs' default."""

    def waits_for_readiness(self) -> bool:
        """JobSet creates some child Jobs only once others are ready: they cannot all hold a domain first."""
        return self.in_order or bool(self.ready_dependencies)

    def early_readiness(self, replicated_job: str) -> str | None:
        """None when JobSet waits for nothing on this replicated Job's readiness, else the reason."""
        if self.in_order:
            return (
                "its JobSet has startupPolicy InOrder: JobSet counts a child Job ready from its current "
                "parallelism, so at size 1 it would start the next replicated Job once the leader is ready"
            )
        if replicated_job in self.ready_dependencies:
            return (
                f"replicated Job {replicated_job!r} is a dependsOn (status Ready) of another: JobSet counts "
                "a child Job ready from its current parallelism, so at size 1 it would start the dependent "
                "replicated Job once the leader is ready"
            )
        return None


@dataclass(frozen=True)
class JobSetUnknown:
    """The owning JobSet could not be read, so shrinking its child Job is not known to be safe."""

    ref: JobSetRef
    error: str

    def early_readiness(self, _replicated_job: str) -> str | None:
        return f"its JobSet {self.ref} could not be read ({self.error}), so its startup order is unknown"


OwnerJobSet = JobSetStartup | JobSetUnknown
"""What the Job webhook learned of a child Job's JobSet."""


def owning_jobset(job: Obj) -> JobSetRef | None:
    meta = metadata(job)
    for ref in items(meta, "ownerReferences"):
        if (
            isinstance(ref, dict)
            and ref.get("controller")
            and ref.get("kind") == JOBSET_KIND
            and str(ref.get("apiVersion") or "").split("/", 1)[0] == JOBSET_GROUP
            and ref.get("name")
        ):
            return JobSetRef(namespace_of(job), str(ref["name"]), str(ref.get("uid") or ""))
    return None


def replicated_job_of(job: Obj) -> str:
    return labels_of(job).get(JOBSET_REPLICATED_JOB_NAME_LABEL, "")


def jobset_startup(jobset: Obj) -> JobSetStartup:
    spec = section(jobset, "spec")
    in_order = section(spec, "startupPolicy").get("startupPolicyOrder") == JOBSET_IN_ORDER
    ready: set[str] = set()
    for replicated in items(spec, "replicatedJobs"):
        if not isinstance(replicated, dict):
            continue
        for dependency in items(replicated, "dependsOn"):
            if isinstance(dependency, dict) and dependency.get("status") == JOBSET_DEPENDENCY_READY:
                ready.add(str(dependency.get("name") or ""))
    return JobSetStartup(
        in_order=in_order,
        ready_dependencies=frozenset(ready),
        all_or_nothing=parse_bool(annotations_of(jobset).get(ALL_OR_NOTHING_ANNOTATION)),
        exclusive_jobs=exclusive_jobs(jobset),
        created=str(metadata(jobset).get("creationTimestamp") or ""),
        strategy=annotations_of(jobset).get(STRATEGY_ANNOTATION, "").strip() or None,
    )


def parse_bool(value: str | None) -> bool | None:
    """ "true" / "false" (any case, surrounding blanks ignored); None for anything else."""
    word = (value or "").strip().lower()
    return True if word == "true" else False if word == "false" else None


def exclusive_jobs(jobset: Obj) -> int:
    """How many child Jobs ask for exclusive placement (`exclusive_replicated_jobs`, times their replicas)."""
    count = 0
    for replicated in exclusive_replicated_jobs(jobset):
        replicas = replicated.get("replicas", 1)
        count += replicas if isinstance(replicas, int) and not isinstance(replicas, bool) else 1
    return count


def exclusive_replicated_jobs(jobset: Obj) -> list[Obj]:
    """The replicated Jobs whose child Jobs ask for exclusive placement: JobSet's exclusive-topology
    annotation covers every replicated Job (JobSet copies it to each Job); otherwise a replicated Job's own
    template annotations (Job or pod template) decide. JobSet's node-selector mode is left to JobSet: none."""
    annotations = annotations_of(jobset)
    if uses_node_selector_mode(annotations):
        return []
    everything = bool(annotations.get(JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION, "").strip())
    found: list[Obj] = []
    for replicated in items(section(jobset, "spec"), "replicatedJobs"):
        if not isinstance(replicated, dict):
            continue
        template = section(replicated, "template")
        own = annotations_of(template) | annotations_of(pod_template(template))
        if uses_node_selector_mode(own):
            continue
        if everything or topology_key_from_annotations(own) is not None:
            found.append(replicated)
    return found


def uses_node_selector_mode(annotations: dict[str, str]) -> bool:
    """JobSet's own test is the annotation's presence (its value does not matter)."""
    return JOBSET_NODE_SELECTOR_ANNOTATION in annotations


def take_over_exclusive_topology(annotations: dict[str, str]) -> bool:
    """Move JobSet's exclusive-topology value to our annotation (ours, when set, wins and stays);
    True when `annotations` changed."""
    value = annotations.pop(JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION, None)
    if value is None:
        return False
    if not annotations.get(TOPOLOGY_ANNOTATION, "").strip() and value.strip():
        annotations[TOPOLOGY_ANNOTATION] = value
    return True
