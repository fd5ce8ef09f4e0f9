"""JobSet's own exclusive placement in kubesim, end to end on the in-process API server with NO project
webhook: JobSet's pod webhooks (mpod.kb.io / vpod.kb.io) and its pod reconciler, as a JobSet install runs
them (kubernetes-sigs/jobset pkg/webhooks/pod_webhook.go, pkg/controllers/pod_controller.go).

The scheduler is left out so the test binds leaders itself: "leader unbound" is then a state the test
holds, not a race it hopes to win.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest

from kubesim.apiserver.server import ApiServer
from kubesim.controllers import Controllers, ControllerSettings
from kubesim.controllers.jobset_constants import PRIORITY_LABEL
from kubesim.controllers.jobset_jobs import job_key
from kubesim.errors import ApiError
from kubesim.stats import Stats
from placement.constants import (
    GKE_NODEPOOL_LABEL,
    JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION,
    JOBSET_JOB_KEY_LABEL,
)
from tests.kubesim.controllers.ctrl_harness import Cluster, Run, cluster, index_of, pod_spec

pytestmark = pytest.mark.timeout(60)

Obj = dict[str, Any]
WITHOUT_SCHEDULER = ("job-controller", "jobset-controller", "kubelet")
NOT_SET = 'admission webhook "vpod.kb.io" denied the request: follower pod node selector not set'


def _jobset(name: str = "train", size: int = 3, backoff_limit: int = 0) -> Obj:
    return {
        "apiVersion": "jobset.x-k8s.io/v1alpha2",
        "kind": "JobSet",
        "metadata": {
            "name": name,
            "namespace": "default",
            "annotations": {JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: GKE_NODEPOOL_LABEL},
        },
        "spec": {
            "replicatedJobs": [
                {
                    "name": "w",
                    "replicas": 1,
                    "template": {
                        "spec": {
                            "completionMode": "Indexed",
                            "completions": size,
                            "parallelism": size,
                            "backoffLimit": backoff_limit,
                            "template": {"spec": pod_spec(gpus=1)},
                        }
                    },
                }
            ]
        },
    }


async def _pods_by_index(c: Cluster) -> dict[int, Obj]:
    return {index_of(p): p for p in await c.pods() if not p["metadata"].get("deletionTimestamp")}


async def _leader(c: Cluster) -> Obj | None:
    return (await _pods_by_index(c)).get(0)


async def _bind(c: Cluster, pod: Obj, pool: str) -> str:
    nodes, _ = await c.server.list("nodes", label_selector=f"{GKE_NODEPOOL_LABEL}={pool}")
    node: str = nodes[0]["metadata"]["name"]
    binding = {"apiVersion": "v1", "kind": "Binding", "metadata": {"name": pod["metadata"]["name"]}}
    binding["target"] = {"kind": "Node", "name": node}
    await c.server.create("pods", binding, namespace="default", subresource="binding")
    return node


async def _failed_create_messages(c: Cluster) -> list[str]:
    events, _ = await c.server.list("events", namespace="default", field_selector="reason=FailedCreate")
    return [str(e.get("message") or e.get("note")) for e in events]


def test_leader_gets_jobsets_affinities_followers_are_denied_until_it_binds_then_pinned(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=4, pools=2, components=WITHOUT_SCHEDULER) as c:
            await c.server.create("jobsets", _jobset(), namespace="default")
            leader = await c.wait_for(lambda: _leader(c), 10, "the leader pod")
            key = job_key("default", "train-w-0")
            assert leader["metadata"]["labels"][PRIORITY_LABEL] == "0"
            affinity = leader["spec"]["affinity"]
            assert affinity["podAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == [
                {
                    "labelSelector": {
                        "matchExpressions": [{"key": JOBSET_JOB_KEY_LABEL, "operator": "In", "values": [key]}]
                    },
                    "topologyKey": GKE_NODEPOOL_LABEL,
                    "namespaceSelector": {},
                }
            ]
            assert affinity["podAntiAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"] == [
                {
                    "labelSelector": {
                        "matchExpressions": [
                            {"key": JOBSET_JOB_KEY_LABEL, "operator": "Exists"},
                            {"key": JOBSET_JOB_KEY_LABEL, "operator": "NotIn", "values": [key]},
                            {"key": PRIORITY_LABEL, "operator": "In", "values": ["0"]},
                        ]
                    },
                    "topologyKey": GKE_NODEPOOL_LABEL,
                    "namespaceSelector": {},
                }
            ]

            # The leader is unbound: the Job controller's follower creates are denied by vpod.kb.io.
            messages = await c.wait_for(lambda: _failed_create_messages(c), 10, "a FailedCreate event")
            assert messages == [f"Error creating: {NOT_SET}"] * len(messages)
            assert c.stats.jobset_webhook_denied >= 1
            assert c.stats.admission_calls == 0  # no external webhook was called
            assert sorted(await _pods_by_index(c)) == [0]
            follower = {**leader, "metadata": {**leader["metadata"], "name": "train-w-0-1-abcde"}}
            follower["metadata"]["annotations"] = {
                **leader["metadata"]["annotations"],
                "batch.kubernetes.io/job-completion-index": "1",
            }
            follower["spec"] = pod_spec(gpus=1)
            with pytest.raises(ApiError) as denied:  # what any client sees
                await c.server.create("pods", follower, namespace="default")
            assert (denied.value.status, denied.value.reason, denied.value.message) == (
                403,
                "Forbidden",
                NOT_SET,
            )

            await _bind(c, leader, "pool-01")
            pods = await c.wait_for(lambda: _all_created(c, 3), 20, "the followers, once the leader bound")
            for index in (1, 2):
                assert pods[index]["spec"]["nodeSelector"] == {GKE_NODEPOOL_LABEL: "pool-01"}
                assert "affinity" not in pods[index]["spec"]

    run(scenario())


def test_followers_disagreeing_with_a_rescheduled_leader_are_marked_and_deleted(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=4, pools=2, components=WITHOUT_SCHEDULER) as c:
            # The deleted leader and the two followers the reconciler deletes count as failed pods
            # (isPodFailed; no podFailurePolicy ignores DisruptionTarget here): allow them.
            await c.server.create("jobsets", _jobset(backoff_limit=3), namespace="default")
            leader = await c.wait_for(lambda: _leader(c), 10, "the leader pod")
            await _bind(c, leader, "pool-00")
            pods = await c.wait_for(lambda: _all_created(c, 3), 20, "followers pinned to pool-00")
            old_followers = {pods[i]["metadata"]["uid"] for i in (1, 2)}
            assert {pods[i]["spec"]["nodeSelector"][GKE_NODEPOOL_LABEL] for i in (1, 2)} == {"pool-00"}
            _, version = await c.server.list("pods", namespace="default")
            history = c.server.watch("pods", namespace="default", resource_version=version)

            # The leader goes away and its replacement lands in the other pool.
            await c.server.delete(
                "pods", leader["metadata"]["name"], namespace="default", grace_period_seconds=0
            )
            new_leader = await c.wait_for(lambda: _new_leader(c, leader), 20, "a new leader pod")
            await _bind(c, new_leader, "pool-01")

            pods = await c.wait_for(
                lambda: _followers_in(c, "pool-01", old_followers), 20, "followers re-pinned"
            )
            assert sorted(pods) == [0, 1, 2]
            marked = await _violations_until_deleted(history, old_followers)
            assert set(marked) == old_followers  # marked before deleted
            for condition in marked.values():
                assert (condition["status"], condition["reason"], condition["message"]) == (
                    "True",
                    "ExclusivePlacementViolation",
                    "Pod violated JobSet exclusive placement policy",
                )

    run(scenario())


def test_the_webhooks_read_the_jobset_managers_cache_not_the_api_server(run: Run) -> None:
    """A follower created right after its leader's binding, before the JobSet manager's watch delivered
    the binding, is denied as if the leader were unbound; once the cache has it, the follower is pinned."""

    async def scenario() -> None:
        async with cluster(nodes=4, pools=2, components=("jobset-controller",)) as c:
            placement = c.controllers.jobset_placement
            assert placement is not None
            cache = placement.pods

            def cached_node() -> str | None:
                pod = cache.get(key)
                assert pod is not None, f"{key} left the JobSet manager's cache"
                node: str | None = pod["spec"].get("nodeName")
                return node

            leader = _child_job_pod("train-w-0-0-aaaaa", index="0")
            leader = await c.server.create("pods", leader, namespace="default")
            key = f"default/{leader['metadata']['name']}"
            await c.wait_for(lambda: cache.get(key), 10, "the leader in the JobSet manager's cache")

            await _bind(c, leader, "pool-01")
            # No await suspends between the binding and this create, so the watch event is still queued.
            assert (await c.server.get("pods", leader["metadata"]["name"], namespace="default"))["spec"][
                "nodeName"
            ]
            assert not cached_node()
            with pytest.raises(ApiError) as denied:
                await c.server.create("pods", _child_job_pod("train-w-0-1-bbbbb"), namespace="default")
            assert denied.value.message == NOT_SET

            await c.wait_for(cached_node, 10, "the binding in the cache")
            follower = await c.server.create("pods", _child_job_pod("train-w-0-1-ccccc"), namespace="default")
            assert follower["spec"]["nodeSelector"] == {GKE_NODEPOOL_LABEL: "pool-01"}

    run(scenario())


def _child_job_pod(name: str, index: str = "1") -> Obj:
    """A pod of child Job train-w-0 as the Job controller would create it (owner: a fixed Job uid)."""
    labels = {
        "jobset.sigs.k8s.io/jobset-name": "train",
        "jobset.sigs.k8s.io/replicatedjob-name": "w",
        "jobset.sigs.k8s.io/job-index": "0",
        JOBSET_JOB_KEY_LABEL: job_key("default", "train-w-0"),
    }
    annotations = {
        "jobset.sigs.k8s.io/jobset-name": "train",
        JOBSET_EXCLUSIVE_TOPOLOGY_ANNOTATION: GKE_NODEPOOL_LABEL,
        "batch.kubernetes.io/job-completion-index": index,
    }
    owner = {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "name": "train-w-0",
        "uid": "job-uid",
        "controller": True,
    }
    meta = {"name": name, "labels": labels, "annotations": annotations, "ownerReferences": [owner]}
    return {"metadata": meta, "spec": pod_spec(gpus=1)}


def test_the_setting_turns_jobsets_webhooks_and_reconciler_off(run: Run) -> None:
    async def scenario() -> None:
        async with cluster(nodes=4, pools=2, components=WITHOUT_SCHEDULER, jobset_webhooks=False) as c:
            assert c.controllers.jobset_placement is None
            await c.server.create("jobsets", _jobset(), namespace="default")
            pods = await c.wait_for(lambda: _all_created(c, 3), 10, "every pod, at once")
            for pod in pods.values():
                assert PRIORITY_LABEL not in pod["metadata"]["labels"]
                assert "affinity" not in pod["spec"]
                assert "nodeSelector" not in pod["spec"]
            assert (c.stats.jobset_webhook_calls, c.stats.jobset_webhook_denied) == (0, 0)
            assert await _failed_create_messages(c) == []

    run(scenario())


async def _violations_until_deleted(history: Any, uids: set[str]) -> dict[str, Obj]:
    """From the pods' watch: each of `uids`' DisruptionTarget condition written before its deletion."""
    marked: dict[str, Obj] = {}
    deleted: set[str] = set()
    async with asyncio.timeout(10):
        async for event in history:
            obj = event["object"]
            uid = obj["metadata"]["uid"]
            if uid not in uids:
                continue
            if event["type"] == "DELETED":
                deleted.add(uid)
                if deleted == uids:
                    return marked
            elif uid not in deleted:
                for condition in obj["status"].get("conditions") or []:
                    if condition["type"] == "DisruptionTarget":
                        marked[uid] = condition
    return marked


async def _all_created(c: Cluster, size: int) -> dict[int, Obj] | None:
    pods = await _pods_by_index(c)
    return pods if sorted(pods) == list(range(size)) else None


async def _new_leader(c: Cluster, old: Obj) -> Obj | None:
    leader = await _leader(c)
    if leader is None or leader["metadata"]["uid"] == old["metadata"]["uid"]:
        return None
    return leader


async def _followers_in(c: Cluster, pool: str, replaced: set[str]) -> dict[int, Obj] | None:
    pods = await _all_created(c, 3)
    if pods is None:
        return None
    followers = [pods[i] for i in (1, 2)]
    if any(p["metadata"]["uid"] in replaced for p in followers):
        return None
    if any((p["spec"].get("nodeSelector") or {}).get(GKE_NODEPOOL_LABEL) != pool for p in followers):
        return None
    return pods


def test_jobsets_webhooks_need_the_api_servers_admission_chain() -> None:
    server = ApiServer(seed=0)
    with pytest.raises(ValueError, match="jobset_webhooks needs the API server's admission chain"):
        Controllers(server, ControllerSettings(), Stats())
    assert Controllers(server, ControllerSettings(jobset_webhooks=False), Stats()).jobset_placement is None
