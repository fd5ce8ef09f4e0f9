"""Validation of a JobSet that carries this project's annotations, at the JobSet's own admission.

JobSet copies a replicated Job's template into every child Job. A mistake there is otherwise found only by
the Job webhook, on each child Job JobSet creates, and only a `JobCreationFailed` event on the JobSet says
so. Checked when the JobSet is created, the user who applied it gets the answer (docs/webhook.md,
"JobSet validation"):

Denied, naming the field and the valid values:
- an `exclusive-placement.io/strategy` that is not a strategy, on the JobSet, a replicated Job's template or
  its pod template;
- an `exclusive-placement.io/all-or-nothing` that is not "true" or "false", wherever it is;
- an all-or-nothing JobSet (its annotation, else the webhook's default) with an exclusive replicated Job
  that is NonIndexed: such a Job has no leader to queue, so the JobSet would wait for it forever;
- a JobSet Kueue queues with a Topology Aware Scheduling annotation on an exclusive replicated Job
  (`placement.kueue_tas.tas_conflicts`, reason `kueue-tas-conflict`): TAS would choose its pods' nodes,
  packed; so, on its CREATE, is one whose LocalQueue feeds a ClusterQueue of TAS flavors only, where Kueue
  applies TAS unasked (`implied_tas_conflict`, the queue read by the webhook).

Allowed with a warning: all-or-nothing on a template (it is read from the JobSet's metadata only), a
topology key no node carries (`placement.topology`), more exclusive Jobs than schedulable domains, and a
replicated Job whose pods fit no domain (`placement.capacity`).

An UPDATE is checked only when it changes these annotations, so a JobSet admitted before this validation
existed is never blocked from its controller's updates. An UPDATE that changes the JobSet's own strategy or
all-or-nothing is denied: both apply at creation only (the Job webhook keeps them by JobSet uid, and a gang's
members are fixed when its Jobs are admitted), so the message says to delete and re-create the JobSet.
"""

from __future__ import annotations

from collections.abc import Collection, Iterator, Sequence
from dataclasses import dataclass

from placement.admission import Verdict
from placement.capacity import NodeRoom, jobset_capacity_warnings
from placement.constants import (
    ALL_OR_NOTHING_ANNOTATION,
    DOMAIN,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    STRATEGY_ANNOTATION,
)
from placement.jobset import exclusive_replicated_jobs, parse_bool, uses_node_selector_mode
from placement.kueue_tas import KueueQueue, implied_tas_conflict, tas_conflicts, unread_queue_warning
from placement.objects import (
    Obj,
    annotations_of,
    items,
    metadata,
    pod_template,
    section,
    topology_key_from_annotations,
)
from placement.strategy import InvalidStrategy, completion_mode, is_indexed, validate_strategy
from placement.topology import unknown_topology_warning

ALL_OR_NOTHING_VALUES = ('"true"', '"false"')
CREATION_ONLY_ANNOTATIONS = (STRATEGY_ANNOTATION, ALL_OR_NOTHING_ANNOTATION)
"""The JobSet's own annotations its child Jobs are admitted by, read once per JobSet (webhook/jobsets.py)."""


@dataclass(frozen=True)
class Place:
    """One metadata of the JobSet that may carry the project's annotations."""

    path: str
    """Where it is, as a field path: `metadata`, `spec.replicatedJobs[0].template.spec.template.metadata`."""
    annotations: dict[str, str]


def places(jobset: Obj) -> Iterator[Place]:
    yield Place("metadata", annotations_of(jobset))
    for position, replicated in enumerate(items(section(jobset, "spec"), "replicatedJobs")):
        if not isinstance(replicated, dict):
            continue
        template = section(replicated, "template")
        where = f"spec.replicatedJobs[{position}].template"
        yield Place(f"{where}.metadata", annotations_of(template))
        yield Place(f"{where}.spec.template.metadata", annotations_of(pod_template(template)))


def own_annotations(jobset: Obj) -> dict[str, dict[str, str]]:
    """The annotations this validation reads, by place: what an UPDATE must change to be checked again."""
    return {
        place.path: {
            key: value
            for key, value in place.annotations.items()
            if key.startswith(f"{DOMAIN}/") or key == JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION
        }
        for place in places(jobset)
    }


def carries_project_annotations(jobset: Obj) -> bool:
    return any(own_annotations(jobset).values())


def _annotation_problems(place: Place) -> Iterator[str]:
    strategy = place.annotations.get(STRATEGY_ANNOTATION, "").strip()
    if strategy:
        try:
            validate_strategy(strategy)
        except InvalidStrategy as err:
            yield f"{place.path}.annotations: {err}"
    value = place.annotations.get(ALL_OR_NOTHING_ANNOTATION)
    if value is not None and parse_bool(value) is None:
        yield (
            f"{place.path}.annotations: {ALL_OR_NOTHING_ANNOTATION} is {value!r}; valid values: "
            f"{', '.join(ALL_OR_NOTHING_VALUES)}"
        )


def _shown(value: str | None) -> str:
    return "absent" if value is None else repr(value)


def creation_only_changes(old: Obj, new: Obj) -> list[str]:
    """One problem per creation-only annotation of the JobSet's metadata that `new` changes."""
    before, after = annotations_of(old), annotations_of(new)
    return [
        f"metadata.annotations: {key} applies only at the JobSet's creation (its Jobs were admitted with "
        f"it, and a re-created Job must be admitted as its siblings were); it cannot change from "
        f"{_shown(before.get(key))} to {_shown(after.get(key))}: delete and re-create the JobSet to change it"
        for key in CREATION_ONLY_ANNOTATIONS
        if before.get(key) != after.get(key)
    ]


def _leaderless_jobs(jobset: Obj, all_or_nothing: bool) -> Iterator[str]:
    if not all_or_nothing:
        return
    exclusive = {id(replicated) for replicated in exclusive_replicated_jobs(jobset)}
    for position, replicated in enumerate(items(section(jobset, "spec"), "replicatedJobs")):
        template = section(replicated, "template") if isinstance(replicated, dict) else {}
        if id(replicated) in exclusive and not is_indexed(template):
            mode = completion_mode(template)
            yield (
                f"spec.replicatedJobs[{position}].template.spec.completionMode is {mode}: an all-or-nothing "
                "JobSet queues each exclusive Job by its leader (completion index 0), which only an Indexed "
                f'Job has; set completionMode: Indexed, or {ALL_OR_NOTHING_ANNOTATION}: "false" on the JobSet'
            )


def _warnings(jobset: Obj, node_label_keys: Collection[str], nodes: Sequence[NodeRoom]) -> Iterator[str]:
    for place in places(jobset):
        if place.path != "metadata" and ALL_OR_NOTHING_ANNOTATION in place.annotations:
            yield (
                f"exclusive placement: {ALL_OR_NOTHING_ANNOTATION} is read from the JobSet's own "
                f"metadata.annotations only; at {place.path} it has no effect"
            )
    keys = {key for place in places(jobset) if (key := topology_key_from_annotations(place.annotations))}
    for key in sorted(keys):
        warning = unknown_topology_warning(key, node_label_keys)
        if warning is not None:
            yield warning
    yield from jobset_capacity_warnings(jobset, nodes)


def validate_jobset(
    jobset: Obj,
    *,
    default_all_or_nothing: bool,
    node_label_keys: Collection[str] = (),
    nodes: Sequence[NodeRoom] = (),
    old: Obj | None = None,
    kueue_queue: KueueQueue = None,
) -> Verdict:
    """CREATE (or, with `old`, UPDATE) of a JobSet; `default_all_or_nothing` is the webhook's
    `--all-or-nothing`, `node_label_keys` every label key the nodes carry (empty: unknown), `nodes` the
    nodes' room (empty: unknown, no capacity warning), `kueue_queue` the LocalQueue it names as the webhook
    read it (`placement.kueue_tas.jobset_queue_to_read`; None: none read)."""
    name = metadata(jobset).get("name") or metadata(jobset).get("generateName") or ""
    changed = (
        creation_only_changes(old, jobset)
        if old is not None
        and carries_project_annotations(old)
        and not uses_node_selector_mode(annotations_of(old))
        else []
    )
    if changed:
        return Verdict(
            allowed=False,
            reason="changed-at-runtime",
            message=f"exclusive placement: JobSet {name}: " + "; ".join(changed),
        )
    if not carries_project_annotations(jobset) or uses_node_selector_mode(annotations_of(jobset)):
        return Verdict(allowed=True, reason="not-exclusive")
    if old is not None and own_annotations(old) == own_annotations(jobset):
        return Verdict(allowed=True, reason="unchanged")
    all_or_nothing = parse_bool(annotations_of(jobset).get(ALL_OR_NOTHING_ANNOTATION))
    problems = [problem for place in places(jobset) for problem in _annotation_problems(place)]
    problems += _leaderless_jobs(jobset, default_all_or_nothing if all_or_nothing is None else all_or_nothing)
    if problems:
        return Verdict(
            allowed=False,
            reason="invalid-jobset",
            message=f"exclusive placement: JobSet {name}: " + "; ".join(problems),
        )
    conflicts = tas_conflicts(jobset)
    implied = implied_tas_conflict(kueue_queue, "JobSet")
    if implied is not None:
        conflicts.append(f"metadata.labels: {implied}")
    if conflicts:
        return Verdict(
            allowed=False,
            reason="kueue-tas-conflict",
            message=f"exclusive placement: JobSet {name}: " + "; ".join(conflicts),
        )
    unread = unread_queue_warning(kueue_queue)
    warnings = (*_warnings(jobset, node_label_keys, nodes), *([unread] if unread else []))
    return Verdict(allowed=True, reason="valid", warnings=warnings)
