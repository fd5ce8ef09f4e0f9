"""Real kubectl (1.32+) sends its imperative `create` subcommands as `application/vnd.kubernetes.protobuf`.

For each subcommand: the body kubectl sends decodes to exactly the JSON kubectl prints with
`--dry-run=client -o json` (what it would have sent as JSON), the server's answer to the protobuf request
equals its answer to the same object sent as JSON, and the object is really created.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from certs.generate import create_ca
from kubesim.apiserver.protobuf.decode import decode_object
from kubesim.testing import KubesimServer
from tests.kubesim.kubectl_fixture import KUBECTL, kubectl, run_kubectl, versioned_kubectl

pytestmark = [
    pytest.mark.kubectl,
    pytest.mark.skipif(KUBECTL is None, reason="kubectl 1.33 is not installed on this machine"),
]

PROTOBUF = "application/vnd.kubernetes.protobuf"
# (subcommand and arguments, what `kubectl create` prints)
CREATE_COMMANDS = [
    (["namespace", "team-a"], "namespace/team-a created"),
    (
        ["configmap", "settings", "--from-literal=mode=fast", "--from-literal=size=3"],
        "configmap/settings created",
    ),
    (["secret", "generic", "creds", "--from-literal=user=admin"], "secret/creds created"),
    (
        [
            "secret",
            "docker-registry",
            "pull",
            "--docker-server=r.example",
            "--docker-username=u",
            "--docker-password=p",
        ],
        "secret/pull created",
    ),
    (["serviceaccount", "builder"], "serviceaccount/builder created"),
    (["job", "once", "--image=busybox:1.36", "--", "echo", "hi"], "job.batch/once created"),
    (
        [
            "cronjob",
            "nightly",
            "--image=busybox:1.36",
            "--schedule=0 3 * * *",
            "--restart=OnFailure",
            "--",
            "date",
        ],
        "cronjob.batch/nightly created",
    ),
    (["deployment", "web", "--image=nginx:1.27", "--port=80", "--replicas=2"], "deployment.apps/web created"),
    (
        ["priorityclass", "batch-high", "--value=1000", "--description=batch", "--preemption-policy=Never"],
        "priorityclass.scheduling.k8s.io/batch-high created",
    ),
    (
        ["role", "reader", "--verb=get,list", "--resource=pods", "--resource-name=web"],
        "role.rbac.authorization.k8s.io/reader created",
    ),
    (
        ["rolebinding", "read", "--role=reader", "--user=bob", "--serviceaccount=default:builder"],
        "rolebinding.rbac.authorization.k8s.io/read created",
    ),
    (
        ["clusterrole", "logs", "--verb=get", "--non-resource-url=/logs/*"],
        "clusterrole.rbac.authorization.k8s.io/logs created",
    ),
    (
        ["clusterrole", "aggregate", "--aggregation-rule=rbac.example.com/aggregate=true"],
        "clusterrole.rbac.authorization.k8s.io/aggregate created",
    ),
    (
        ["clusterrolebinding", "logs", "--clusterrole=logs", "--group=devs"],
        "clusterrolebinding.rbac.authorization.k8s.io/logs created",
    ),
    (["service", "clusterip", "api", "--tcp=80:8080"], "service/api created"),
    (["service", "nodeport", "edge", "--tcp=443:8443", "--node-port=30443"], "service/edge created"),
    (["service", "loadbalancer", "lb", "--tcp=80:8080"], "service/lb created"),
    (["service", "externalname", "ext", "--external-name=db.example.com"], "service/ext created"),
    (
        ["poddisruptionbudget", "web-pdb", "--selector=app=web", "--min-available=50%"],
        "poddisruptionbudget.policy/web-pdb created",
    ),
    (
        ["poddisruptionbudget", "web-pdb-int", "--selector=app=web", "--max-unavailable=1"],
        "poddisruptionbudget.policy/web-pdb-int created",
    ),
]
_HEX_LINE = re.compile(r"^\s+[0-9a-f]{8}  (?P<hex>[0-9a-f ]+?)\s*\|")


@pytest.fixture(scope="module")
def sim() -> Iterator[KubesimServer]:
    with KubesimServer(nodes=3, pools=3, time_scale=0.01) as server:
        yield server


def logged_protobuf_body(log: str) -> bytes:
    """The first multi-line request body kubectl logs at -v=9 (klog prints binary bodies as a hex dump)."""
    lines = log.splitlines()
    start = next(i for i, line in enumerate(lines) if '"Request Body" body=<' in line)
    body = bytearray()
    for line in lines[start + 1 :]:
        match = _HEX_LINE.match(line)
        if match is None:
            break
        body += bytes.fromhex(match["hex"])
    return bytes(body)


def with_flags(args: list[str], *flags: str) -> list[str]:
    """`args` with `flags` added before a `--` (after it everything is the container's command)."""
    if "--" not in args:
        return [*args, *flags]
    split = args.index("--")
    return [*args[:split], *flags, *args[split:]]


def comparable(obj: dict[str, Any]) -> dict[str, Any]:
    """The object without what differs between two creations: uid (also in Job labels), timestamps, rv."""
    meta = obj["metadata"]
    uid = meta.pop("uid")
    for key in ("creationTimestamp", "resourceVersion"):
        meta.pop(key, None)
    result: dict[str, Any] = json.loads(json.dumps(obj).replace(uid, "<uid>"))
    return result


def assert_protobuf_create_is_the_json_create(sim: KubesimServer, args: list[str], printed: str) -> None:
    sent_as_json = json.loads(kubectl(sim, "create", *with_flags(args, "--dry-run=client", "-o", "json")))

    via_protobuf = run_kubectl(sim, "create", *with_flags(args, "--dry-run=server", "-o", "json", "-v=9"))
    assert via_protobuf.returncode == 0, via_protobuf.stderr[-3000:]
    assert f"Content-Type: {PROTOBUF}" in via_protobuf.stderr
    assert decode_object(logged_protobuf_body(via_protobuf.stderr)) == sent_as_json

    via_json = kubectl(
        sim, "create", "-f", "-", "--dry-run=server", "-o", "json", stdin=json.dumps(sent_as_json)
    )
    assert comparable(json.loads(via_protobuf.stdout)) == comparable(json.loads(via_json))

    assert kubectl(sim, "create", *args).strip() == printed
    kind_and_name = printed.split(maxsplit=1)[0]
    stored, answered = (
        json.loads(kubectl(sim, "get", kind_and_name, "-o", "json")),
        json.loads(via_protobuf.stdout),
    )
    stored.pop("status", None), answered.pop("status", None)  # a Job's controller starts at once
    assert comparable(stored) == comparable(answered)


@pytest.mark.parametrize(
    ("args", "printed"), CREATE_COMMANDS, ids=["-".join(args[:2]) for args, _ in CREATE_COMMANDS]
)
def test_create_subcommand_sends_protobuf_that_decodes_to_its_json(
    sim: KubesimServer, args: list[str], printed: str
) -> None:
    assert_protobuf_create_is_the_json_create(sim, args, printed)


def test_create_secret_tls_sends_protobuf_that_decodes_to_its_json(
    sim: KubesimServer, tmp_path: Path
) -> None:
    pair = create_ca("kubesim-test")
    (tmp_path / "tls.crt").write_bytes(pair.cert_pem)
    (tmp_path / "tls.key").write_bytes(pair.key_pem)
    args = ["secret", "tls", "serving", f"--cert={tmp_path / 'tls.crt'}", f"--key={tmp_path / 'tls.key'}"]
    assert_protobuf_create_is_the_json_create(sim, args, "secret/serving created")


def test_create_job_from_cronjob_sends_the_template_as_protobuf(sim: KubesimServer) -> None:
    kubectl(sim, "create", "cronjob", "hourly", "--image=busybox:1.36", "--schedule=0 * * * *", "--", "date")
    assert (
        kubectl(sim, "create", "job", "--from=cronjob/hourly", "hourly-now").strip()
        == "job.batch/hourly-now created"
    )
    job = json.loads(kubectl(sim, "get", "job", "hourly-now", "-o", "json"))
    cronjob = json.loads(kubectl(sim, "get", "cronjob", "hourly", "-o", "json"))
    assert job["metadata"]["annotations"] == {"cronjob.kubernetes.io/instantiate": "manual"}
    assert job["metadata"]["ownerReferences"] == [
        {
            "apiVersion": "batch/v1",
            "kind": "CronJob",
            "name": "hourly",
            "uid": cronjob["metadata"]["uid"],
            "controller": True,
        }
    ]
    template = cronjob["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    assert job["spec"]["template"]["spec"]["containers"] == template["containers"]
    assert job["spec"]["template"]["spec"]["securityContext"] == {}


def test_field_kubesim_does_not_decode_is_refused_with_415_and_nothing_is_stored(sim: KubesimServer) -> None:
    cronjob = {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": {"name": "with-volume"},
        "spec": {
            "schedule": "0 * * * *",
            "jobTemplate": {
                "spec": {
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "main", "image": "busybox:1.36"}],
                            "volumes": [{"name": "scratch", "emptyDir": {}}],
                        }
                    }
                }
            },
        },
    }
    kubectl(sim, "create", "-f", "-", stdin=json.dumps(cronjob))
    refused = run_kubectl(sim, "create", "job", "--from=cronjob/with-volume", "from-volume")
    assert refused.returncode == 1
    assert "error: failed to create job: the body of the request was in an unknown format" in refused.stderr
    assert "accepted media types include: application/json, application/yaml" in refused.stderr
    assert "spec.template.spec.volumes (field 1 of k8s.io.api.core.v1.PodSpec)" in refused.stderr
    assert "from-volume" not in kubectl(sim, "get", "jobs", "-o", "name")


def test_drain_sends_delete_options_as_protobuf(sim: KubesimServer) -> None:
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "drained"},
        "spec": {"containers": [{"name": "main", "image": "busybox:1.36"}]},
    }
    kubectl(sim, "create", "-f", "-", stdin=json.dumps(pod))
    kubectl(sim, "wait", "--for=condition=Ready", "pod/drained", "--timeout=20s")
    node = kubectl(sim, "get", "pod", "drained", "-o", "jsonpath={.spec.nodeName}")
    try:
        drained = run_kubectl(
            sim, "drain", node, "--disable-eviction", "--force", "--grace-period=7", "--timeout=20s", "-v=9"
        )
    finally:
        kubectl(sim, "uncordon", node)
    assert drained.returncode == 0, drained.stderr[-3000:]
    assert f"Content-Type: {PROTOBUF}" in drained.stderr
    # The DELETE's answer (logged as an escaped JSON string) carries the grace period the body asked for.
    assert '\\"name\\":\\"drained\\"' in drained.stderr
    assert '\\"deletionGracePeriodSeconds\\":7' in drained.stderr
    assert "drained" not in kubectl(sim, "get", "pods", "-o", "name")


@pytest.mark.parametrize("version", ["1.27", "1.28", "1.29", "1.30", "1.31", "1.32"])
def test_older_kubectl_create_subcommands_still_work(sim: KubesimServer, version: str) -> None:
    binary = versioned_kubectl(version)
    if binary is None:
        pytest.skip(f"kubectl {version} is not installed on this machine")
    suffix = version.replace(".", "-")
    created = kubectl(sim, "create", "namespace", f"ns-{suffix}", binary=binary)
    assert created.strip() == f"namespace/ns-{suffix} created"
    created = kubectl(sim, "create", "configmap", f"cm-{suffix}", "--from-literal=a=b", binary=binary)
    assert created.strip() == f"configmap/cm-{suffix} created"
    stored = json.loads(kubectl(sim, "get", "configmap", f"cm-{suffix}", "-o", "json"))
    assert stored["data"] == {"a": "b"}
