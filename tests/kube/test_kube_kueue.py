"""Next to Kueue, on the real control plane: Kueue's manager (batch/job and JobSet integrations) with a
ClusterQueue of QUOTA GPUs, this project's webhook and resizer under the default strategy `elastic`.

- A JobSet Kueue queues is admitted with quota for all of its pods (Kueue builds its Workload from the
  JobSet's spec), its Jobs each whole in a pool of their own, created at size 1 and resized by `elastic`
  (Kueue never checks a JobSet's child Jobs); a second one beyond the free quota stays
  suspended, none of its pods bound (so none of its leaders holds a pool), until the first is deleted.
  Every other strategy places a queued JobSet whole too, with quota for all its pods.
- A plain Indexed Job Kueue queues falls back to `gate` at full size (its Workload is built from the Job:
  shrunk, Kueue would take one pod's quota and stop the Job at its resize), reaches all its pods Running
  and is never suspended again once admitted.
- `kubectl exclusive-placement status` and `explain` (the real plugin) report a JobSet beyond the quota
  `queued-by-kueue`, with its LocalQueue and its Workload's message, not as waiting for a domain.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from devstack.controlplane import kueue
from devstack.exclusivity import node_domains
from devstack.manifests import exclusive_jobset
from devstack.stack import Stack
from kubekit.client import KubeError
from placement.constants import (
    ELASTIC_FALLBACK_ANNOTATION,
    GKE_NODEPOOL_LABEL,
    JOBSET_NAME_LABEL,
    RESIZE_DONE,
    RESIZE_LABEL,
    STRATEGIES,
    STRATEGY_ANNOTATION,
    TARGET_COMPLETIONS_ANNOTATION,
    Strategy,
)
from placement.kueue import DEFAULT_LOCAL_QUEUE, KUEUE_ELASTIC_JOB_ANNOTATION
from tests.kube.conftest import kube_options
from tests.kube.kueue_support import (
    bound_pods_of,
    condition,
    create_local_queue,
    pods_of_jobset,
    pools_ever_shared,
    running,
    workload_of,
)
from tests.kube.workloads import Watch, assert_each_job_whole_in_its_own_pool, plain_job, pods_of
from tests.support.plugin_commands import PLUGIN, run, status_json
from tests.support.waiting import eventually

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-kueue")]

JOBS, PODS = 2, 4
QUOTA = JOBS * PODS
"""GPUs of the ClusterQueue: one JobSet of JOBS x PODS one-GPU pods, not two."""
Obj = dict[str, Any]


@pytest.fixture(scope="module")
def kube_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    options = kube_options(tmp_path_factory.mktemp("kube-kueue"), kueue=True, kueue_gpu_quota=QUOTA)
    with Stack(options) as stack:
        yield stack


@pytest.fixture
def queue(kube_stack: Stack, namespace: str) -> str:
    """A LocalQueue of the ClusterQueue in the test's namespace; its name."""
    return create_local_queue(kube_stack, namespace)


def queued_jobset(name: str, namespace: str, queue: str, strategy: str | None = None) -> Obj:
    jobset = exclusive_jobset(name, jobs=JOBS, pods_per_job=PODS, namespace=namespace, strategy=strategy)
    jobset["metadata"]["labels"] = {kueue.QUEUE_NAME_LABEL: queue}
    return jobset


def pending_for_quota(workload: Obj | None) -> Obj | None:
    """The Workload when Kueue has decided it does not fit (QuotaReserved False), else None."""
    return workload if condition(workload, "QuotaReserved") == "False" else None


def gpus_in_use(stack: Stack) -> int:
    usage = stack.client.get("ClusterQueue", kueue.CLUSTER_QUEUE).get("status", {}).get("flavorsUsage", [])
    return sum(
        int(resource["total"])
        for flavor in usage
        for resource in flavor["resources"]
        if resource["name"] == kueue.GPU
    )


def most_running_at_once(events: list[tuple[str, Obj]]) -> int:
    """The most pods Running at one moment, replaying a pod watch's events in order."""
    running_now: set[str] = set()
    most = 0
    for kind, pod in events:
        name = pod["metadata"]["name"]
        if kind != "DELETED" and pod.get("status", {}).get("phase") == "Running":
            running_now.add(name)
        else:
            running_now.discard(name)
        most = max(most, len(running_now))
    return most


def admitted_and_placed(stack: Stack, namespace: str, name: str, *, elastic: bool = True) -> None:
    """`elastic`: asked for the default strategy, so each Job was admitted at size 1 and resized once its
    leader bound, with no fallback recorded."""
    eventually(
        lambda: condition(workload_of(stack, namespace, name), "Admitted") == "True",
        f"JobSet {name}'s Workload Admitted",
        90,
        ignoring=(KubeError,),
    )
    eventually(
        lambda: running(pods_of_jobset(stack, namespace, name)) == JOBS * PODS,
        f"{JOBS * PODS} pods of {name} running",
        90,
        ignoring=(KubeError,),
    )
    stack.check_alive()
    assert_each_job_whole_in_its_own_pool(stack, namespace, JOBS)
    workload = workload_of(stack, namespace, name)
    assert workload is not None
    # Quota taken at full size: one PodSet per replicatedJob, count = replicas x parallelism of the spec.
    assert [pod_set["count"] for pod_set in workload["spec"]["podSets"]] == [JOBS * PODS]
    (assignment,) = workload["status"]["admission"]["podSetAssignments"]
    assert assignment["resourceUsage"][kueue.GPU] == str(JOBS * PODS)
    eventually(
        lambda: gpus_in_use(stack) == JOBS * PODS,
        f"the ClusterQueue's {kueue.GPU} usage at {JOBS * PODS}",
        30,
        ignoring=(KubeError,),
    )
    for job in stack.client.list("Job", namespace=namespace):
        if job["metadata"]["labels"].get(JOBSET_NAME_LABEL) == name:
            if elastic:
                assert ELASTIC_FALLBACK_ANNOTATION not in job["metadata"]["annotations"], job["metadata"]
                assert job["metadata"]["labels"][RESIZE_LABEL] == RESIZE_DONE, job["metadata"]
                template = job["spec"]["template"]["metadata"].get("annotations", {})
                assert template.get(STRATEGY_ANNOTATION, "elastic") == "elastic", template
            assert job["spec"]["parallelism"] == PODS


def test_a_queued_jobset_takes_quota_at_full_size_and_one_beyond_it_waits_suspended_holding_no_pool(
    kube_stack: Stack, namespace: str, queue: str
) -> None:
    stack = kube_stack
    with Watch(stack, "Pod", namespace) as pods:
        while_first_lives = queued_one_after_the_other(stack, namespace, queue, pods)
    # Nothing of the second was bound while the first was there. Once the first is deleted, Kueue gives its
    # quota back as soon as its Workload goes, before the garbage collector has removed its pods: the
    # second's leaders may bind beside them then, but never in one of their pools.
    assert bound_pods_of(while_first_lives, "second") == set()
    pools = node_domains(stack.client.list("Node"), GKE_NODEPOOL_LABEL)
    assert pools_ever_shared(pods.events, pools) == {}


def queued_one_after_the_other(
    stack: Stack, namespace: str, queue: str, pods: Watch
) -> list[tuple[str, Obj]]:
    """The pod events seen up to the first JobSet's deletion."""
    stack.client.create(queued_jobset("first", namespace, queue))
    admitted_and_placed(stack, namespace, "first")

    stack.client.create(queued_jobset("second", namespace, queue))
    waiting = eventually(
        lambda: pending_for_quota(workload_of(stack, namespace, "second")),
        "the second JobSet's Workload pending for quota",
        60,
        ignoring=(KubeError,),
    )
    assert condition(waiting, "Admitted") != "True"
    assert stack.client.get("JobSet", "second", namespace=namespace)["spec"]["suspend"] is True
    children = [
        job
        for job in stack.client.list("Job", namespace=namespace)
        if job["metadata"]["labels"].get(JOBSET_NAME_LABEL) == "second"
    ]
    assert all(job["spec"].get("suspend") is True for job in children), children
    assert not [pod for pod in pods_of_jobset(stack, namespace, "second") if pod["spec"].get("nodeName")]
    assert gpus_in_use(stack) == JOBS * PODS

    while_first_lives = list(pods.events)
    stack.client.delete("JobSet", "first", namespace=namespace)
    eventually(
        lambda: not pods_of_jobset(stack, namespace, "first"),
        "the first JobSet's pods gone",
        90,
        ignoring=(KubeError,),
    )
    admitted_and_placed(stack, namespace, "second")
    return while_first_lives


def test_the_stack_serves_one_resource_flavor_cluster_queue_and_local_queue_in_default(
    kube_stack: Stack,
) -> None:
    client = kube_stack.client
    assert [f["metadata"]["name"] for f in client.list("ResourceFlavor")] == [kueue.RESOURCE_FLAVOR]
    (cluster_queue,) = client.list("ClusterQueue")
    assert cluster_queue["metadata"]["name"] == kueue.CLUSTER_QUEUE
    (group,) = cluster_queue["spec"]["resourceGroups"]
    (flavor,) = group["flavors"]
    gpu = next(r for r in flavor["resources"] if r["name"] == kueue.GPU)
    assert str(gpu["nominalQuota"]) == str(QUOTA)
    local_queues = client.list("LocalQueue", namespace="default")
    assert [q["spec"]["clusterQueue"] for q in local_queues] == [kueue.CLUSTER_QUEUE]


@pytest.mark.parametrize("strategy", [s for s in STRATEGIES if s is not Strategy.ELASTIC])
def test_every_other_strategy_places_a_queued_jobset_whole_with_quota_for_all_its_pods(
    kube_stack: Stack, namespace: str, queue: str, strategy: Strategy
) -> None:
    kube_stack.client.create(queued_jobset(str(strategy), namespace, queue, strategy=str(strategy)))
    admitted_and_placed(kube_stack, namespace, str(strategy), elastic=False)


def queued_plain_job_runs_whole(stack: Stack, namespace: str, job: Obj) -> Obj:
    """Create `job` (labelled for a LocalQueue); once its PODS pods run: Kueue admitted a Workload of all of
    them, never more ran at once, the Job was admitted (resumed) and never suspended again, and it runs
    whole in one pool. Returns the Job as stored."""
    with Watch(stack, "Job", namespace) as jobs, Watch(stack, "Pod", namespace) as pods:
        stack.client.create(job)
        eventually(
            lambda: running(pods_of(stack, namespace)) == PODS,
            f"the queued Job's {PODS} pods running",
            120,
            ignoring=(KubeError,),
        )
        stack.check_alive()
        workload = workload_of(stack, namespace, job["metadata"]["name"])
        assert condition(workload, "Admitted") == "True"
        assert workload is not None
        assert [pod_set["count"] for pod_set in workload["spec"]["podSets"]] == [PODS]
    assert most_running_at_once(pods.events) <= PODS
    suspended = [obj["spec"].get("suspend") is True for _, obj in jobs.events]
    assert False in suspended, suspended  # it was admitted (resumed) ...
    assert True not in suspended[suspended.index(False) :], suspended  # ... and never suspended again
    assert_each_job_whole_in_its_own_pool(stack, namespace, 1)
    stored: Obj = stack.client.get("Job", job["metadata"]["name"], namespace=namespace)
    return stored


@pytest.mark.parametrize(
    "annotations", [{}, {KUEUE_ELASTIC_JOB_ANNOTATION: "true"}], ids=["queued", "kueue-elastic-job"]
)
def test_a_plain_job_kueue_queues_falls_back_to_gate_and_runs_whole_never_suspended_after_admission(
    kube_stack: Stack, namespace: str, queue: str, annotations: dict[str, str]
) -> None:
    job = plain_job("queued", namespace, PODS)
    job["metadata"]["labels"] = {kueue.QUEUE_NAME_LABEL: queue}
    job["metadata"]["annotations"].update(annotations)
    # Without the fallback, elastic admitted the Job at 1 pod: Kueue admitted a Workload of 1 and the resize
    # ran 4 pods against it.
    stored = queued_plain_job_runs_whole(kube_stack, namespace, job)
    assert "Kueue" in stored["metadata"]["annotations"][ELASTIC_FALLBACK_ANNOTATION]
    assert TARGET_COMPLETIONS_ANNOTATION not in stored["metadata"]["annotations"]
    assert stored["spec"]["template"]["metadata"]["annotations"][STRATEGY_ANNOTATION] == "gate"
    assert (stored["spec"]["completions"], stored["spec"]["parallelism"]) == (PODS, PODS)


def test_a_plain_job_kueue_queues_through_the_namespaces_default_local_queue_falls_back_to_gate(
    kube_stack: Stack, namespace: str
) -> None:
    """Kueue's LocalQueue defaulting: in a namespace with a LocalQueue named `default`, Kueue's own Job
    webhook (called after this project's) labels an unlabelled Job `queue-name: default` and queues it. The
    webhook reads that LocalQueue, so the Job is not shrunk for a Workload of one pod (before: a Workload of
    1 pod admitted, and the resize ran 4 pods against it)."""
    create_local_queue(kube_stack, namespace, name=DEFAULT_LOCAL_QUEUE)
    stored = queued_plain_job_runs_whole(kube_stack, namespace, plain_job("defaulted", namespace, PODS))
    assert stored["metadata"]["labels"][kueue.QUEUE_NAME_LABEL] == DEFAULT_LOCAL_QUEUE
    assert "LocalQueue defaulting" in stored["metadata"]["annotations"][ELASTIC_FALLBACK_ANNOTATION]
    assert (stored["spec"]["completions"], stored["spec"]["parallelism"]) == (PODS, PODS)


def test_a_jobset_kueue_queues_through_the_namespaces_default_local_queue_is_resized_with_quota_for_all(
    kube_stack: Stack, namespace: str
) -> None:
    """Kueue labels a JobSet that names no queue for the namespace's `default` LocalQueue, before this
    project's JobSet validation reads its label; its child Jobs are shrunk and resized as under a named
    queue: Kueue builds the Workload from the JobSet."""
    create_local_queue(kube_stack, namespace, name=DEFAULT_LOCAL_QUEUE)
    kube_stack.client.create(exclusive_jobset("defaulted", jobs=JOBS, pods_per_job=PODS, namespace=namespace))
    admitted_and_placed(kube_stack, namespace, "defaulted")
    stored = kube_stack.client.get("JobSet", "defaulted", namespace=namespace)
    assert stored["metadata"]["labels"][kueue.QUEUE_NAME_LABEL] == DEFAULT_LOCAL_QUEUE


@pytest.mark.parametrize("strategy", [s for s in STRATEGIES if s is not Strategy.ELASTIC], ids=str)
def test_a_plain_job_kueue_queues_under_every_other_strategy_runs_whole_as_asked(
    kube_stack: Stack, namespace: str, queue: str, strategy: Strategy
) -> None:
    job = plain_job("queued", namespace, PODS)
    job["metadata"]["labels"] = {kueue.QUEUE_NAME_LABEL: queue}
    job["metadata"]["annotations"][STRATEGY_ANNOTATION] = str(strategy)
    stored = queued_plain_job_runs_whole(kube_stack, namespace, job)
    assert ELASTIC_FALLBACK_ANNOTATION not in stored["metadata"]["annotations"]
    assert stored["spec"]["template"]["metadata"]["annotations"][STRATEGY_ANNOTATION] == str(strategy)
    assert (stored["spec"]["completions"], stored["spec"]["parallelism"]) == (PODS, PODS)


def test_the_plugin_reports_a_jobset_beyond_the_quota_queued_by_kueue_with_its_queue_and_message(
    kube_stack: Stack, namespace: str, queue: str
) -> None:
    stack = kube_stack
    beyond = exclusive_jobset("beyond", jobs=JOBS, pods_per_job=PODS + 1, namespace=namespace)
    beyond["metadata"]["labels"] = {kueue.QUEUE_NAME_LABEL: queue}
    stack.client.create(beyond)
    workload = eventually(
        lambda: pending_for_quota(workload_of(stack, namespace, "beyond")),
        "the JobSet's Workload pending for quota",
        60,
        ignoring=(KubeError,),
    )
    message = next(c["message"] for c in workload["status"]["conditions"] if c["type"] == "QuotaReserved")

    def both_jobs_waiting() -> list[Obj] | None:
        mine = [w for w in status_json(stack.kubeconfig)["waiting"] if w["namespace"] == namespace]
        return mine if len(mine) == JOBS else None

    waiting = eventually(both_jobs_waiting, f"the plugin listing {JOBS} waiting Jobs", 60)
    assert {w["reason"] for w in waiting} == {"queued-by-kueue"}, waiting
    for entry in waiting:
        assert f"LocalQueue {namespace}/{queue}" in entry["message"]
        assert message in entry["message"]
    explained = run([str(PLUGIN), "explain", "jobset/beyond", "-n", namespace], stack.kubeconfig)
    assert explained.returncode == 0, explained.stderr
    assert "Next:" in explained.stdout
    assert "queued-by-kueue" in explained.stdout
    assert message in explained.stdout
