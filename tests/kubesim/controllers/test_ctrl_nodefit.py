"""Pure node filters: quantities, resources, taints/tolerations, node selector and node affinity."""

from typing import Any

import pytest

from kubesim.controllers.nodefit import (
    Resources,
    first_untolerated,
    node_allocatable,
    node_selector_matches,
    pod_requests,
    required_node_affinity_matches,
    tolerates,
)
from kubesim.controllers.quantity import int_value, milli_value


@pytest.mark.parametrize(
    ("text", "milli", "whole"),
    [
        ("500m", 500, 1),
        ("2", 2000, 2),
        ("1.5", 1500, 2),
        ("1Ki", 1024000, 1024),
        ("1Gi", 1073741824000, 1073741824),
        ("1k", 1000000, 1000),
        ("1e3", 1000000, 1000),
        ("100n", 1, 1),
        (3, 3000, 3),
    ],
)
def test_quantities(text: Any, milli: int, whole: int) -> None:
    assert milli_value(text) == milli
    assert int_value(text) == whole


@pytest.mark.parametrize("text", ["", "abc", "1.2.3", "5 Gi", "1GB"])
def test_malformed_quantity_names_the_text(text: str) -> None:
    with pytest.raises(ValueError, match="quantities must match"):
        milli_value(text)


def test_pod_requests_sum_containers_use_limits_as_default_and_init_max() -> None:
    pod = {
        "spec": {
            "containers": [
                {"resources": {"requests": {"cpu": "1", "memory": "1Gi"}}},
                {"resources": {"limits": {"cpu": "500m", "nvidia.com/gpu": "4"}}},
            ],
            "initContainers": [{"resources": {"requests": {"cpu": "3"}}}],
            "overhead": {"cpu": "100m"},
        }
    }
    assert pod_requests(pod) == Resources(cpu=3100, memory=2**30, gpu=4, pods=1)


def test_node_allocatable_reads_status() -> None:
    node = {"status": {"allocatable": {"cpu": "8", "memory": "32Gi", "nvidia.com/gpu": "8", "pods": "110"}}}
    assert node_allocatable(node) == Resources(8000, 32 * 2**30, 8, 110)


@pytest.mark.parametrize(
    ("requested", "wanted", "missing"),
    [
        (Resources(0, 0, 0, 0), Resources(1000, 0, 8, 1), []),
        (Resources(0, 0, 1, 0), Resources(1000, 0, 8, 1), ["Insufficient nvidia.com/gpu"]),
        (Resources(7500, 0, 0, 0), Resources(1000, 0, 0, 1), ["Insufficient cpu"]),
        (Resources(0, 0, 0, 110), Resources(0, 0, 0, 1), ["Too many pods"]),
    ],
)
def test_resource_shortfalls(requested: Resources, wanted: Resources, missing: list[str]) -> None:
    assert requested.shortfalls(wanted, Resources(8000, 2**40, 8, 110)) == missing


@pytest.mark.parametrize(
    ("toleration", "taint", "expected"),
    [
        ({"operator": "Exists"}, {"key": "a", "effect": "NoSchedule"}, True),
        ({"key": "a", "operator": "Exists"}, {"key": "a", "value": "x", "effect": "NoSchedule"}, True),
        ({"key": "a", "value": "x"}, {"key": "a", "value": "x", "effect": "NoSchedule"}, True),
        ({"key": "a", "value": "y"}, {"key": "a", "value": "x", "effect": "NoSchedule"}, False),
        (
            {"key": "a", "operator": "Exists", "effect": "NoExecute"},
            {"key": "a", "effect": "NoSchedule"},
            False,
        ),
        ({"key": "b", "operator": "Exists"}, {"key": "a", "effect": "NoSchedule"}, False),
    ],
)
def test_tolerations(toleration: dict[str, Any], taint: dict[str, Any], expected: bool) -> None:
    assert tolerates(toleration, taint) is expected


def test_prefer_no_schedule_taints_never_filter() -> None:
    node = {
        "spec": {
            "taints": [{"key": "soft", "effect": "PreferNoSchedule"}, {"key": "hard", "effect": "NoSchedule"}]
        }
    }
    taints = node["spec"]["taints"]
    assert first_untolerated([], taints) == {"key": "hard", "effect": "NoSchedule"}
    assert first_untolerated([{"key": "hard", "operator": "Exists"}], taints) is None


NODE = {"metadata": {"name": "n1", "labels": {"pool": "a", "gen": "5", "zone": "z1"}}}


@pytest.mark.parametrize(
    ("expressions", "expected"),
    [
        ([{"key": "pool", "operator": "In", "values": ["a", "b"]}], True),
        ([{"key": "pool", "operator": "NotIn", "values": ["a"]}], False),
        ([{"key": "missing", "operator": "NotIn", "values": ["a"]}], True),
        ([{"key": "pool", "operator": "Exists"}], True),
        ([{"key": "pool", "operator": "DoesNotExist"}], False),
        ([{"key": "gen", "operator": "Gt", "values": ["4"]}], True),
        ([{"key": "gen", "operator": "Lt", "values": ["4"]}], False),
        ([{"key": "pool", "operator": "Gt", "values": ["4"]}], False),
        (
            [
                {"key": "pool", "operator": "In", "values": ["a"]},
                {"key": "zone", "operator": "In", "values": ["z2"]},
            ],
            False,
        ),
    ],
)
def test_required_node_affinity_expressions(expressions: list[dict[str, Any]], expected: bool) -> None:
    pod = {
        "spec": {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": expressions}]
                    }
                }
            }
        }
    }
    assert required_node_affinity_matches(pod, NODE) is expected


def test_node_affinity_terms_are_ored_and_match_fields_by_name() -> None:
    terms = [
        {"matchExpressions": [{"key": "pool", "operator": "In", "values": ["zzz"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
    ]
    pod = {
        "spec": {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": terms}
                }
            }
        }
    }
    assert required_node_affinity_matches(pod, NODE)
    empty: dict[str, Any] = {
        "spec": {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [{}]}
                }
            }
        }
    }
    assert not required_node_affinity_matches(empty, NODE)


def test_a_term_with_an_unknown_operator_matches_no_node() -> None:
    """nodeSelectorRequirementsAsSelector rejects the operator: the term selects nothing (no exception)."""
    pod = {
        "spec": {
            "affinity": {
                "nodeAffinity": {
                    "requiredDuringSchedulingIgnoredDuringExecution": {
                        "nodeSelectorTerms": [{"matchExpressions": [{"key": "pool", "operator": "Near"}]}]
                    }
                }
            }
        }
    }
    assert not required_node_affinity_matches(pod, NODE)


def test_node_selector() -> None:
    assert node_selector_matches({"spec": {"nodeSelector": {"pool": "a", "zone": "z1"}}}, NODE)
    assert not node_selector_matches({"spec": {"nodeSelector": {"pool": "b"}}}, NODE)
    assert node_selector_matches({"spec": {}}, NODE)
