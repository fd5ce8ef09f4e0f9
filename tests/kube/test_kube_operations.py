"""The operating contract of the webhook and the resizer, judged by the real kube-apiserver:

- the serving certificate rotated (a new key under the same CA, as a cert-manager renewal writes it) while
  exclusive Jobs are created: the webhook reloads the files, new connections get the new certificate, and
  not one admission fails (every Job is shrunk by the webhook, none refused);
- `failurePolicy: Fail` (the chart's default): with the webhook down, an exclusive Job is refused with an
  error naming this project's webhook, while a Job without the topology annotation is created (the
  chart's matchConditions keep it from ever reaching the webhook); once the webhook is back, the exclusive
  Job is admitted;
- two resizer replicas elect one leader through their Lease; the webhook restarted and a replica SIGKILLed
  and started again come back in place (same URL, same Lease), and the next JobSet is placed, every pod
  created once.
"""

from __future__ import annotations

import threading
from collections import Counter
from typing import Any

import pytest

from devstack.manifests import exclusive_jobset
from devstack.scenario import wait_until_placed
from devstack.stack import Stack
from kubekit.client import KubeError
from placement.constants import GKE_NODEPOOL_LABEL, RESIZE_LABEL, TOPOLOGY_ANNOTATION
from tests.kube.kube_support import audit_log, pod_creates
from tests.reliability.reliability_processes import dev_certs, file_certificate_der, served_certificate_der
from tests.support.waiting import eventually

pytestmark = [pytest.mark.kube, pytest.mark.xdist_group("kube-operations")]

Obj = dict[str, Any]


def job(name: str, namespace: str, *, exclusive: bool) -> Obj:
    annotations = {TOPOLOGY_ANNOTATION: GKE_NODEPOOL_LABEL} if exclusive else {}
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": {
            "completionMode": "Indexed",
            "completions": 2,
            "parallelism": 2,
            "suspend": True,  # only admission is under test: no pods
            "template": {
                "spec": {
                    "restartPolicy": "Never",
                    "containers": [{"name": "w", "image": "registry.example/worker:1"}],
                }
            },
        },
    }


def webhook_port(stack: Stack) -> int:
    return int(stack.webhook_url.rsplit(":", 1)[1])


def test_serving_certificate_rotation_fails_no_admission(kube_stack: Stack, namespace: str) -> None:
    tally: Counter[str] = Counter()
    stop = threading.Event()

    def create_jobs() -> None:
        while not stop.is_set():
            name = f"j-{sum(tally.values())}"
            try:
                kube_stack.client.create(job(name, namespace, exclusive=True))
                tally["created"] += 1
            except KubeError as err:
                tally[f"refused {err.status}: {err}"] += 1

    creator = threading.Thread(target=create_jobs, daemon=True)
    creator.start()
    try:
        eventually(lambda: tally["created"] >= 10, lambda: f"10 Jobs created ({dict(tally)})", 60)
        old = served_certificate_der(webhook_port(kube_stack), kube_stack.ca_file)
        dev_certs(kube_stack.cert_dir, renew=True)
        new = file_certificate_der(kube_stack.cert_dir)
        assert new != old
        eventually(
            lambda: served_certificate_der(webhook_port(kube_stack), kube_stack.ca_file) == new,
            "the webhook serving the rotated certificate",
            60,
        )
        rotated_at = tally["created"]
        eventually(
            lambda: tally["created"] >= rotated_at + 10,
            lambda: f"10 more Jobs created after the rotation ({dict(tally)})",
            60,
        )
    finally:
        stop.set()
        creator.join(30)
    assert set(tally) == {"created"}, tally  # not one refused admission
    jobs = kube_stack.client.list("Job", namespace=namespace)
    assert len(jobs) == tally["created"]
    assert all(j["metadata"]["labels"][RESIZE_LABEL] == "pending" for j in jobs)  # each shrunk by the webhook


def test_with_the_webhook_down_only_exclusive_jobs_are_refused(kube_stack: Stack, namespace: str) -> None:
    assert kube_stack.webhook is not None
    kube_stack.webhook.stop()
    try:
        kube_stack.client.create(job("plain", namespace, exclusive=False))
        with pytest.raises(KubeError) as refused:
            kube_stack.client.create(job("exclusive", namespace, exclusive=True))
        assert refused.value.status == 500
        assert "exclusive-placement" in str(refused.value)
        assert "failed calling webhook" in str(refused.value)
    finally:
        kube_stack.restart_webhook()
    created = eventually(
        lambda: kube_stack.client.create(job("exclusive", namespace, exclusive=True)),
        "the exclusive Job admitted once the webhook is back",
        30,
        ignoring=(KubeError,),
    )
    assert created["metadata"]["labels"][RESIZE_LABEL] == "pending"


def test_two_resizers_elect_one_leader_and_components_restart_in_place(
    kube_stack: Stack, namespace: str
) -> None:
    kube_stack.add_resizer()  # a second replica, as the chart runs two: it stays a standby for the module
    eventually(
        lambda: sorted(kube_stack.resizer_roles()) == ["leader", "standby"],
        "one leader and one standby",
        60,
        interval=0.2,
    )
    webhook_url = kube_stack.webhook_url
    kube_stack.restart_webhook()
    kube_stack.restart_resizer(1, kill=True)
    assert kube_stack.webhook_url == webhook_url
    assert all(p.running for p in kube_stack.processes())

    since = audit_log(kube_stack).mark()
    kube_stack.client.create(exclusive_jobset("after-restarts", jobs=2, pods_per_job=4, namespace=namespace))
    placed = wait_until_placed(kube_stack, namespace, 2, timeout=120)
    assert all(s.resized and s.pods_running == 4 for s in placed.statuses)
    assert pod_creates(kube_stack, namespace, since=since) == {201: 8}  # no pod refused, none twice
