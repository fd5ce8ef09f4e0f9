"""The plugin next to Kueue, as an operator runs it (its console script against a fake API server): a
suspended Job whose Workload Kueue has not admitted is `queued-by-kueue`, with its LocalQueue and the
Workload's message, in `status` and `explain`; on a cluster without Kueue's CRDs (the Workload list answers
404) the same Job is `suspended` and nothing fails."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from kubectl_plugin.explain import explain_job
from placement.constants import JOBSET_GROUP, JOBSET_KIND, JOBSET_VERSION
from placement.status import Snapshot, WaitReason
from tests.placement.placement_pods import NS
from tests.placement.placement_status_objects import UNSCHEDULABLE, Obj, exclusive_job, exclusive_pod, pools
from tests.support.builders import make_workload
from tests.support.fake_api import FakeKubeApi
from tests.support.plugin_commands import PLUGIN, run, status_json

JOBSET_REFERENCE = {"apiVersion": f"{JOBSET_GROUP}/{JOBSET_VERSION}", "kind": JOBSET_KIND, "name": "train"}
NO_QUOTA = "couldn't assign flavors to pod set workers: insufficient unused quota for nvidia.com/gpu"


def kubeconfig(url: str, path: Path) -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [{"name": "c", "cluster": {"server": url}}],
                "users": [{"name": "u", "user": {}}],
                "contexts": [{"name": "x", "context": {"cluster": "c", "user": "u", "namespace": NS}}],
                "current-context": "x",
            }
        )
    )
    return path


def queued_job() -> Obj:
    """JobSet `train`'s Job, suspended while Kueue holds the JobSet."""
    the_job = exclusive_job("train-workers-0", jobset="train", suspend=True)
    the_job["metadata"]["ownerReferences"] = [{**JOBSET_REFERENCE, "uid": "train-uid", "controller": True}]
    return the_job


def no_quota_workload() -> Obj:
    workload = (
        make_workload("jobset-train-1a2b3", NS)
        .owned_by(JOBSET_KIND, "train", "train-uid", JOBSET_REFERENCE["apiVersion"])
        .queue("user-queue")
        .condition("QuotaReserved", "False", reason="Pending", message=NO_QUOTA)
    )
    return workload.obj()


def queued_cluster(api: FakeKubeApi) -> None:
    """Two pools, and JobSet `train`'s suspended Job with a Workload Kueue found no quota for."""
    for node in pools(2):
        api.put("nodes", node)
    api.put("jobs", queued_job())
    api.put("workloads", no_quota_workload())


@pytest.mark.parametrize("kueue", [True, False], ids=["kueue", "no-kueue-crds"])
def test_status_says_queued_by_kueue_where_kueue_is_and_suspended_where_it_is_not(
    kueue: bool, tmp_path: Path
) -> None:
    with FakeKubeApi() as api:
        api.serves_kueue = kueue
        queued_cluster(api)
        (waiting,) = status_json(kubeconfig(api.url, tmp_path / "config"))["waiting"]
    if kueue:
        assert waiting["reason"] == WaitReason.QUEUED_BY_KUEUE
        assert waiting["message"] == (
            f"queued by Kueue in LocalQueue {NS}/user-queue: Workload jobset-train-1a2b3: {NO_QUOTA}"
        )
    else:
        assert waiting["reason"] == WaitReason.SUSPENDED


def test_explain_says_queued_by_kueue_with_the_workloads_message(tmp_path: Path) -> None:
    with FakeKubeApi() as api:
        api.serves_kueue = True
        queued_cluster(api)
        result = run([str(PLUGIN), "explain", "job/train-workers-0"], kubeconfig(api.url, tmp_path / "c"))
    assert result.returncode == 0, result.stderr
    assert "Waiting for:     queued-by-kueue" in result.stdout
    assert f"LocalQueue {NS}/user-queue" in result.stdout
    assert NO_QUOTA in result.stdout


def test_explain_names_kueues_quota_as_what_unblocks_it_not_a_resume() -> None:
    the_job = queued_job()
    text = explain_job(Snapshot(pools(2), [], [the_job], workloads=[no_quota_workload()]), the_job, [])
    assert "Waiting for:     queued-by-kueue" in text
    assert "nominalQuota" in text
    assert "kubectl patch job" not in text


def tas_placed_workload(*, topology: bool) -> Obj:
    """JobSet `train`'s admitted Workload; with `topology`, TAS assigned its 8 pods to one node."""
    workload = (
        make_workload("jobset-train-1a2b3", NS)
        .owned_by(JOBSET_KIND, "train", "train-uid", JOBSET_REFERENCE["apiVersion"])
        .queue("user-queue")
        .condition("Admitted", "True", reason="Admitted", message="The workload is admitted")
        .obj()
    )
    assignment: Obj = {"name": "workers", "count": 8, "flavors": {"nvidia.com/gpu": "tas-flavor"}}
    if topology:
        assignment["topologyAssignment"] = {
            "levels": ["kubernetes.io/hostname"],
            "slices": [{"domainCount": 1, "valuesPerLevel": [{"universal": "node-0"}]}],
        }
    workload["status"]["admission"] = {"clusterQueue": "cluster-queue", "podSetAssignments": [assignment]}
    return workload


@pytest.mark.parametrize("topology", [True, False], ids=["placed by TAS", "no topology assignment"])
def test_a_job_whose_workload_tas_placed_waits_placed_by_kueue_tas_not_for_room(topology: bool) -> None:
    the_job = queued_job()
    the_job["spec"]["suspend"] = False
    leader = exclusive_pod("train-workers-0", 0, verdict=UNSCHEDULABLE)
    snapshot = Snapshot(pools(2), [leader], [the_job], workloads=[tas_placed_workload(topology=topology)])
    text = explain_job(snapshot, the_job, [])
    if topology:
        assert "Waiting for:     placed-by-kueue-tas" in text
        assert "Workload jobset-train-1a2b3 assigns them to domains at kubernetes.io/hostname" in text
        assert "a flavor without spec.topologyName" in text
    else:
        assert "Waiting for:     leader-unschedulable" in text
