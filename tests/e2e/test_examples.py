"""The shipped examples, applied to a real stack exactly as a user would (`kubectl apply -f examples/...`)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from devstack.commands import KubesimFlags
from devstack.demo import apply_and_follow
from devstack.scenario import load_manifests
from devstack.stack import Stack, StackOptions
from placement.constants import GKE_NODEPOOL_LABEL, JOBSET_REPLICATED_JOB_NAME_LABEL, RESIZE_LABEL, ROLE_LABEL

pytestmark = pytest.mark.e2e

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """The `make run` cluster shape: 32 nodes x 8 GPUs in 8 pools of 4 nodes."""
    cluster = KubesimFlags(nodes=32, pools=8, gpus_per_node=8, time_scale=0.05)
    with Stack(StackOptions(cluster=cluster, workdir=tmp_path_factory.mktemp("examples"))) as running:
        yield running


def test_jobset_exclusive_example_fills_four_pools(stack: Stack) -> None:
    placed = apply_and_follow(
        stack,
        load_manifests(EXAMPLES / "jobset-exclusive.yaml"),
        namespace="training",
        timeout=90,
        echo=print,
    )
    assert [s.pods_running for s in placed.statuses] == [8, 8, 8, 8]
    assert len({s.domains for s in placed.statuses}) == 4
    assert all(len(s.domains) == 1 and s.resized for s in placed.statuses)


def test_indexed_job_and_per_job_strategy_examples(stack: Stack) -> None:
    objects = load_manifests(EXAMPLES / "indexed-job.yaml") + load_manifests(
        EXAMPLES / "jobset-per-job-strategy.yaml"
    )
    placed = apply_and_follow(stack, objects, namespace="mixed", timeout=90, echo=print)
    by_name = {s.job.split("/")[1]: s for s in placed.statuses}
    assert sorted(by_name) == ["eval-sweep", "serve-and-train-inference-0", "serve-and-train-trainer-0"]
    assert all(len(s.domains) == 1 for s in by_name.values())
    assert len({s.domains for s in by_name.values()}) == 3
    # scheduling-gate: admitted at full size, never shrunk; the default (elastic) Jobs were resized.
    assert by_name["serve-and-train-inference-0"].resized is None
    assert by_name["eval-sweep"].resized is True
    assert by_name["serve-and-train-trainer-0"].resized is True

    jobs = {j["metadata"]["name"]: j for j in stack.client.list("Job", namespace="mixed")}
    assert RESIZE_LABEL not in (jobs["serve-and-train-inference-0"]["metadata"].get("labels") or {})
    inference_followers = stack.client.list(
        "Pod",
        namespace="mixed",
        label_selector=f"{JOBSET_REPLICATED_JOB_NAME_LABEL}=inference,{ROLE_LABEL}=follower",
    )
    assert len(inference_followers) == 3
    for pod in inference_followers:
        assert not pod["spec"].get("schedulingGates")
        assert (
            pod["spec"]["nodeSelector"][GKE_NODEPOOL_LABEL]
            == by_name["serve-and-train-inference-0"].domains[0]
        )
