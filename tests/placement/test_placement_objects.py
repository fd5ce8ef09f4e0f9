"""placement.objects, placement.strategy, placement.affinity: table-driven over plain dicts."""

from __future__ import annotations

import hashlib
from typing import Any

import pytest

from placement.affinity import (
    add_leader_affinity,
    follower_node_selector,
    leader_affinity_terms,
    leader_domain,
    pod_priority,
)
from placement.constants import (
    JOB_COMPLETION_INDEX_LABEL,
    JOB_KEY_LABEL,
    JOB_NAME_LABEL,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    LEGACY_CONTROLLER_UID_LABEL,
    LEGACY_JOB_NAME_LABEL,
    MAX_FOLLOWER_SHARDS,
    PRIORITY_LABEL,
    STRATEGY_ANNOTATION,
    TARGET_COMPLETIONS_ANNOTATION,
    TOPOLOGY_ANNOTATION,
    Strategy,
)
from placement.objects import (
    JobRef,
    completion_index,
    is_leader,
    job_key,
    job_ref_of_pod,
    owner_job_key,
    pin_shard,
    target_size,
    topology_key_of_job,
    topology_key_of_pod,
)
from placement.strategy import InvalidStrategy, elastic_ineligibility, select_strategy, strategy_of_job
from tests.placement.placement_pods import JOB, NS, UID, ZONE, job, node, pod


@pytest.mark.parametrize(
    ("annotations", "expected"),
    [
        ({}, None),
        ({JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: ZONE}, ZONE),
        ({TOPOLOGY_ANNOTATION: "rack"}, "rack"),
        ({TOPOLOGY_ANNOTATION: "rack", JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: ZONE}, "rack"),
        ({TOPOLOGY_ANNOTATION: "  ", JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: ZONE}, ZONE),
    ],
)
def test_topology_key_ours_wins_over_jobsets(annotations: dict[str, str], expected: str | None) -> None:
    assert topology_key_of_pod({"metadata": {"annotations": annotations}}) == expected


@pytest.mark.parametrize(
    ("meta", "template", "expected"),
    [
        (None, None, None),
        ({TOPOLOGY_ANNOTATION: "rack"}, None, "rack"),
        (None, {JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: ZONE}, ZONE),
        ({TOPOLOGY_ANNOTATION: "rack"}, {TOPOLOGY_ANNOTATION: ZONE}, "rack"),
    ],
)
def test_topology_key_of_job_reads_metadata_then_template(
    meta: dict[str, str] | None, template: dict[str, str] | None, expected: str | None
) -> None:
    assert topology_key_of_job(job(annotations=meta, template_annotations=template)) == expected


@pytest.mark.parametrize(
    ("metadata", "expected"),
    [
        ({}, None),
        (
            {"ownerReferences": [{"kind": "Job", "name": "j", "uid": "u", "controller": True}]},
            JobRef("j", "u"),
        ),
        # a non-controller owner is not the Job that manages the pod
        ({"ownerReferences": [{"kind": "Job", "name": "j", "uid": "u"}]}, None),
        ({"labels": {JOB_NAME_LABEL: "j"}}, JobRef("j", "")),
        ({"labels": {LEGACY_JOB_NAME_LABEL: "j", LEGACY_CONTROLLER_UID_LABEL: "u"}}, JobRef("j", "u")),
    ],
)
def test_job_ref_from_owner_references_then_labels(metadata: dict[str, Any], expected: JobRef | None) -> None:
    pod = {"metadata": {"namespace": NS, **metadata}}
    assert job_ref_of_pod(pod) == expected
    assert owner_job_key(pod) == (f"{NS}/{expected.name}" if expected else None)


@pytest.mark.parametrize(
    ("annotations", "completions", "size"),
    [
        ({TARGET_COMPLETIONS_ANNOTATION: "8"}, 1, 8),  # shrunk by the webhook: the recorded target
        ({TARGET_COMPLETIONS_ANNOTATION: " 8 "}, 3, 3),  # not as the webhook writes it: what the Job says
        ({TARGET_COMPLETIONS_ANNOTATION: "\u00b2"}, 3, 3),  # "²".isdigit() is true, int() refuses it
        ({}, 3, 3),
        ({TARGET_COMPLETIONS_ANNOTATION: "eight"}, 3, 3),  # unreadable: what the Job says
        ({}, None, 1),
    ],
)
def test_target_size_is_the_recorded_target_else_the_completions(
    annotations: dict[str, str], completions: int | None, size: int
) -> None:
    assert target_size(job(completions=completions, annotations=annotations)) == size


def test_job_key_is_jobsets_hash_of_namespace_and_job() -> None:
    expected = hashlib.sha1(f"{NS}/{JOB}".encode(), usedforsecurity=False).hexdigest()
    assert job_key(NS, JOB) == expected
    assert len(expected) == 40
    assert job_key("other", JOB) != expected
    assert job_key(NS, "other") != expected


@pytest.mark.parametrize(
    ("namespace", "name", "shards", "expected"),
    [
        (NS, JOB, 16, "7"),
        (NS, "trainer-workers-1", 16, "13"),
        ("bench-x-elastic", "job-3", 64, "31"),
        (NS, JOB, 1, "0"),
    ],
)
def test_pin_shard_is_a_stable_hash_of_namespace_and_name(
    namespace: str, name: str, shards: int, expected: str
) -> None:
    """Literal values: the first 32 bits of sha1(namespace/name) modulo the shards, the same in every process
    and release (Python's hash() is salted per process)."""
    digest = hashlib.sha1(f"{namespace}/{name}".encode(), usedforsecurity=False).digest()
    assert str(int.from_bytes(digest[:4], "big") % shards) == expected
    assert pin_shard(namespace, name, shards) == expected


@pytest.mark.parametrize("shards", [1, 2, 16, MAX_FOLLOWER_SHARDS])
def test_pin_shard_is_in_range_and_spreads_jobs_over_every_shard(shards: int) -> None:
    found = [pin_shard(NS, f"job-{i}", shards) for i in range(shards * 50)]
    assert set(found) == {str(k) for k in range(shards)}
    assert pin_shard("other", JOB, shards) in set(found)


def test_one_shard_is_shard_zero_for_every_job() -> None:
    assert {pin_shard(f"ns-{i}", f"job-{i}", 1) for i in range(100)} == {"0"}


@pytest.mark.parametrize("shards", [0, -1, MAX_FOLLOWER_SHARDS + 1])
def test_pin_shard_rejects_a_shard_count_out_of_range(shards: int) -> None:
    with pytest.raises(ValueError, match=f"1 to {MAX_FOLLOWER_SHARDS}"):
        pin_shard(NS, JOB, shards)


@pytest.mark.parametrize(
    ("metadata", "index", "leader"),
    [
        ({}, None, False),
        ({"annotations": {"batch.kubernetes.io/job-completion-index": "0"}}, "0", True),
        ({"labels": {JOB_COMPLETION_INDEX_LABEL: "0"}}, "0", True),
        ({"annotations": {"batch.kubernetes.io/job-completion-index": "3"}}, "3", False),
    ],
)
def test_leader_is_completion_index_zero(metadata: dict[str, Any], index: str | None, leader: bool) -> None:
    assert completion_index({"metadata": metadata}) == index
    assert is_leader({"metadata": metadata}) is leader


@pytest.mark.parametrize(
    ("annotations", "default", "expected"),
    [
        ({}, Strategy.ELASTIC, Strategy.ELASTIC),
        ({}, Strategy.GATE, Strategy.GATE),
        ({STRATEGY_ANNOTATION: "scheduling-gate"}, Strategy.ELASTIC, Strategy.SCHEDULING_GATE),
        ({STRATEGY_ANNOTATION: " affinity "}, Strategy.GATE, Strategy.AFFINITY),
    ],
)
def test_strategy_annotation_else_default(
    annotations: dict[str, str], default: Strategy, expected: Strategy
) -> None:
    assert select_strategy(annotations, default) is expected


def test_unknown_strategy_names_the_valid_values() -> None:
    with pytest.raises(InvalidStrategy, match="elastic, gate, scheduling-gate, affinity"):
        select_strategy({STRATEGY_ANNOTATION: "fast"}, Strategy.ELASTIC)


def test_job_strategy_from_metadata_then_template() -> None:
    assert (
        strategy_of_job(job(template_annotations={STRATEGY_ANNOTATION: "gate"}), Strategy.ELASTIC)
        is Strategy.GATE
    )
    both = job(
        annotations={STRATEGY_ANNOTATION: "affinity"}, template_annotations={STRATEGY_ANNOTATION: "gate"}
    )
    assert strategy_of_job(both, Strategy.ELASTIC) is Strategy.AFFINITY


@pytest.mark.parametrize(
    ("spec", "name", "reason"),
    [
        ({}, JOB, None),
        ({"mode": None}, JOB, "completionMode is NonIndexed"),
        ({"completions": 4, "parallelism": 2}, JOB, "completions (4) != parallelism (2)"),
        ({"completions": None}, JOB, "spec.completions is not set"),
        ({"completions": 1, "parallelism": 1}, JOB, "nothing to shrink"),
        ({"completions": 11, "parallelism": 11}, "j" * 61, "over the 63-character limit"),
        ({"extra_spec": {"managedBy": "kueue.x-k8s.io/multikueue"}}, JOB, "managedBy is 'kueue.x-k8s"),
        ({"extra_spec": {"managedBy": "kubernetes.io/job-controller"}}, JOB, None),
    ],
)
def test_elastic_eligibility(spec: dict[str, Any], name: str, reason: str | None) -> None:
    result = elastic_ineligibility(job(name=name, **spec))
    if reason is None:
        assert result is None
    else:
        assert result is not None
        assert reason in result


def test_hostname_limit_is_exact() -> None:
    assert elastic_ineligibility(job(name="j" * 61, completions=10, parallelism=10)) is None
    generated = job(name="", completions=10, parallelism=10)
    generated["metadata"]["generateName"] = "g" * 57  # + 5 random chars + "-9" = 64
    assert "64 characters" in str(elastic_ineligibility(generated))


def test_leader_affinity_terms_shape() -> None:
    affinity, anti = leader_affinity_terms("k1", ZONE, "1000")
    # No namespaceSelector: the affinity selects pods of the leader's own namespace only.
    assert affinity == {
        "labelSelector": {"matchExpressions": [{"key": JOB_KEY_LABEL, "operator": "In", "values": ["k1"]}]},
        "topologyKey": ZONE,
    }
    assert anti["labelSelector"]["matchExpressions"] == [
        {"key": JOB_KEY_LABEL, "operator": "Exists"},
        {"key": JOB_KEY_LABEL, "operator": "NotIn", "values": ["k1"]},
        {"key": PRIORITY_LABEL, "operator": "In", "values": ["1000"]},
    ]
    assert anti["namespaceSelector"] == {}  # exclusivity is cluster-wide


@pytest.mark.parametrize(
    ("spec", "expected"),
    [
        ({"priority": 1000}, "1000"),
        ({"priority": 0}, "0"),
        ({"priority": -5}, "-5"),
        ({"priority": 2000000000}, "2000000000"),
        # no Priority admission plugin ran: the scheduler reads an unset priority as 0
        ({}, "0"),
        ({"priority": None}, "0"),
        # not an int32 (never from the API server): treated as unset, never copied into a label
        ({"priority": "high"}, "0"),
        ({"priority": True}, "0"),
    ],
)
def test_pod_priority_is_the_label_value(spec: dict[str, Any], expected: str) -> None:
    assert pod_priority({"spec": spec}) == expected


@pytest.mark.parametrize(
    ("other_labels", "excluded"),
    [
        ({JOB_KEY_LABEL: "k2", PRIORITY_LABEL: "1000"}, True),
        # exclusivity holds within a priority level only
        ({JOB_KEY_LABEL: "k2", PRIORITY_LABEL: "10"}, False),
        # a pod admitted before priorities were labelled
        ({JOB_KEY_LABEL: "k2"}, False),
        # the Job's own pods, and non-exclusive pods
        ({JOB_KEY_LABEL: "k1", PRIORITY_LABEL: "1000"}, False),
        ({PRIORITY_LABEL: "1000"}, False),
    ],
)
def test_anti_affinity_selects_other_jobs_of_the_same_priority(
    other_labels: dict[str, str], excluded: bool
) -> None:
    _, anti = leader_affinity_terms("k1", ZONE, "1000")
    assert _selects(anti["labelSelector"], other_labels) is excluded


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    """The matchExpressions semantics of metav1.LabelSelector (In, NotIn, Exists)."""
    for expression in selector["matchExpressions"]:
        key, operator, values = expression["key"], expression["operator"], expression.get("values", [])
        present = key in labels
        if operator == "Exists" and not present:
            return False
        if operator == "In" and (not present or labels[key] not in values):
            return False
        if operator == "NotIn" and present and labels[key] in values:
            return False
    return True


def test_add_leader_affinity_keeps_existing_terms_and_is_idempotent() -> None:
    node_affinity: dict[str, Any] = {
        "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": []}
    }
    mine = {"labelSelector": {"matchLabels": {"app": "db"}}, "topologyKey": "kubernetes.io/hostname"}
    spec: dict[str, Any] = {
        "affinity": {
            "nodeAffinity": node_affinity,
            "podAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [mine]},
        }
    }
    add_leader_affinity(spec, "k1", ZONE, "0")
    once = str(spec)
    add_leader_affinity(spec, "k1", ZONE, "0")
    assert str(spec) == once
    required = spec["affinity"]["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    assert required[0] == mine
    assert len(required) == 2
    assert spec["affinity"]["nodeAffinity"] == node_affinity
    assert len(spec["affinity"]["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]) == 1


@pytest.mark.parametrize(
    ("labels", "domain", "selector"),
    [
        ({ZONE: "zone-b"}, "zone-b", {ZONE: "zone-b"}),
        ({"other": "x"}, None, {}),
        ({ZONE: ""}, None, {}),
    ],
)
def test_follower_node_selector_from_leader_node(
    labels: dict[str, str], domain: str | None, selector: dict[str, str]
) -> None:
    the_node = node(labels=labels)
    assert leader_domain(ZONE, the_node) == domain
    assert follower_node_selector(ZONE, the_node) == selector


def test_builders_are_consistent() -> None:
    p = pod(0)
    assert job_ref_of_pod(p) == JobRef(JOB, UID)
    assert is_leader(p)
