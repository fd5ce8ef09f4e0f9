"""The pieces the real cluster is put together from, checked against the pinned modules' own manifests
(staged by `make kube`, which `make test` runs first): kwok's Stages, JobSet's webhook configurations and
RBAC, the chart's identities, the audit log reader."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from devstack.controlplane import jobset
from devstack.controlplane.audit import AuditLog, pod_creations
from devstack.controlplane.binaries import require_built
from devstack.controlplane.identities import chart_identities, rbac_objects, token_kubeconfig
from devstack.controlplane.kwok import (
    KWOK_NODE_ANNOTATION,
    RUN_TIME_ANNOTATION,
    START_TIME_ANNOTATION,
    StageError,
    completion_on_request,
    kwok_nodes,
    run_time_annotations,
    stages,
    start_time_annotations,
)
from devstack.webhooks import chart_values, render_chart
from placement.constants import GKE_NODEPOOL_LABEL, GPU_RESOURCE


@pytest.fixture(scope="module")
def manifests() -> Path:
    return require_built().manifests_dir


def test_kwok_completes_only_the_pods_that_ask_and_after_exactly_their_run_time(manifests: Path) -> None:
    by_name = {stage["metadata"]["name"]: stage for stage in stages(manifests)}
    assert set(by_name) == {
        "node-initialize",
        "node-heartbeat-with-lease",
        "pod-ready",
        "pod-ready-after-start-time",
        "pod-complete",
        "pod-delete",
    }
    complete = by_name["pod-complete"]["spec"]
    assert {"key": f'.metadata.annotations["{RUN_TIME_ANNOTATION}"]', "operator": "Exists"} in complete[
        "selector"
    ]["matchExpressions"]
    assert "jitterDurationMilliseconds" not in complete["delay"]  # upstream's 5 s would cap every run time
    assert run_time_annotations(20) == {
        RUN_TIME_ANNOTATION: "20000ms",
        "pod-complete.stage.kwok.x-k8s.io/jitter-delay": "20000ms",
    }


def test_kwok_starts_at_once_the_pods_that_do_not_ask_and_the_others_after_their_start_time(
    manifests: Path,
) -> None:
    by_name = {stage["metadata"]["name"]: stage for stage in stages(manifests)}
    key = f'.metadata.annotations["{START_TIME_ANNOTATION}"]'
    at_once, delayed = by_name["pod-ready"]["spec"], by_name["pod-ready-after-start-time"]["spec"]
    assert {"key": key, "operator": "DoesNotExist"} in at_once["selector"]["matchExpressions"]
    assert "delay" not in at_once
    assert {"key": key, "operator": "Exists"} in delayed["selector"]["matchExpressions"]
    assert delayed["delay"] == {"durationMilliseconds": 0, "durationFrom": {"expressionFrom": key}}
    assert delayed["next"] == at_once["next"]
    assert start_time_annotations(2) == {START_TIME_ANNOTATION: "2000ms"}


def test_a_pod_complete_stage_that_no_longer_reads_an_annotation_is_refused() -> None:
    with pytest.raises(StageError, match="no longer reads its delay"):
        completion_on_request({"spec": {"delay": {"durationMilliseconds": 1000}}})


def test_kwok_nodes_have_the_asked_shape_and_leave_their_status_to_kwok() -> None:
    nodes = kwok_nodes(8, 4, gpus_per_node=8)
    assert len({node["metadata"]["labels"][GKE_NODEPOOL_LABEL] for node in nodes}) == 4
    for node in nodes:
        assert node["metadata"]["annotations"] == {KWOK_NODE_ANNOTATION: "fake"}
        assert set(node["status"]) == {"capacity", "allocatable"}
        assert node["status"]["capacity"][GPU_RESOURCE] == "8"


def test_jobsets_webhooks_are_patched_as_its_kustomization_does_and_called_by_url(manifests: Path) -> None:
    configurations = jobset.webhook_configurations(manifests, "https://127.0.0.1:9443", "Q0E=")
    assert {c["metadata"]["name"] for c in configurations} == {
        "jobset-mutating-webhook-configuration",
        "jobset-validating-webhook-configuration",
    }
    webhooks = {w["name"]: w for c in configurations for w in c["webhooks"]}
    assert {"mjobset.kb.io", "mpod.kb.io", "vjobset.kb.io", "vpod.kb.io"} <= set(webhooks)
    for name in ("mpod.kb.io", "vpod.kb.io"):
        assert webhooks[name]["objectSelector"] == {
            "matchExpressions": [{"key": "jobset.sigs.k8s.io/jobset-name", "operator": "Exists"}]
        }
    for webhook in webhooks.values():
        assert webhook["clientConfig"]["url"].startswith("https://127.0.0.1:9443/")
        assert webhook["clientConfig"]["caBundle"] == "Q0E="
        assert "service" not in webhook["clientConfig"]


def test_jobsets_controller_runs_under_its_modules_cluster_role(manifests: Path) -> None:
    account, role, binding = jobset.rbac(manifests)
    assert account["kind"] == "ServiceAccount"
    assert role["kind"] == "ClusterRole"
    assert role["metadata"]["name"].startswith(jobset.NAME_PREFIX)
    assert any("jobsets" in rule.get("resources", []) for rule in role["rules"])
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": jobset.IDENTITY.service_account, "namespace": jobset.NAMESPACE}
    ]


def test_the_webhook_and_the_resizer_run_as_the_charts_service_accounts(tmp_path: Path) -> None:
    objects = render_chart(chart_values("Q0E=", "elastic"))
    identities = chart_identities(objects)
    assert set(identities) == {"webhook", "resizer"}
    assert identities["resizer"].username.startswith("system:serviceaccount:exclusive-placement:")
    kinds = [obj["kind"] for obj in rbac_objects(objects)]
    assert kinds == sorted(
        kinds, key=["ServiceAccount", "ClusterRole", "ClusterRoleBinding", "Role", "RoleBinding"].index
    )
    config = token_kubeconfig("https://127.0.0.1:6443", tmp_path / "ca.crt", "t0k3n", "resizer")
    assert "token: t0k3n" in config
    assert str(tmp_path / "ca.crt") in config


def audit_line(verb: str, resource: str, code: int, *, namespace: str = "ns", subresource: str = "") -> str:
    ref = {
        "resource": resource,
        "namespace": namespace,
        **({"subresource": subresource} if subresource else {}),
    }
    event = {
        "verb": verb,
        "objectRef": ref,
        "user": {"username": "system:serviceaccount:kube-system:job-controller"},
        "userAgent": "kube-controller-manager/v1.36.3",
        "responseStatus": {"code": code},
    }
    return json.dumps(event) + "\n"


def test_the_audit_log_counts_pod_creations_from_a_mark(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    path.write_text(audit_line("create", "pods", 201))
    log = AuditLog(path)
    mark = log.mark()
    with path.open("a") as out:
        out.write(audit_line("create", "pods", 201))
        out.write(audit_line("create", "pods", 403))
        out.write(audit_line("create", "pods", 201, subresource="binding"))  # the scheduler's bind
        out.write(audit_line("create", "pods", 201, namespace="other"))
        out.write(audit_line("patch", "pods", 200))
        out.write('{"verb": "create", "objectRef": {"resource": "pods"')  # a line still being written
    assert pod_creations(log.requests(since=mark), "ns") == {201: 1, 403: 1}
    assert pod_creations(log.requests(), "ns") == {201: 2, 403: 1}
    assert list(AuditLog(tmp_path / "absent.log").requests()) == []


def test_an_audit_mark_taken_while_a_line_is_half_written_starts_at_that_line(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    written = audit_line("create", "pods", 201)
    half = audit_line("create", "pods", 403)
    path.write_text(written + half[: len(half) // 2])  # the API server's write, partly visible
    log = AuditLog(path)
    mark = log.mark()
    assert mark == len(written.encode())
    with path.open("a") as out:
        out.write(half[len(half) // 2 :])
    assert pod_creations(log.requests(since=mark), "ns") == {403: 1}
    assert AuditLog(tmp_path / "absent.log").mark() == 0


def test_an_audit_mark_finds_the_last_line_end_beyond_one_read(tmp_path: Path) -> None:
    path = tmp_path / "audit.log"
    first = audit_line("create", "pods", 201)
    path.write_text(first + "x" * 200_000)  # a line longer than the reader's backward step, unfinished
    assert AuditLog(path).mark() == len(first.encode())
    path.write_text("y" * 70_000)
    assert AuditLog(path).mark() == 0
