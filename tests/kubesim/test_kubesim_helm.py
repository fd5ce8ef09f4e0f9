"""Helm (helm-python-sdk, the real Helm library) installs and uninstalls a chart on kubesim unchanged."""

from __future__ import annotations

from pathlib import Path

import pytest
from kubernetes import client

from kubesim.testing import KubesimServer
from tests.support.kube import kube_client, name_of

helm_python = pytest.importorskip("helm_python", reason="helm-python-sdk is not installed")

TEMPLATES = {
    "configmap.yaml": """
apiVersion: v1
kind: ConfigMap
metadata:
  name: {{ .Release.Name }}-settings
data:
  strategy: {{ .Values.strategy | quote }}
""",
    "deployment.yaml": """
apiVersion: apps/v1
kind: Deployment
metadata:
  name: {{ .Release.Name }}-app
spec:
  replicas: 1
  selector: {matchLabels: {app: demo}}
  template:
    metadata: {labels: {app: demo}}
    spec:
      containers: [{name: app, image: "busybox:1.36"}]
""",
    "job.yaml": """
apiVersion: batch/v1
kind: Job
metadata:
  name: {{ .Release.Name }}-job
spec:
  completions: 2
  parallelism: 2
  completionMode: Indexed
  template:
    spec:
      restartPolicy: Never
      containers: [{name: main, image: "busybox:1.36"}]
""",
}


def write_chart(root: Path) -> Path:
    chart = root / "demo"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: demo\nversion: 0.1.0\n")
    (chart / "values.yaml").write_text("strategy: elastic\n")
    for name, text in TEMPLATES.items():
        (chart / "templates" / name).write_text(text)
    return chart


def test_helm_install_and_uninstall(tmp_path: Path) -> None:
    with KubesimServer(nodes=2, pools=1, time_scale=0.01) as sim:
        helm = helm_python.Config(
            kubeconfig_path=str(sim.kubeconfig_path), namespace="default", storage_driver="memory"
        )
        chart = helm_python.Chart.load(str(write_chart(tmp_path)))
        release = helm.install(chart, "rel", {"strategy": "gate"}, namespace="default")
        assert release["status"] == "deployed"
        with kube_client(sim.kubeconfig_path) as api_client:
            core, batch = client.CoreV1Api(api_client), client.BatchV1Api(api_client)
            assert core.read_namespaced_config_map("rel-settings", "default").data == {"strategy": "gate"}
            job = batch.read_namespaced_job("rel-job", "default")
            assert job.spec is not None
            assert job.spec.completions == 2
            assert (
                client.AppsV1Api(api_client).read_namespaced_deployment("rel-app", "default").spec.replicas
                == 1
            )
            helm.uninstall("rel")
            assert [name_of(c) for c in core.list_namespaced_config_map("default").items] == []
            assert batch.list_namespaced_job("default").items == []
