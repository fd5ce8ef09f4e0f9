"""Defaulting the API server applies (what webhooks and controllers see)."""

from __future__ import annotations

from typing import Any

import pytest

from kubesim.apiserver.defaults import apply_defaults, prepare_for_create, qos_class


@pytest.mark.parametrize(
    ("resources", "expected"),
    [
        ({}, "BestEffort"),
        ({"requests": {"cpu": "1"}}, "Burstable"),
        ({"limits": {"cpu": "1", "memory": "1Gi"}}, "Guaranteed"),
        ({"requests": {"cpu": "1", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}}, "Guaranteed"),
        (
            {"requests": {"cpu": "500m", "memory": "1Gi"}, "limits": {"cpu": "1", "memory": "1Gi"}},
            "Burstable",
        ),
        ({"limits": {"nvidia.com/gpu": "8"}}, "Burstable"),
    ],
)
def test_qos_class(resources: dict[str, Any], expected: str) -> None:
    assert qos_class({"containers": [{"name": "c", "resources": resources}]}) == expected


def test_job_defaults_and_uid_keyed_selector() -> None:
    job: dict[str, Any] = {
        "metadata": {"name": "j", "uid": "u-1"},
        "spec": {"template": {"spec": {"containers": [{"name": "c", "image": "busybox"}]}}},
    }
    apply_defaults("jobs", job)
    assert job["spec"]["completions"] == 1
    assert job["spec"]["parallelism"] == 1
    assert job["spec"]["completionMode"] == "NonIndexed"
    assert job["spec"]["backoffLimit"] == 6
    assert job["spec"]["template"]["spec"]["containers"][0]["imagePullPolicy"] == "Always"
    prepare_for_create("jobs", job)
    assert job["spec"]["selector"] == {"matchLabels": {"batch.kubernetes.io/controller-uid": "u-1"}}
    assert job["spec"]["template"]["metadata"]["labels"]["batch.kubernetes.io/job-name"] == "j"


def test_work_queue_job_keeps_completions_unset() -> None:
    job: dict[str, Any] = {"metadata": {"name": "j"}, "spec": {"parallelism": 3, "template": {"spec": {}}}}
    apply_defaults("jobs", job)
    assert job["spec"].get("completions") is None


def test_namespace_gets_its_name_label() -> None:
    ns: dict[str, Any] = {"metadata": {"name": "team-a"}}
    prepare_for_create("namespaces", ns)
    assert ns["metadata"]["labels"] == {"kubernetes.io/metadata.name": "team-a"}
    assert ns["status"] == {"phase": "Active"}
