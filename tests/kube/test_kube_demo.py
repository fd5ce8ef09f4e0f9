"""`make demo` / `make run` logic on the real control plane, on `make run`'s cluster shape: the shipped
examples applied and followed until placed, the table and the progress lines, the scheduler's reason when a
Job cannot be placed, and the stall report with its hint said once when the example does not fit its pools.
`run -f` applies any kind the API server serves, found through discovery, and says in one line which one it
cannot.
"""

from __future__ import annotations

import argparse
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from devstack.__main__ import main as devstack_main
from devstack.__main__ import place
from devstack.demo import apply, apply_and_follow
from devstack.scenario import PlacementError, load_manifests
from devstack.shape import ClusterShape
from devstack.stack import Stack
from kubekit.resources import UnservedKind
from placement.constants import GKE_NODEPOOL_LABEL, JOBSET_REPLICATED_JOB_NAME_LABEL, RESIZE_LABEL, ROLE_LABEL
from tests.kube.conftest import kube_options
from tests.kube.kube_support import audit_log, pod_creates

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-demo")]

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
EXAMPLE = EXAMPLES / "jobset-exclusive.yaml"
Obj = dict[str, Any]
CONFIG_MAP: Obj = {
    "apiVersion": "v1",
    "kind": "ConfigMap",
    "metadata": {"name": "settings"},
    "data": {"a": "1"},
}
SERVICE: Obj = {
    "apiVersion": "v1",
    "kind": "Service",
    "metadata": {"name": "trainer"},
    "spec": {"ports": [{"port": 80}]},
}
QUEUE: Obj = {
    "apiVersion": "kueue.x-k8s.io/v1beta1",
    "kind": "ClusterQueue",
    "metadata": {"name": "cq"},
    "spec": {},
}


MAKE_RUN = ClusterShape(nodes=32, pools=8, gpus_per_node=8)
"""`make run`'s cluster, which the examples are sized for: 8 pools of 4 eight-GPU nodes."""


@pytest.fixture(scope="module")
def kube_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with Stack(kube_options(tmp_path_factory.mktemp("kube-demo"), cluster=MAKE_RUN)) as stack:
        yield stack


def scaled_example(replicas: int = 3, pods: int = 4, gpus: int = 4) -> list[dict[str, Any]]:
    """The shipped example, scaled to the small cluster: `replicas` Jobs of `pods` x `gpus` GPUs."""
    (jobset,) = load_manifests(EXAMPLE)
    rjob = jobset["spec"]["replicatedJobs"][0]
    rjob["replicas"] = replicas
    rjob["template"]["spec"]["completions"] = rjob["template"]["spec"]["parallelism"] = pods
    resources = rjob["template"]["spec"]["template"]["spec"]["containers"][0]["resources"]
    resources["requests"]["nvidia.com/gpu"] = resources["limits"]["nvidia.com/gpu"] = str(gpus)
    return [jobset]


def test_the_example_scaled_down_is_placed_each_job_whole_in_its_own_pool(
    kube_stack: Stack, namespace: str
) -> None:
    lines: list[str] = []
    since = audit_log(kube_stack).mark()
    observation = apply_and_follow(
        kube_stack, scaled_example(), namespace=namespace, timeout=120, echo=lines.append
    )
    assert len(observation.statuses) == 3
    assert all(s.state == "running" and s.pods_running == s.target == 4 for s in observation.statuses)
    assert all(len(s.domains) == 1 for s in observation.statuses)
    assert len({s.domains[0] for s in observation.statuses}) == 3
    assert all(s.resized for s in observation.statuses)  # elastic: every Job went back to full size
    assert observation.problems == []
    assert pod_creates(kube_stack, namespace, since=since) == {201: 12}  # no pod refused
    table = observation.table.splitlines()
    assert table[0].split()[:3] == ["Job", "node", "pool"]
    assert len(table) == 2 + 3
    assert lines[0] == f"created JobSet {namespace}/training"
    assert any("3 running" in line for line in lines)


def test_unplaceable_jobs_fail_with_the_schedulers_reason(kube_stack: Stack, namespace: str) -> None:
    too_big = scaled_example(replicas=2, pods=2, gpus=16)  # 16 GPUs per pod: no node has more than 8
    with pytest.raises(PlacementError, match=r"not every Job was placed within 20s") as err:
        apply_and_follow(kube_stack, too_big, namespace=namespace, timeout=20, echo=lambda _: None)
    assert "2 pods: Unschedulable: 0/32 nodes are available: 32 Insufficient nvidia.com/gpu." in str(
        err.value
    )
    assert "--gpus-per-node 16" in str(err.value)


def test_the_indexed_job_and_per_job_strategy_examples(kube_stack: Stack, namespace: str) -> None:
    """The shipped examples applied as a user would (`kubectl apply -f examples/...`): a plain Indexed Job
    and a JobSet whose replicated Jobs each name their strategy."""
    objects = load_manifests(EXAMPLES / "indexed-job.yaml") + load_manifests(
        EXAMPLES / "jobset-per-job-strategy.yaml"
    )
    placed = apply_and_follow(kube_stack, objects, namespace=namespace, timeout=120, echo=print)
    by_name = {s.job.split("/")[1]: s for s in placed.statuses}
    assert sorted(by_name) == ["eval-sweep", "serve-and-train-inference-0", "serve-and-train-trainer-0"]
    assert all(len(s.domains) == 1 for s in by_name.values())
    assert len({s.domains for s in by_name.values()}) == 3
    # scheduling-gate: admitted at full size, never shrunk; the default (elastic) Jobs were resized.
    assert by_name["serve-and-train-inference-0"].resized is None
    assert by_name["eval-sweep"].resized is True
    assert by_name["serve-and-train-trainer-0"].resized is True

    jobs = {j["metadata"]["name"]: j for j in kube_stack.client.list("Job", namespace=namespace)}
    assert RESIZE_LABEL not in (jobs["serve-and-train-inference-0"]["metadata"].get("labels") or {})
    inference_followers = kube_stack.client.list(
        "Pod",
        namespace=namespace,
        label_selector=f"{JOBSET_REPLICATED_JOB_NAME_LABEL}=inference,{ROLE_LABEL}=follower",
    )
    assert len(inference_followers) == 3
    for pod in inference_followers:
        assert not pod["spec"].get("schedulingGates")
        assert (
            pod["spec"]["nodeSelector"][GKE_NODEPOOL_LABEL]
            == by_name["serve-and-train-inference-0"].domains[0]
        )


def test_run_says_once_why_the_example_stalls_on_pools_too_small_for_it(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The shipped example (4 Jobs x 8 pods x 4 GPUs) on 4 pools of 2 nodes x 8 GPUs: half of each Job fits.
    argv = ["run", "--nodes", "8", "--pools", "4", "--workdir", str(tmp_path / "w")]
    assert devstack_main([*argv, "--stall-seconds", "2", "--timeout", "60"]) == 1
    out, err = capsys.readouterr()
    reports = [block.split("] ", 1) for block in out.split("\n[") if "] no progress for " in block]
    pictures = [re.sub(r"no progress for \d+s", "", report) for _, report in reports]
    last_at, last = float(reports[-1][0].strip(" s")), reports[-1][1]
    assert "(4 Jobs: 4 resized)" in last, out
    assert pictures.count(pictures[-1]) == 1, out  # said once ...
    assert last_at < 60 - 10, (
        out
    )  # ... though rechecked every second for at least 10 s after, until the timeout
    assert "\n  16 pods: Unschedulable: 0/8 nodes are available: 2 Insufficient nvidia.com/gpu, " in last
    hint = last.split("\n  hint: ")[1]
    assert hint.startswith(
        "4 Jobs (default/training-workers-0, ...) are too large: 8 pods x 4 nvidia.com/gpu need 32"
    )
    assert "--nodes 16 (with --pools 4: 4 nodes per pool)" in hint
    assert "not every Job was placed within 60s" in err
    assert "hint: 4 Jobs" in err  # the timeout says the same, from the same diagnosis


@pytest.mark.parametrize(("obj", "collection"), [(CONFIG_MAP, "configmaps"), (SERVICE, "services")])
def test_kinds_outside_the_clients_table_are_found_in_discovery(
    kube_stack: Stack, namespace: str, obj: Obj, collection: str
) -> None:
    created = kube_stack.client.create(obj, namespace=namespace)
    assert (created["kind"], created["metadata"]["namespace"]) == (obj["kind"], namespace)
    assert created["metadata"]["name"] == obj["metadata"]["name"]
    assert kube_stack.client.served_type(str(obj["apiVersion"]), str(obj["kind"])).plural == collection


@pytest.mark.parametrize(
    ("api_version", "kind", "message"),
    [
        (
            "kueue.x-k8s.io/v1beta1",
            "ClusterQueue",
            "the API server does not serve kueue.x-k8s.io/v1beta1 (kind ClusterQueue)",
        ),
        ("v1", "Potato", "the API server serves no kind Potato in v1"),
    ],
)
def test_a_kind_the_api_server_does_not_serve_is_named(
    kube_stack: Stack, api_version: str, kind: str, message: str
) -> None:
    with pytest.raises(UnservedKind) as refused:
        kube_stack.client.served_type(api_version, kind)
    assert str(refused.value) == message


def test_run_f_creates_what_it_can_and_names_what_it_cannot(kube_stack: Stack, namespace: str) -> None:
    lines: list[str] = []
    with pytest.raises(PlacementError) as refused:
        apply(kube_stack, [CONFIG_MAP, QUEUE], namespace=namespace, echo=lines.append)
    assert lines == [f"created ConfigMap {namespace}/settings"]
    assert str(refused.value) == (
        "cannot create ClusterQueue cq: the API server does not serve kueue.x-k8s.io/v1beta1 "
        "(kind ClusterQueue)"
    )


def test_a_manifest_without_jobs_has_nothing_to_place(
    kube_stack: Stack, namespace: str, capsys: pytest.CaptureFixture[str]
) -> None:
    args = argparse.Namespace(namespace=namespace, timeout=60.0, stall_seconds=30.0)
    assert place(kube_stack, [CONFIG_MAP, SERVICE], args) == ""
    out = capsys.readouterr().out
    assert f"created Service {namespace}/trainer" in out
    assert out.rstrip().endswith("nothing to place: the manifests hold no Job or JobSet")
