"""Admission cost: pod creates with and without a TLS mutating webhook (printed with -s, never asserted)."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from kubesim.apiserver.server import ApiServer
from kubesim.testing import KubesimServer
from tests.kubesim.kubesim_webhook_fixture import running_webhook
from tests.support.builders import make_pod

CREATES = 300


def pod(name: str) -> dict[str, Any]:
    return make_pod(name, None).obj()


async def create_many(api: ApiServer, prefix: str) -> float:
    start = time.perf_counter()
    for index in range(CREATES):
        await api.create("pods", pod(f"{prefix}-{index}"), namespace="default", copy=False)
    return (time.perf_counter() - start) / CREATES * 1000


def test_admission_cost_per_pod_create(tmp_path: Path) -> None:
    with running_webhook(tmp_path) as hook, KubesimServer(nodes=1, pools=1, controllers=False) as sim:
        bare_ms = sim.call(lambda api: create_many(api, "bare"))
        config = {
            "metadata": {"name": "cost"},
            "webhooks": [
                {
                    "name": "cost.kubesim.test",
                    "clientConfig": {"url": f"{hook.url}/mutate", "caBundle": hook.ca_bundle},
                    "rules": [
                        {
                            "operations": ["CREATE"],
                            "apiGroups": [""],
                            "apiVersions": ["v1"],
                            "resources": ["pods"],
                        }
                    ],
                    "sideEffects": "None",
                    "admissionReviewVersions": ["v1"],
                }
            ],
        }
        sim.call(lambda api: api.create("mutatingwebhookconfigurations", config))
        hooked_ms = sim.call(lambda api: create_many(api, "hooked"), timeout=120)
        mutated, _ = sim.call(lambda api: api.list("pods", label_selector="mutated=1"))
        stats = sim.stats()
    assert len(mutated) == CREATES
    assert stats["admission"]["calls"] == CREATES
    assert stats["pods"]["create_accepted"] == 2 * CREATES
    print(
        f"kubesim admission cost: {bare_ms:.3f} ms/create without webhooks, "
        f"{hooked_ms:.3f} ms with one TLS webhook"
    )
