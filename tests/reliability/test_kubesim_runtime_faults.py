"""kubesim's runtime fault endpoints the soak relies on: `POST /debug/faults`, `/debug/fail-nodes`,
`/debug/recover-nodes` (a cluster set up cleanly, then faults switched on; a node pool going away)."""

from __future__ import annotations

from collections.abc import Iterator

import httpx
import pytest

from kubesim.testing import KubesimServer
from placement.constants import GKE_NODEPOOL_LABEL

UNREACHABLE = "node.kubernetes.io/unreachable"


@pytest.fixture
def sim() -> Iterator[KubesimServer]:
    with KubesimServer(nodes=4, pools=2, time_scale=0.01) as server:
        yield server


def test_faults_switched_on_and_off_at_runtime(sim: KubesimServer) -> None:
    with httpx.Client(base_url=sim.url, timeout=10) as http:
        assert http.get("/api/v1/namespaces").status_code == 200
        assert http.post("/debug/faults", json={"faults": "error-rate=1,error-codes=503"}).status_code == 200
        failed = http.get("/api/v1/namespaces")
        assert failed.status_code == 503
        assert failed.json()["kind"] == "Status"
        assert http.get("/debug/stats").json()["faults"]["injected"]["503"] >= 1  # /debug is exempt
        assert http.post("/debug/faults", json={"faults": ""}).status_code == 200
        assert http.get("/api/v1/namespaces").status_code == 200
        bad = http.post("/debug/faults", json={"faults": "error-rate=2"})
        assert bad.status_code == 400
        assert "error-rate" in bad.json()["message"]


def test_fail_and_recover_a_node_pool(sim: KubesimServer) -> None:
    with httpx.Client(base_url=sim.url, timeout=10) as http:
        nodes = http.get("/api/v1/nodes").json()["items"]
        pool = nodes[0]["metadata"]["labels"][GKE_NODEPOOL_LABEL]
        in_pool = {
            n["metadata"]["name"] for n in nodes if n["metadata"]["labels"][GKE_NODEPOOL_LABEL] == pool
        }
        selector = {"labelSelector": f"{GKE_NODEPOOL_LABEL}={pool}"}
        result = http.post("/debug/fail-nodes", params=selector).json()
        assert result["nodes"] == len(in_pool)
        tainted = {
            n["metadata"]["name"]
            for n in http.get("/api/v1/nodes").json()["items"]
            if any(t["key"] == UNREACHABLE for t in n["spec"].get("taints") or [])
        }
        assert tainted == in_pool
        assert http.post("/debug/recover-nodes", params=selector).json()["nodes"] == len(in_pool)
        still = [n for n in http.get("/api/v1/nodes").json()["items"] if (n["spec"].get("taints") or [])]
        assert still == []
        assert http.post("/debug/fail-nodes").status_code == 400
