"""Builders of real-shaped Jobs, pods and nodes for the placement tests."""

from __future__ import annotations

from typing import Any

from placement.constants import STRATEGY_ANNOTATION
from placement.reserved import RESIZE_ANNOTATIONS
from tests.support.builders import make_job, make_node, make_pod

NS = "team-a"
JOB = "trainer-workers-0"
UID = "uid-1"
ZONE = "topology.kubernetes.io/zone"


def job(
    *,
    completions: int | None = 4,
    parallelism: int | None = 4,
    mode: str | None = "Indexed",
    name: str = JOB,
    annotations: dict[str, str] | None = None,
    template_annotations: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    extra_spec: dict[str, Any] | None = None,
    jobset: str | None = None,
) -> dict[str, Any]:
    """`jobset`: the name of the JobSet controlling the Job (uid `<name>-uid`)."""
    built = make_job(name, NS).spec(**(extra_spec or {}))
    sizes = {"completions": completions, "parallelism": parallelism, "completionMode": mode}
    built.spec(**{field: value for field, value in sizes.items() if value is not None})
    if template_annotations is not None:
        built.template_annotations(template_annotations)
    if annotations is not None:
        built.annotations(annotations)
    if labels is not None:
        built.labels(labels)
    if jobset is not None:
        built.controlled_by_jobset(jobset, f"{jobset}-uid")
    return built.obj()


def pod(
    index: int | None,
    *,
    strategy: str | None = None,
    topology: str | None = ZONE,
    node: str | None = None,
    job_name: str = JOB,
    uid: str = UID,
    phase: str | None = None,
    deleting: bool = False,
    labels: dict[str, str] | None = None,
    spec: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """A pod of the Job being admitted: no name yet (generateName) unless bound to `node`."""
    built = make_pod(f"{job_name}-{index}-abcde", NS).owned_by(job_name, uid, labels=True).phase(phase)
    built.spec(**(spec or {})).node(node)
    if topology is not None:
        built.topology(topology)
    if strategy is not None:
        built.annotation(STRATEGY_ANNOTATION, strategy)
    if index is not None:
        built.index(index)
    for key, value in (labels or {}).items():
        built.label(key, value)
    obj = (built.terminating() if deleting else built).obj()
    if node is None:
        del obj["metadata"]["name"]
        obj["metadata"]["generateName"] = f"{job_name}-{index}-"
    return obj


def node(name: str = "node-1", labels: dict[str, str] | None = None) -> dict[str, Any]:
    return make_node(name).labels({ZONE: "zone-a"} if labels is None else labels).obj()


def without_resize_keys(template: dict[str, Any]) -> dict[str, Any]:
    """A copy of a pod template without the target record the Job webhook leaves on an elastic Job's."""
    annotations = (template.get("metadata") or {}).get("annotations") or {}
    kept = {key: value for key, value in annotations.items() if key not in RESIZE_ANNOTATIONS}
    return {**template, "metadata": {**(template.get("metadata") or {}), "annotations": kept}}
