"""`devstack run -f` applies any kind the API server serves, found through discovery, and says in one line
which one it cannot."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from devstack.__main__ import main
from devstack.kube import KubeClient, UnservedKind
from kubesim.testing import KubesimServer

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


@pytest.fixture(scope="module")
def client() -> Iterator[KubeClient]:
    with KubesimServer(nodes=2, pools=1, controllers=False) as sim, KubeClient(sim.url) as kube:
        yield kube


@pytest.mark.parametrize(("obj", "collection"), [(CONFIG_MAP, "configmaps"), (SERVICE, "services")])
def test_kinds_outside_devstacks_table_are_found_in_discovery(
    client: KubeClient, obj: Obj, collection: str
) -> None:
    created = client.create(obj, namespace="default")
    assert (created["kind"], created["metadata"]["namespace"]) == (obj["kind"], "default")
    assert created["metadata"]["name"] == obj["metadata"]["name"]
    assert client.served_type(str(obj["apiVersion"]), str(obj["kind"])).plural == collection


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
    client: KubeClient, api_version: str, kind: str, message: str
) -> None:
    with pytest.raises(UnservedKind) as refused:
        client.served_type(api_version, kind)
    assert str(refused.value) == message


def demo(tmp_path: Path, *objects: Obj) -> int:
    """`devstack demo -f` a manifest of `objects`, on the smallest cluster."""
    manifest = tmp_path / "manifest.yaml"
    manifest.write_text(yaml.safe_dump_all(objects))
    return main(
        ["demo", "-f", str(manifest), "--nodes", "2", "--pools", "1", "--workdir", str(tmp_path / "w")]
    )


def test_run_f_creates_what_it_can_and_names_what_it_cannot(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert demo(tmp_path, CONFIG_MAP, QUEUE) == 1
    out, err = capsys.readouterr()
    assert "created ConfigMap default/settings" in out
    assert err == (
        "\nFAILED: cannot create ClusterQueue cq: the API server does not serve kueue.x-k8s.io/v1beta1 "
        "(kind ClusterQueue)\n"
    )


def test_a_manifest_without_jobs_has_nothing_to_place(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert demo(tmp_path, CONFIG_MAP, SERVICE) == 0
    out = capsys.readouterr().out
    assert "created Service default/trainer" in out
    assert out.rstrip().endswith("nothing to place: the manifests hold no Job or JobSet")
