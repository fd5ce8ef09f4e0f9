"""The resizer process on the real control plane: resize on bind, dry run, restart, HA, namespace scope.

The module's stack runs no resizer of its own: each test starts its `python -m resizer` processes (devstack's
`resizer_command`, the chart's ServiceAccount kubeconfig, the Lease in the release namespace) and stops them.
Jobs are created through the webhook, which shrinks each to 1/1 with its target recorded; what happens next
is the resizer's alone. The audit log counts the resizer's patches of Jobs; `metadata.generation` 2 means
exactly one spec change after the creation.
"""

from __future__ import annotations

import contextlib
import time
from collections import Counter, defaultdict
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from devstack.commands import RELEASE_NAMESPACE, resizer_command
from devstack.ports import free_port
from devstack.processes import ManagedProcess
from devstack.shape import ClusterShape
from devstack.stack import Stack
from kubekit.client import KubeError
from placement.constants import RESIZE_DONE, RESIZE_LABEL, RESIZE_PENDING
from tests.kube.conftest import kube_options
from tests.kube.kube_support import audit_log, create_namespace, empty_namespace, kube_cluster
from tests.kube.workloads import plain_job, pods_of
from tests.support.metrics import RESIZER_PREFIX, scraped
from tests.support.waiting import eventually

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-resizer")]

Obj = dict[str, Any]
LEASE = "exclusive-placement-resizer"
QUICK_LEASE = (
    "--lease-duration-seconds",
    "3",
    "--renew-deadline-seconds",
    "2",
    "--retry-period-seconds",
    "0.4",
)
SLOW_LEASE = (
    "--lease-duration-seconds",
    "30",
    "--renew-deadline-seconds",
    "20",
    "--retry-period-seconds",
    "0.3",
)


@pytest.fixture(scope="module")
def kube_stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    """8 pools of one eight-GPU node (8 exclusive Jobs at once), no resizer."""
    options = kube_options(
        tmp_path_factory.mktemp("kube-resizer"),
        cluster=ClusterShape(nodes=8, pools=8, gpus_per_node=8),
        resizer_replicas=0,
    )
    with Stack(options) as stack:
        yield stack


class Resizer:
    """One `python -m resizer` under the chart's ServiceAccount, named by `--identity`."""

    def __init__(self, stack: Stack, workdir: Path, name: str, *flags: str, leader_elect: bool) -> None:
        self.port = free_port()
        self.name = name
        argv = resizer_command(
            server=None,
            kubeconfig=stack.connection("resizer"),
            metrics_port=self.port,
            leader_elect=leader_elect,
            lease_namespace=RELEASE_NAMESPACE,
            extra_args=["--identity", name, *flags],
        )
        self.process = ManagedProcess(name, argv, workdir / f"{name}.log")

    def start(self) -> None:
        self.process.start()
        eventually(self.ready, f"{self.name} /readyz", 60, ignoring=(httpx.HTTPError,))

    def ready(self) -> bool:
        self.process.check_alive()
        return httpx.get(f"http://127.0.0.1:{self.port}/readyz", timeout=2).status_code == 200

    @property
    def log(self) -> str:
        return self.process.log_since_start()

    def metric(self, name: str) -> float:
        """Summed over every label combination of the series."""
        return scraped(f"http://127.0.0.1:{self.port}/metrics", f"{RESIZER_PREFIX}_{name}")


@contextlib.contextmanager
def resizers(
    stack: Stack, workdir: Path, count: int, *flags: str, leader_elect: bool = True
) -> Iterator[list[Resizer]]:
    started: list[Resizer] = []
    try:
        for index in range(count):
            resizer = Resizer(stack, workdir, f"resizer-{index}", *flags, leader_elect=leader_elect)
            started.append(resizer)
            resizer.start()
        yield started
    finally:
        for resizer in started:
            resizer.process.stop()


def jobs(stack: Stack, namespace: str) -> list[Obj]:
    return stack.client.list("Job", namespace=namespace)


def resized(job: Obj, target: int) -> bool:
    spec, labels = job["spec"], job["metadata"].get("labels") or {}
    return (spec["completions"], spec["parallelism"], labels.get(RESIZE_LABEL)) == (
        target,
        target,
        RESIZE_DONE,
    )


def all_resized(stack: Stack, namespace: str, names: list[str], target: int) -> bool:
    by_name = {job["metadata"]["name"]: job for job in jobs(stack, namespace)}
    return all(name in by_name and resized(by_name[name], target) for name in names)


def create_jobs(stack: Stack, namespace: str, names: list[str], pods: int) -> None:
    for name in names:
        stack.client.create(plain_job(name, namespace, pods))


def job_patch_codes(stack: Stack, namespace: str, since: int) -> dict[str, Counter[int]]:
    """Job name -> response code -> count of the resizer account's patches of Jobs in `namespace` since
    audit offset `since`."""
    user = kube_cluster(stack).identities["resizer"].username
    codes: dict[str, Counter[int]] = defaultdict(Counter)
    for request in audit_log(stack).requests(since=since):
        if (
            request.verb == "patch"
            and request.resource == "jobs"
            and request.namespace == namespace
            and request.user == user
        ):
            codes[request.name][request.code] += 1
    return codes


def job_patches(stack: Stack, namespace: str, since: int) -> int:
    """Successful patches of Jobs in `namespace` since audit offset `since` by the resizer's account."""
    return sum(codes[200] for codes in job_patch_codes(stack, namespace, since).values())


def leaders_bound(stack: Stack, namespace: str, prefix: str) -> int:
    return sum(
        1
        for pod in pods_of(stack, namespace)
        if pod["metadata"]["name"].startswith(prefix)
        and pod["metadata"]["annotations"].get("batch.kubernetes.io/job-completion-index") == "0"
        and pod["spec"].get("nodeName")
    )


def test_shrunk_jobs_are_resized_once_their_leader_binds(
    kube_stack: Stack, namespace: str, tmp_path: Path
) -> None:
    since = audit_log(kube_stack).mark()
    with resizers(kube_stack, tmp_path, 1, leader_elect=False) as (resizer,):
        names = [f"train-{index}" for index in range(3)]
        create_jobs(kube_stack, namespace, names, 4)
        eventually(
            lambda: all_resized(kube_stack, namespace, names, 4),
            "every Job resized to 4/4",
            90,
            ignoring=(KubeError,),
        )
        eventually(
            lambda: len(pods_of(kube_stack, namespace)) == 12,
            "4 pods of every Job",
            90,
            ignoring=(KubeError,),
        )
        assert resizer.metric("resizes_total") == 3
        assert resizer.metric("bind_to_resize_seconds_count") == 3
    assert job_patches(kube_stack, namespace, since) == 3  # a 409 is re-read and re-decided, never re-sent
    for job in jobs(kube_stack, namespace):
        assert job["metadata"]["generation"] == 2  # created, then exactly one spec change


def test_dry_run_decides_but_never_patches(kube_stack: Stack, namespace: str, tmp_path: Path) -> None:
    since = audit_log(kube_stack).mark()
    with resizers(kube_stack, tmp_path, 1, "--dry-run", leader_elect=False) as (resizer,):
        create_jobs(kube_stack, namespace, ["train-0"], 4)
        eventually(lambda: "dry-run: would resize to 4" in resizer.log, "the dry-run decision", 90)
    assert job_patches(kube_stack, namespace, since) == 0
    (job,) = jobs(kube_stack, namespace)
    assert (job["spec"]["completions"], job["metadata"]["labels"][RESIZE_LABEL]) == (1, RESIZE_PENDING)


def test_restart_after_sigkill_resizes_every_job_exactly_once(
    kube_stack: Stack, namespace: str, tmp_path: Path
) -> None:
    early = [f"early-{index}" for index in range(3)]
    in_flight = [f"late-{index}" for index in range(3)]
    while_down = [f"late-down-{index}" for index in range(2)]
    late = in_flight + while_down
    since = audit_log(kube_stack).mark()
    with resizers(kube_stack, tmp_path / "first", 1, leader_elect=False) as (first,):
        create_jobs(kube_stack, namespace, early, 3)
        eventually(
            lambda: all_resized(kube_stack, namespace, early, 3),
            "the early Jobs resized",
            90,
            ignoring=(KubeError,),
        )
        create_jobs(
            kube_stack, namespace, in_flight, 3
        )  # created right before the kill: some may be in flight
        first.process.kill()
    create_jobs(kube_stack, namespace, while_down, 3)  # created while no resizer runs: surely pending
    eventually(
        lambda: leaders_bound(kube_stack, namespace, "late-") >= len(late),
        "the late leaders bound while no resizer runs",
        90,
        ignoring=(KubeError,),
    )
    pending = [
        job["metadata"]["name"]
        for job in jobs(kube_stack, namespace)
        if job["metadata"]["labels"].get(RESIZE_LABEL) == RESIZE_PENDING
    ]
    assert pending, "the scenario needs Jobs pending at the restart"
    with resizers(kube_stack, tmp_path / "second", 1, leader_elect=False) as (second,):
        eventually(
            lambda: all_resized(kube_stack, namespace, early + late, 3),
            "every Job resized",
            90,
            ignoring=(KubeError,),
        )
        assert second.metric("resizes_total") == len(pending)
    for job in jobs(kube_stack, namespace):
        assert job["metadata"]["generation"] == 2  # exactly one spec change per Job
        assert job["spec"]["completions"] == 3
    codes = job_patch_codes(kube_stack, namespace, since)
    resized_by_the_first = [name for name in in_flight if name not in pending]
    for name in early + while_down + pending:
        assert codes[name][200] == 1, name
    for name in resized_by_the_first:
        # The kill can cancel a patch whose write etcd already committed: kube-apiserver then logs it
        # `500 context canceled` (kubernetes/kubernetes#139256), yet the Job is resized and no longer
        # pending, so no one patches it again.
        assert codes[name][200] <= 1, name
        assert codes[name].total() >= 1, name


def test_two_replicas_one_acts_and_the_standby_takes_over_within_the_lease(
    kube_stack: Stack, namespace: str, tmp_path: Path
) -> None:
    since = audit_log(kube_stack).mark()
    with resizers(kube_stack, tmp_path, 2, *QUICK_LEASE) as replicas:
        leader = eventually(
            lambda: next((r for r in replicas if r.metric("is_leader") == 1), None),
            "a leader",
            60,
            ignoring=(httpx.HTTPError,),
        )
        standby = next(r for r in replicas if r is not leader)
        before = [f"before-{index}" for index in range(3)]
        create_jobs(kube_stack, namespace, before, 2)
        eventually(
            lambda: all_resized(kube_stack, namespace, before, 2),
            "the first Jobs resized",
            90,
            ignoring=(KubeError,),
        )
        assert leader.metric("resizes_total") == 3
        assert standby.metric("resizes_total") == 0
        assert standby.metric("is_leader") == 0

        leader.process.kill()
        killed_at = time.monotonic()
        eventually(
            lambda: standby.metric("is_leader") == 1,
            "the standby to take the lease",
            60,
            interval=0.05,
            ignoring=(httpx.HTTPError,),
        )
        takeover = time.monotonic() - killed_at
        after = [f"after-{index}" for index in range(3)]
        create_jobs(kube_stack, namespace, after, 2)
        eventually(
            lambda: all_resized(kube_stack, namespace, after, 2),
            "the later Jobs resized",
            90,
            ignoring=(KubeError,),
        )
        assert standby.metric("resizes_total") == 3
    assert all(job["metadata"]["generation"] == 2 for job in jobs(kube_stack, namespace))
    assert job_patches(kube_stack, namespace, since) == 6
    # Reported; bounded by a few lease periods so a starved 2-core machine does not flake it.
    print(f"takeover after SIGKILL of the leader: {takeover:.2f}s (lease duration 3s)")
    assert takeover < 4 * 3


def test_sigterm_releases_the_lease_for_an_immediate_takeover(kube_stack: Stack, tmp_path: Path) -> None:
    with resizers(kube_stack, tmp_path, 2, *SLOW_LEASE) as replicas:
        leader = eventually(
            lambda: next((r for r in replicas if r.metric("is_leader") == 1), None),
            "a leader",
            60,
            ignoring=(httpx.HTTPError,),
        )
        standby = next(r for r in replicas if r is not leader)
        assert leader.process.stop() == 0
        assert f"released lease {RELEASE_NAMESPACE}/{LEASE}" in leader.log
        # Far sooner than the 30 s lease could expire: the lease was released.
        eventually(
            lambda: standby.metric("is_leader") == 1,
            "the standby to take the released lease",
            15,
            ignoring=(httpx.HTTPError,),
        )
        lease = kube_stack.client.get("Lease", LEASE, namespace=RELEASE_NAMESPACE)
    assert lease["spec"]["holderIdentity"] == standby.name
    assert lease["spec"]["renewTime"].endswith("Z")
    assert len(lease["spec"]["renewTime"].split(".")[1]) == 7  # microseconds + Z


def test_a_resizer_scoped_to_a_namespace_acts_there_only(
    kube_stack: Stack, namespace: str, tmp_path: Path
) -> None:
    inside = f"{namespace[:50]}-in"
    create_namespace(kube_stack, inside)
    try:
        with resizers(kube_stack, tmp_path, 1, "--namespace", inside, leader_elect=False) as (resizer,):
            create_jobs(kube_stack, namespace, ["outside"], 2)
            create_jobs(kube_stack, inside, ["inside"], 2)
            eventually(
                lambda: all_resized(kube_stack, inside, ["inside"], 2),
                "the inside Job resized",
                90,
                ignoring=(KubeError,),
            )
            eventually(
                lambda: leaders_bound(kube_stack, namespace, "outside") == 1,
                "the outside leader bound",
                90,
                ignoring=(KubeError,),
            )
            assert resizer.metric("resizes_total") == 1
        (outside,) = jobs(kube_stack, namespace)
        assert outside["spec"]["completions"] == 1
        assert outside["metadata"]["labels"][RESIZE_LABEL] == RESIZE_PENDING
    finally:
        empty_namespace(kube_stack, inside)
