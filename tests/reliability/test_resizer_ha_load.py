"""Resizer HA under load on the real control plane: the leader replica is SIGKILLed while elastic Jobs keep
arriving; the standby takes over (never before the Lease expired, as the Lease itself records) and no Job
is patched twice (kube-apiserver's audit log: one successful Job patch per Job, across both replicas)."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from bench.soak import project_answers, soak_job
from devstack.commands import RELEASE_NAMESPACE
from devstack.shape import ClusterShape
from devstack.stack import Stack
from kubekit.client import KubeError
from kubekit.election import LeaseRecord
from placement.constants import RESIZE_DONE, RESIZE_LABEL, Strategy
from placement.gang import parse_time
from resizer.settings import ResizerSettings
from tests.kube.conftest import kube_options
from tests.kube.kube_support import audit_log, create_namespace, kube_cluster
from tests.support.waiting import eventually

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("reliability-ha")]

LEASE_DURATION, RENEW_DEADLINE, RETRY_PERIOD = 4, 3.0, 0.5
JOBS, PODS = 20, 2
NAMESPACE = "soak"  # soak_job's namespace


@pytest.fixture
def ha_stack(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[Stack]:
    # The replicas read these from the environment (flags are not exposed by Stack).
    monkeypatch.setenv("EXCLUSIVE_PLACEMENT_LEASE_DURATION_SECONDS", str(LEASE_DURATION))
    monkeypatch.setenv("EXCLUSIVE_PLACEMENT_RENEW_DEADLINE_SECONDS", str(RENEW_DEADLINE))
    monkeypatch.setenv("EXCLUSIVE_PLACEMENT_RETRY_PERIOD_SECONDS", str(RETRY_PERIOD))
    shape = ClusterShape(nodes=JOBS, pools=JOBS, gpus_per_node=8)
    with Stack(kube_options(tmp_path, cluster=shape, resizer_replicas=2, jobset=False)) as stack:
        create_namespace(stack, NAMESPACE)
        yield stack


def lease(stack: Stack) -> LeaseRecord:
    name = ResizerSettings.model_fields["lease_name"].default
    return LeaseRecord.from_lease(stack.client.get("Lease", name, namespace=RELEASE_NAMESPACE))


def wait_roles(stack: Stack, expected: list[str], timeout: float = 60) -> float:
    """Seconds until the replicas' roles are `expected` (the takeover time, when one was killed)."""
    started = time.monotonic()
    eventually(
        lambda: sorted(stack.resizer_roles()) == sorted(expected),
        lambda: f"resizer roles {sorted(expected)} (roles now: {stack.resizer_roles()})",
        timeout,
    )
    return time.monotonic() - started


def submit(stack: Stack, errors: list[str], third_in: threading.Event) -> None:
    for index in range(JOBS):
        try:
            stack.client.create(soak_job(f"ha-{index:02d}", Strategy.ELASTIC, PODS))
        except KubeError as err:
            errors.append(str(err))
        if index + 1 == JOBS // 3:
            third_in.set()
        time.sleep(0.4)  # the arrival rate: Jobs keep arriving before, during and after the takeover


def all_resized(stack: Stack) -> list[dict[str, Any]] | None:
    jobs = stack.client.list("Job", namespace=NAMESPACE)
    running = [
        p for p in stack.client.list("Pod", namespace=NAMESPACE) if p["status"].get("phase") == "Running"
    ]
    done = [j for j in jobs if (j["metadata"].get("labels") or {}).get(RESIZE_LABEL) == RESIZE_DONE]
    return jobs if len(done) == JOBS and len(running) == JOBS * PODS else None


def test_leader_sigkilled_under_load_standby_takes_over_without_double_patch(ha_stack: Stack) -> None:
    stack = ha_stack
    wait_roles(stack, ["leader", "standby"])
    since = audit_log(stack).mark()
    errors: list[str] = []
    third_in = threading.Event()
    submitter = threading.Thread(target=submit, args=(stack, errors, third_in))
    submitter.start()
    try:
        assert third_in.wait(60), "the first third of the Jobs was not created"
        leader = stack.resizer_roles().index("leader")
        stack.resizers[leader].kill()
        killed = lease(stack)  # its last renewal: a dead replica renews no more
        takeover = wait_roles(stack, ["down", "leader"], timeout=LEASE_DURATION * 5)
    finally:
        submitter.join(60)
    print(f"resizer takeover after SIGKILL of the leader: {takeover:.2f}s (lease {LEASE_DURATION}s)")
    # client-go semantics: the standby takes the Lease only once it has not changed for the lease duration,
    # which the Lease's own times show (both written on this machine's clock).
    taken = lease(stack)
    assert taken.holder not in ("", killed.holder)
    assert taken.transitions == killed.transitions + 1
    last_renewed, acquired = parse_time(killed.renew_time), parse_time(taken.acquire_time)
    assert last_renewed is not None
    assert acquired is not None
    assert acquired - last_renewed >= LEASE_DURATION
    assert errors == []

    jobs = eventually(lambda: all_resized(stack), "every Job resized and running", 120, interval=0.5)
    assert [j["spec"]["completions"] for j in jobs] == [PODS] * JOBS
    assert [j["metadata"]["generation"] for j in jobs] == [2] * JOBS  # one spec change each
    users = {identity.username for identity in kube_cluster(stack).identities.values()}
    answers = project_answers(audit_log(stack).requests(since=since), users)
    assert answers["job_patches"] == {job["metadata"]["name"]: 1 for job in jobs}  # across both replicas
    assert answers["pod_creates_refused"] == 0

    stack.restart_resizer(leader)  # the killed replica comes back as the standby
    wait_roles(stack, ["leader", "standby"])
